package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// metricsAt is a broker's /metrics at two instants: the first scrape gets
// the first text, every later one the second.
func metricsAt(t *testing.T, first, second string) *httptest.Server {
	t.Helper()
	var scrapes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		if scrapes.Add(1) == 1 {
			fmt.Fprint(w, first)
		} else {
			fmt.Fprint(w, second)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func throughputText(ordersIn, ordersOut, ordersRecs, logsIn float64) string {
	return fmt.Sprintf(`# HELP kaas_bytes_in_total Bytes produced, by topic.
# TYPE kaas_bytes_in_total counter
kaas_bytes_in_total{topic="orders"} %g
kaas_bytes_in_total{topic="logs"} %g
# HELP kaas_bytes_out_total Bytes fetched, by topic.
# TYPE kaas_bytes_out_total counter
kaas_bytes_out_total{topic="orders"} %g
# HELP kaas_records_in_total Records produced, by topic.
# TYPE kaas_records_in_total counter
kaas_records_in_total{topic="orders"} %g
# HELP kaas_requests_total Requests.
# TYPE kaas_requests_total counter
kaas_requests_total{api="Produce",version="9",error="NONE"} 12
`, ordersIn, logsIn, ordersOut, ordersRecs)
}

// steppingClock advances by step every brokers readings (one per broker
// scraped): each broker's two scrapes are step apart.
func steppingClock(step time.Duration, brokers int) func() time.Time {
	at, reads := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), 0
	return func() time.Time {
		if reads%brokers == 0 {
			at = at.Add(step)
		}
		reads++
		return at
	}
}

func TestTopRatesFromTwoScrapes(t *testing.T) {
	b1 := metricsAt(t, throughputText(1000, 0, 10, 5000), throughputText(21000, 4096, 30, 5000))
	// b2 restarted between the scrapes: its counter went down.
	b2 := metricsAt(t, throughputText(900000, 0, 0, 0), throughputText(2000, 0, 4, 100000))
	src := source{output: "json", admin: adminFlags{url: b1.URL + "," + strings.TrimPrefix(b2.URL, "http://")}}
	ticks := newFakeTicks()
	ticks.c <- time.Time{}
	o := watchOptions{interval: 2 * time.Second, json: true, now: time.Now, ticker: ticks.ticker}
	var out bytes.Buffer
	if err := runWatch(context.Background(), &out, o, topFrames(src, steppingClock(2*time.Second, 2))); err != nil {
		t.Fatal(err)
	}
	var got topRows
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// Per topic, summed over brokers, sorted by bytes in: logs 0+50000,
	// orders 10000+1000 (b2's restart counts from zero).
	want := []throughput{
		{Name: "logs", BytesInPerSec: 50000},
		{Name: "orders", BytesInPerSec: 11000, BytesOutPerSec: 2048, RecordsInPerSec: 12},
	}
	if len(got.Topics) != 2 {
		t.Fatalf("topics %+v", got.Topics)
	}
	for i, w := range want {
		if got.Topics[i] != w {
			t.Errorf("topic %d = %+v, want %+v", i, got.Topics[i], w)
		}
	}
	if len(got.Brokers) != 2 || got.Brokers[0].BytesInPerSec != 51000 || got.Brokers[1].BytesInPerSec != 10000 ||
		got.Brokers[1].RecordsInPerSec != 10 || got.Brokers[0].IntervalSeconds != 2 {
		t.Errorf("brokers %+v", got.Brokers)
	}
}

func TestTopTableAndWatch(t *testing.T) {
	b1 := metricsAt(t, throughputText(0, 0, 0, 0), throughputText(2048, 1024, 8, 0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticks := newFakeTicks()
	ticks.c <- time.Time{}
	ticks.c <- time.Time{}
	frames := topFrames(source{admin: adminFlags{url: b1.URL}}, steppingClock(time.Second, 1))
	calls := 0
	next := func(ctx context.Context) (frame, bool, error) {
		if calls++; calls == 3 {
			cancel()
		}
		return frames(ctx)
	}
	o := watchOptions{watch: true, interval: time.Second, now: time.Now, ticker: ticks.ticker}
	var out bytes.Buffer
	if err := runWatch(ctx, &out, o, next); err != nil {
		t.Fatal(err)
	}
	// The first scrape shows nothing; the second and third a table each
	// (the third at zero: the counters stood still).
	if n := strings.Count(out.String(), "TOPIC"); n != 2 {
		t.Fatalf("%d tables, want 2:\n%s", n, out.String())
	}
	for _, re := range []string{
		`(?m)^orders +2\.0 KiB +1\.0 KiB +8\.0$`,
		`(?m)^orders +0 B +0 B +0\.0$`,
		`(?m)^BROKER +BYTES IN/S +BYTES OUT/S +RECORDS IN/S +ERROR$`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("no line matches %s:\n%s", re, out.String())
		}
	}
}

func TestTopErrors(t *testing.T) {
	o := watchOptions{interval: time.Second, now: time.Now, ticker: newFakeTicks().ticker}
	for _, src := range []source{
		{admin: adminFlags{url: "http://127.0.0.1:1"}}, // nothing listens
		{data: t.TempDir()},                            // no broker has a heartbeat
		{},                                             // no source
	} {
		if err := runWatch(context.Background(), &bytes.Buffer{}, o, topFrames(src, time.Now)); err == nil {
			t.Errorf("top %+v succeeded, want an error", src)
		}
	}
	if _, err := parseThroughput(strings.NewReader("kaas_bytes_in_total{topic=\"x\" 1\n")); err == nil {
		t.Error("a malformed /metrics must be an error")
	}
}
