package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kaas-dev/kaas/wire/tlsfiles/tlstest"
)

func TestParseListenersFlags(t *testing.T) {
	sasl := []string{"--sasl-mechanism", "PLAIN", "--sasl-user", "u", "--sasl-password", "p"}
	tests := []struct {
		name    string
		args    []string
		check   func(config) bool
		wantErr string
	}{
		{name: "three listeners", args: append([]string{"--listeners", "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094",
			"--rounds", "3", "--connect", "100"}, sasl...), check: func(c config) bool {
			l := c.Listeners
			return len(l) == 3 && l[0].Name == "PLAINTEXT" && !l[0].sec.TLS && l[0].sec.SASLMechanism == "" &&
				l[1].Protocol == "SSL" && l[1].sec.TLS && l[1].sec.SASLMechanism == "" && l[1].Addr == "127.0.0.1:9093" &&
				l[2].sec.TLS && l[2].sec.SASLMechanism == "PLAIN" && c.Rounds == 3 && c.Connect == 100 && c.ConnectParallel == 4
		}},
		{name: "SASL listener needs a mechanism", args: []string{"--listeners", "SASL_SSL://127.0.0.1:9094"}, wantErr: "needs --sasl-mechanism"},
		{name: "not a protocol", args: []string{"--listeners", "FOO://127.0.0.1:9094"}, wantErr: "--listeners"},
		{name: "no host", args: []string{"--listeners", "PLAINTEXT://:9094"}, wantErr: "needs a host"},
		{name: "not with brokers", args: []string{"--listeners", "PLAINTEXT://127.0.0.1:9092", "--brokers", "127.0.0.1:9092"}, wantErr: "goes without"},
		{name: "rounds need listeners", args: []string{"--kfake", "--rounds", "2"}, wantErr: "need --listeners"},
		{name: "connect needs listeners", args: []string{"--kfake", "--connect", "2"}, wantErr: "need --listeners"},
		{name: "zero rounds", args: []string{"--listeners", "PLAINTEXT://127.0.0.1:9092", "--rounds", "0"}, wantErr: "--rounds"},
		{name: "zero parallel", args: []string{"--listeners", "PLAINTEXT://127.0.0.1:9092", "--connect-parallel", "0"}, wantErr: "--connect-parallel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(cfg) {
				t.Fatalf("unexpected config %+v", cfg)
			}
		})
	}
}

