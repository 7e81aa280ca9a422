package specs

// A real Prometheus (Debian's prometheus package) for the monitoring spec:
// started on 127.0.0.1 with a generated config, queried through its HTTP
// API, always stopped when the spec ends.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// prometheusBinary finds prometheus: a spec without it skips locally and
// fails in CI (CI=true), where .ci/run installs it.
func prometheusBinary() string {
	GinkgoHelper()
	p, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			Fail("prometheus is not on PATH: .ci/run installs Debian's prometheus package")
		}
		Skip("prometheus is not on PATH (apt-get install prometheus): the real-Prometheus spec needs it")
	}
	return p
}

// promServer is one prometheus process.
type promServer struct {
	Addr string // 127.0.0.1:PORT of its web/API listener
	log  string
}

// startPrometheus writes a config scraping targets (job "kaas", every
// second, rules evaluated every second) with the rules file rules, starts
// prometheus on a free 127.0.0.1 port and waits until it is ready.
func startPrometheus(bin string, targets []string, rules []byte) *promServer {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	Expect(os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o600)).To(Succeed())
	quoted := make([]string, len(targets))
	for i, t := range targets {
		quoted[i] = fmt.Sprintf("%q", t)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files:
  - %s
scrape_configs:
  - job_name: kaas
    metrics_path: /metrics
    static_configs:
      - targets: [%s]
`, filepath.Join(dir, "rules.yaml"), strings.Join(quoted, ", "))
	Expect(os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600)).To(Succeed())

	p := &promServer{Addr: freeAddr(), log: filepath.Join(dir, "prometheus.log")}
	logF, err := os.Create(p.log)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+p.Addr,
		"--storage.tsdb.retention.time=1h",
	)
	cmd.Stdout, cmd.Stderr = logF, logF
	By(fmt.Sprintf("starting prometheus on %s scraping %v", p.Addr, targets))
	Expect(cmd.Start()).To(Succeed())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	DeferCleanup(func() {
		// Stop exactly the process we started, by its pid.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logF.Close()
		if CurrentSpecReport().Failed() {
			b, _ := os.ReadFile(p.log)
			AddReportEntry("prometheus log", string(tail(b, 8<<10)))
		}
	})
	Eventually(func(g Gomega) {
		select {
		case <-done:
			b, _ := os.ReadFile(p.log)
			StopTrying("prometheus exited:\n" + string(tail(b, 4<<10))).Now()
		default:
		}
		resp, err := httpClient.Get("http://" + p.Addr + "/-/ready")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	return p
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// promSample is one element of an instant vector.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
}

// api GETs an API path and decodes its data, or returns the API's error.
func (p *promServer) api(path string, q url.Values, data any) error {
	resp, err := httpClient.Get("http://" + p.Addr + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, body)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, env.ErrorType, env.Error)
	}
	return json.Unmarshal(env.Data, data)
}

// query evaluates expr now; the result type is "vector" or "scalar" and
// an instant vector is returned (a scalar as one sample without labels).
func (p *promServer) query(expr string) ([]promSample, error) {
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.api("/api/v1/query", url.Values{"query": {expr}}, &d); err != nil {
		return nil, err
	}
	switch d.ResultType {
	case "vector":
		var v []promSample
		return v, json.Unmarshal(d.Result, &v)
	case "scalar":
		var s []any
		if err := json.Unmarshal(d.Result, &s); err != nil {
			return nil, err
		}
		return []promSample{{Value: s}}, nil
	}
	return nil, fmt.Errorf("query %q: result type %s", expr, d.ResultType)
}

// promTarget is one scrape target's state.
type promTarget struct {
	ScrapeURL string `json:"scrapeUrl"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
}

func (p *promServer) targets() ([]promTarget, error) {
	var d struct {
		ActiveTargets []promTarget `json:"activeTargets"`
	}
	err := p.api("/api/v1/targets", url.Values{"state": {"active"}}, &d)
	return d.ActiveTargets, err
}

// promAlert is one pending or firing alert.
type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func (p *promServer) alerts() ([]promAlert, error) {
	var d struct {
		Alerts []promAlert `json:"alerts"`
	}
	err := p.api("/api/v1/alerts", url.Values{}, &d)
	return d.Alerts, err
}

// firing returns the firing alerts named name whose labels include want.
func (p *promServer) firing(name string, want map[string]string) ([]promAlert, error) {
	all, err := p.alerts()
	if err != nil {
		return nil, err
	}
	var out []promAlert
	for _, a := range all {
		if a.Labels["alertname"] != name || a.State != "firing" {
			continue
		}
		match := true
		for k, v := range want {
			match = match && a.Labels[k] == v
		}
		if match {
			out = append(out, a)
		}
	}
	return out, nil
}

var errNoMetrics = errors.New("the broker serves no /metrics")

// brokerServesMetrics reports whether the broker's admin address answers
// /metrics with kaas families.
// promtoolCheckMetrics runs `promtool check metrics` (beside prometheus in
// Debian's package) on one scrape of b's /metrics.
func promtoolCheckMetrics(b *Broker) error {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		return fmt.Errorf("promtool is not on PATH: %w", err)
	}
	resp, err := httpClient.Get("http://" + b.AdminAddr + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = resp.Body
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("promtool check metrics: %w\n%s", err, out)
	}
	return nil
}

func brokerServesMetrics(b *Broker) error {
	resp, err := httpClient.Get("http://" + b.AdminAddr + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: HTTP %d", errNoMetrics, resp.StatusCode)
	}
	if !strings.Contains(string(body), "go_goroutines") {
		return fmt.Errorf("%w: no go_goroutines in its answer", errNoMetrics)
	}
	return nil
}
