package monitoring

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The chart carries copies of both files (Helm reads only files inside the
// chart); they must not drift from these.
func TestChartCopiesMatch(t *testing.T) {
	for _, c := range []struct {
		name string
		want []byte
	}{
		{"kaas-alerts.yaml", RulesFile},
		{"kaas-dashboard.json", DashboardFile},
	} {
		got, err := os.ReadFile(filepath.Join("..", "kaas", "files", c.name))
		if err != nil {
			t.Fatalf("read the chart's copy: %v", err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("deploy/kaas/files/%s differs from deploy/monitoring/%s: cp deploy/monitoring/%s deploy/kaas/files/", c.name, c.name, c.name)
		}
	}
}

func TestAlertsAreComplete(t *testing.T) {
	alerts, err := Alerts()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "monitoring.md"))
	if err != nil {
		t.Fatalf("read docs/monitoring.md: %v", err)
	}
	seen := map[string]bool{}
	for _, a := range alerts {
		if a.Name == "" || a.Expr == "" || a.For == "" {
			t.Errorf("rule %+v needs alert, expr and for", a)
			continue
		}
		if seen[a.Name] {
			t.Errorf("alert %s defined twice", a.Name)
		}
		seen[a.Name] = true
		if s := a.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", a.Name, s)
		}
		for _, k := range []string{"summary", "description", "runbook"} {
			if a.Annotations[k] == "" {
				t.Errorf("%s: no %s annotation", a.Name, k)
			}
		}
		anchor := strings.TrimPrefix(a.Annotations["runbook"], "docs/monitoring.md#")
		if !bytes.Contains(bytes.ToLower(docs), []byte("### "+anchor)) {
			t.Errorf("%s: docs/monitoring.md has no heading for #%s", a.Name, anchor)
		}
	}
	for _, want := range []string{"KaasBrokerDown", "KaasBrokerHeartbeatStale", "KaasNoController", "KaasPartitionsNotServing",
		"KaasProduceFsyncSlow", "KaasVolumeSpaceLow", "KaasMachineStuck", "KaasVolumeCheckFailed"} {
		if !seen[want] {
			t.Errorf("no alert %s", want)
		}
	}
}

func TestRulesWithForKeepsExpressions(t *testing.T) {
	alerts, err := Alerts()
	if err != nil {
		t.Fatal(err)
	}
	short, err := RulesWithFor("2s")
	if err != nil {
		t.Fatal(err)
	}
	var doc rulesDoc
	if err := yaml.Unmarshal(short, &doc); err != nil {
		t.Fatal(err)
	}
	i := 0
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			if r.For != "2s" {
				t.Errorf("%s: for %q, want 2s", r.Name, r.For)
			}
			if r.Expr != alerts[i].Expr || r.Name != alerts[i].Name {
				t.Errorf("rule %d changed: %s %q", i, r.Name, r.Expr)
			}
			i++
		}
	}
	if i != len(alerts) {
		t.Errorf("%d rules rendered, want %d", i, len(alerts))
	}
}

func TestDashboardQueries(t *testing.T) {
	qs, err := DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 20 {
		t.Fatalf("%d dashboard queries, want the whole dashboard", len(qs))
	}
	for _, q := range qs {
		if strings.TrimSpace(q.Expr) == "" {
			t.Errorf("panel %q target %s has no query", q.Panel, q.RefID)
		}
		if e := Expand(q.Expr, "1m"); strings.Contains(e, "$") {
			t.Errorf("panel %q: variable left after expansion: %s", q.Panel, e)
		}
	}
	for _, family := range []string{"kaas_partitions", "kaas_is_controller", "kaas_requests_total", "kaas_request_duration_seconds_bucket",
		"kaas_produce_fsync_duration_seconds_bucket", "kaas_volume_op_duration_seconds_bucket", "kaas_consumer_group_committed_offset",
		"kaas_log_end_offset", "kaas_cluster_partitions", "kaas_volume_check_passed", "kaas_transactions_total", "kaas_machine_records"} {
		found := false
		for _, q := range qs {
			found = found || strings.Contains(q.Expr, family)
		}
		if !found {
			t.Errorf("no dashboard panel queries %s", family)
		}
	}
}

// promtool finds promtool (Debian's prometheus package), skipping locally
// without it; CI (CI=true) installs it and fails without it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not on PATH: .ci/run installs Debian's prometheus package")
		}
		t.Skip("promtool is not on PATH (apt-get install prometheus)")
	}
	return p
}

func runPromtool(t *testing.T, path, file string) {
	t.Helper()
	out, err := exec.Command(path, "check", "rules", file).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", file, err, out)
	}
}

func TestPromtoolChecksRules(t *testing.T) {
	p := promtool(t)
	runPromtool(t, p, "kaas-alerts.yaml")
	short, err := RulesWithFor("2s")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "short.yaml")
	if err := os.WriteFile(f, short, 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, p, f)
}

// Every dashboard query, written as a recording rule, so promtool's parser
// judges it.
func TestPromtoolParsesDashboardQueries(t *testing.T) {
	p := promtool(t)
	qs, err := DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, q := range qs {
		rules = append(rules, rule{Record: fmt.Sprintf("kaas:dashboard_query_%d", i), Expr: Expand(q.Expr, "1m")})
	}
	doc := map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": rules}}}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "dashboard.yaml")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, p, f)
}