func TestRoundOrder(t *testing.T) {
	ls := []benchListener{{Name: "A"}, {Name: "B"}, {Name: "C"}}
	for round, want := range map[int]string{1: "ABC", 2: "BCA", 3: "CAB", 4: "ABC", 5: "BCA"} {
		got := ""
		for _, l := range roundOrder(ls, round) {
			got += l.Name
		}
		if got != want {
			t.Errorf("round %d: %s, want %s", round, got, want)
		}
	}
	if got := roundOrder(ls[:1], 7); len(got) != 1 || got[0].Name != "A" {
		t.Errorf("one listener: %v", got)
	}
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func loadRun(round int, name string, produceMB, consumeMB float64) listenerRun {
	return listenerRun{Round: round, Listener: name, Load: &targetResult{
		Produce: &produceResult{MBPerSec: produceMB, RecordsPerSec: produceMB * 1000},
		Consume: &consumeResult{MBPerSec: consumeMB, RecordsPerSec: consumeMB * 1000}}}
}

// TestListenerTables: medians per listener over interleaved rounds, ratios
// to the PLAINTEXT listener wherever it is, blank cells for what was not
// measured.
func TestListenerTables(t *testing.T) {
	ls := []benchListener{{Name: "SSL", Protocol: "SSL"}, {Name: "PLAINTEXT", Protocol: "PLAINTEXT"}}
	runs := []listenerRun{
		loadRun(1, "SSL", 60, 100), loadRun(1, "PLAINTEXT", 100, 300),
		loadRun(2, "SSL", 90, 110), loadRun(2, "PLAINTEXT", 80, 200),
		loadRun(3, "SSL", 75, 90), loadRun(3, "PLAINTEXT", 120, 250),
	}
	runs[0].Connect = &connectResult{Conns: 10, ConnsPerSec: 500, Total: latencySummary{Count: 10, P50Ms: 2, P99Ms: 4},
		TLS: latencySummary{Count: 10, P50Ms: 1.5}, ClientCPUMs: 0.8}
	sum := summarizeListeners(ls, runs)
	if len(sum) != 2 || sum[0].Rounds != 3 || sum[0].ProduceMBPerSec != 75 || sum[0].ConsumeMBPerSec != 100 ||
		sum[1].ProduceMBPerSec != 100 || sum[1].ConsumeMBPerSec != 250 || sum[0].ProduceRecordsPerSec != 75000 {
		t.Fatalf("summary %+v", sum)
	}
	if sum[0].ConnsPerSec != 500 || sum[0].TLSP50Ms != 1.5 || sum[0].SASLP50Ms != 0 || sum[1].ConnsPerSec != 0 {
		t.Fatalf("connect summary %+v", sum)
	}
	if b := baseline(ls); b != 1 {
		t.Fatalf("baseline %d", b)
	}
	header := "listener   produce MB/s  produce records/s  produce / PLAINTEXT  consume MB/s  consume records/s  consume / PLAINTEXT"
	want := strings.Join([]string{header, strings.Repeat("-", len(header)),
		"SSL                75.0              75000                0.75x         100.0             100000                0.40x",
		"PLAINTEXT         100.0             100000                1.00x         250.0             250000                1.00x",
		""}, "\n")
	if got := throughputTable(sum, 1).render(); got != want {
		t.Fatalf("throughput table:\n%s\nwant:\n%s", got, want)
	}
	ct := connectTable(sum).render()
	lines := strings.Split(ct, "\n")
	if !strings.HasPrefix(lines[0], "listener   conns/s  connect p50 ms") || strings.TrimSpace(lines[3]) != "PLAINTEXT" ||
		!strings.Contains(lines[2], "1.500") || !strings.Contains(lines[2], "0.800") {
		t.Fatalf("connect table:\n%s", ct)
	}
	rt := roundsTable(runs[:2], true).render()
	if !strings.Contains(rt, "1      SSL") || !strings.Contains(rt, "500") || strings.Count(rt, "\n") != 4 {
		t.Fatalf("rounds table:\n%s", rt)
	}
}

func TestParseProcStatCPU(t *testing.T) {
	line := "4242 (kaas broker) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 25 0 0 20 0 12 0 100 0 0"
	if d, ok := parseProcStatCPU(line); !ok || d.Milliseconds() != 1750 {
		t.Fatalf("got %v %v", d, ok)
	}
	if _, ok := parseProcStatCPU("garbage"); ok {
		t.Fatal("parsed garbage")
	}
}

// TestListenersAgainstKfake runs --listeners end to end against three kfake
// clusters standing in for one broker's listeners: plaintext, TLS, and TLS
// with SCRAM-SHA-512. Counts only, no timings.
func TestListenersAgainstKfake(t *testing.T) {
	ca := tlstest.NewCA(t, "root")
	certFile, keyFile, caFile := ca.ServerFiles(t, t.TempDir())
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srvTLS := &tls.Config{Certificates: []tls.Certificate{pair}}
	start := func(opts ...kfake.Opt) string {
		c, err := kfake.NewCluster(append(opts, kfake.NumBrokers(1))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c.ListenAddrs()[0]
	}
	plain := start()
	ssl := start(kfake.TLS(srvTLS))
	saslSSL := start(kfake.TLS(srvTLS), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "bench", "pw"))

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--listeners", "PLAINTEXT://" + plain + ",SSL://" + ssl + ",SASL_SSL://" + saslSSL,
		"--tls-ca-file", caFile, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "bench", "--sasl-password", "pw",
		"--rounds", "2", "--connect", "5", "--connect-parallel", "2",
		"--records", "600", "--producers", "2", "--partitions", "2", "--record-size", "64", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	var rep listenersReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if !rep.OK || len(rep.Runs) != 6 || len(rep.Summary) != 3 {
		t.Fatalf("report: %s", stdout.String())
	}
	order := []string{"PLAINTEXT", "SSL", "SASL_SSL", "SSL", "SASL_SSL", "PLAINTEXT"}
	for i, r := range rep.Runs {
		if r.Listener != order[i] || r.Round != 1+i/3 {
			t.Fatalf("run %d is %s round %d: not interleaved and rotated", i, r.Listener, r.Round)
		}
		if r.Load == nil || r.Load.Produce.Records != 600 || !r.Load.Consume.Verified {
			t.Fatalf("run %d load: %+v", i, r.Load)
		}
		c := r.Connect
		if c == nil || c.Conns != 5 || c.Errors != 0 || c.Total.Count != 5 {
			t.Fatalf("run %d connect: %+v", i, c)
		}
		if wantTLS, wantSASL := r.Listener != "PLAINTEXT", r.Listener == "SASL_SSL"; (c.TLS.Count == 5) != wantTLS || (c.SASL.Count == 5) != wantSASL {
			t.Fatalf("run %d (%s) phases: TLS %d, SASL %d", i, r.Listener, c.TLS.Count, c.SASL.Count)
		}
	}

	// A wrong password fails the connect measurement, and the run.
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"--listeners", "SASL_SSL://" + saslSSL, "--tls-ca-file", caFile,
		"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "bench", "--sasl-password", "guess",
		"--records", "10", "--connect", "1", "--timeout", "5s"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "FAIL") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
}

// TestCPUPerMB: CPU milliseconds per MB of values, medians, and the
// broker's ratio to the baseline.
func TestCPUPerMB(t *testing.T) {
	if v, ok := cpuPerMB(0.5, 100e6); !ok || v != 5 {
		t.Fatalf("cpuPerMB = %v %v", v, ok)
	}
	if _, ok := cpuPerMB(0, 100e6); ok {
		t.Fatal("no CPU measured, yet a figure")
	}
	ls := []benchListener{{Name: "PLAINTEXT", Protocol: "PLAINTEXT"}, {Name: "SSL", Protocol: "SSL"}}
	run := func(name string, brokerSec float64) listenerRun {
		r := loadRun(1, name, 1, 1)
		r.Load.Produce.Bytes, r.Load.Produce.CPU = 200e6, phaseCPU{ClientSeconds: 0.2, BrokerSeconds: brokerSec}
		r.Load.Consume.Bytes, r.Load.Consume.CPU = 200e6, phaseCPU{ClientSeconds: 0.4}
		return r
	}
	sum := summarizeListeners(ls, []listenerRun{run("PLAINTEXT", 1), run("SSL", 1.5)})
	if sum[1].ProduceBrokerCPUPerMB != 7.5 || sum[1].ProduceClientCPUPerMB != 1 || sum[1].ConsumeClientCPUPerMB != 2 ||
		sum[1].ConsumeBrokerCPUPerMB != 0 {
		t.Fatalf("summary %+v", sum[1])
	}
	lines := strings.Split(cpuTable(sum, 0).render(), "\n")
	if f := strings.Fields(lines[3]); len(f) != 6 || f[0] != "SSL" || f[2] != "7.50" || f[3] != "1.50x" || f[5] != "-" {
		t.Fatalf("cpu table row %q", lines[3])
	}
}
