package wire

import (
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/volume/records/recordstest"
)

// TestMetricsAfterProduce: one acks=1 produce of 10 records is counted
// once under Produce v9 with no error, and its bytes and records under
// its topic; a produce to an unknown partition is counted under its error.
func TestMetricsAfterProduce(t *testing.T) {
	br := startBroker(t, nil)
	br.createTopic(t, "metered", 1, nil)
	c := br.dial(t)
	batch := recordstest.Batch{Records: recordstest.Text(10, 100)}.Bytes()
	if resp := c.do(produceReq(9, 1, "metered", 0, batch)).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce: error %d", resp.Topics[0].Partitions[0].ErrorCode)
	}
	c.do(produceReq(9, 1, "metered", 7, batch))
	col := br.srv.Collector(10)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	want := `
# HELP kaas_records_in_total Records produced to partitions served here, by topic (capped: the rest is topic="other").
# TYPE kaas_records_in_total counter
kaas_records_in_total{topic="metered"} 10
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kaas_records_in_total"); err != nil {
		t.Fatal(err)
	}
	got := gatherValues(t, reg)
	for series, want := range map[string]float64{
		`kaas_requests_total{api="Produce",error="none",version="9"}`:                       1,
		`kaas_requests_total{api="Produce",error="UNKNOWN_TOPIC_OR_PARTITION",version="9"}`: 1,
		`kaas_bytes_in_total{topic="metered"}`:                                              float64(len(batch)),
		// createTopic's connection and c.
		`kaas_connections_total{listener="PLAINTEXT"}`: 2,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
}

// gatherValues flattens a registry's counters and gauges to series -> value.
func gatherValues(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// TestTopicCapFoldsIntoOther: beyond the cap, topics are summed into
// "other"; a topic keeps its slot across scrapes; a real topic named
// "other" is always folded.
func TestTopicCapFoldsIntoOther(t *testing.T) {
	tt := func(name string, in int64) engine.TopicTraffic {
		return engine.TopicTraffic{Topic: name, TrafficCounts: dataplane.TrafficCounts{BytesIn: in, RecordsIn: 1}}
	}
	c := newTopicCap(2)
	got := c.fold([]engine.TopicTraffic{tt("b", 1), tt("c", 2), tt("d", 4), tt("other", 8)})
	want := []engine.TopicTraffic{tt("b", 1), tt("c", 2), {Topic: "other", TrafficCounts: dataplane.TrafficCounts{BytesIn: 12, RecordsIn: 2}}}
	if !equalTraffic(got, want) {
		t.Fatalf("first scrape: %+v, want %+v", got, want)
	}
	// "a" sorts first but arrives later: b and c keep their series.
	got = c.fold([]engine.TopicTraffic{tt("a", 16), tt("b", 1), tt("c", 2)})
	want = []engine.TopicTraffic{tt("b", 1), tt("c", 2), {Topic: "other", TrafficCounts: dataplane.TrafficCounts{BytesIn: 16, RecordsIn: 1}}}
	if !equalTraffic(got, want) {
		t.Fatalf("second scrape: %+v, want %+v", got, want)
	}
	// b is no longer served here: its slot goes to a.
	got = c.fold([]engine.TopicTraffic{tt("a", 16), tt("c", 2)})
	want = []engine.TopicTraffic{tt("a", 16), tt("c", 2)}
	if !equalTraffic(got, want) {
		t.Fatalf("third scrape: %+v, want %+v", got, want)
	}
}

func equalTraffic(a, b []engine.TopicTraffic) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestMetricsPassPromtool runs `promtool check metrics` on a scrape of a
// broker that has served requests, when promtool is on PATH.
func TestMetricsPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not on PATH (Debian's prometheus package has it)")
	}
	br := startBroker(t, nil)
	br.createTopic(t, "checked", 1, nil)
	c := br.dial(t)
	c.do(produceReq(9, 1, "checked", 0, recordstest.Batch{Records: recordstest.Text(3, 10)}.Bytes()))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), br.srv.Collector(10))
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = rec.Body
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
