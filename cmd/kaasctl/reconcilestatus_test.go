package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/states"
)

func TestReconcileStatusOutcomeFromTheVolume(t *testing.T) {
	data := volumeWithStatus(t)
	var out bytes.Buffer
	if err := run([]string{"reconcile-status", "--data", data, "-o", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	want := []string{"done", "done", "failed: purge: device or resource busy"}
	for i, w := range want {
		if rows[i]["outcome"] != w {
			t.Errorf("row %d outcome %v, want %q", i, rows[i]["outcome"], w)
		}
	}
}

// TestReconcileStatusFromABroker reads a broker's rows, its reconcile keys
// among them, and rows of a broker that names no outcome.
func TestReconcileStatusFromABroker(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rows := []engine.StatusRow{
		{Record: states.Record{Kind: "partition-open", Object: "orders/0", Desired: "serving", State: "fenced", Since: since, Owner: "broker-1"}},
		{Record: states.Record{Kind: engine.ReconcileKind, Object: "topic/orders", Desired: "ok", State: "waiting", Since: since, Owner: "broker-1"},
			Outcome: "waiting: the controller's directory-reclaim"},
		{Record: states.Record{Kind: engine.ReconcileKind, Object: "topic/bad", Desired: "ok", State: "failed (terminal)", Attempts: 1,
			LastError: "illegal transition", Since: since, Owner: "broker-1"}, Outcome: "failed (terminal): illegal transition"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/reconcile-status" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(rows)
	}))
	defer srv.Close()

	var out bytes.Buffer
	if err := run([]string{"reconcile-status", "--admin", srv.URL}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^KIND +OBJECT +DESIRED +STATE +ATTEMPTS +SINCE +OWNER +OUTCOME +LAST ERROR$`),
		regexp.MustCompile(`(?m)^partition-open +orders/0 .* in progress *$`),
		regexp.MustCompile(`(?m)^reconcile +topic/orders +ok +waiting +0 .* waiting: the controller's directory-reclaim *$`),
		regexp.MustCompile(`(?m)^reconcile +topic/bad +ok +failed \(terminal\) +1 .* broker-1 +failed \(terminal\) +illegal transition$`),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("table does not match %s:\n%s", want, out.String())
		}
	}

	out.Reset()
	if err := run([]string{"reconcile-status", "--admin", srv.URL, "-o", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0]["outcome"] != "in progress" || got[1]["outcome"] != "waiting: the controller's directory-reclaim" ||
		got[1]["attempts"] != float64(0) || got[2]["state"] != "failed (terminal)" {
		t.Errorf("json rows: %v", got)
	}
	for _, key := range []string{"kind", "object", "desired", "state", "attempts", "lastError", "since", "owner", "outcome"} {
		if _, ok := got[1][key]; !ok {
			t.Errorf("row has no %q: %v", key, got[1])
		}
	}
	if !strings.Contains(out.String(), `"since": "2026-01-02T03:04:05Z"`) {
		t.Errorf("since not RFC 3339:\n%s", out.String())
	}
}

// TestReconcileStatusTableColumns: the OUTCOME and LAST ERROR columns of a
// row, a machine that waits among them (its wait is no error).
func TestReconcileStatusTableColumns(t *testing.T) {
	cases := []struct {
		name                 string
		rec                  states.Record
		wantOutcome, wantErr string
	}{
		{"done", states.Record{Desired: "serving", State: "serving"}, "done", ""},
		{"failed", states.Record{Desired: "deleted", State: "renamed", Attempts: 2, LastError: "purge: busy"}, "failed", "purge: busy"},
		{"waiting", states.Record{Desired: "reclaimed", State: "renamed", LastError: "waiting: release: broker 2 holds it"},
			"waiting: release: broker 2 holds it", ""},
	}
	for _, c := range cases {
		r := engine.StatusRow{Record: c.rec, Outcome: engine.RecordOutcome(c.rec)}
		if got, gotErr := tableOutcome(r), tableLastError(r); got != c.wantOutcome || gotErr != c.wantErr {
			t.Errorf("%s: outcome %q, last error %q; want %q, %q", c.name, got, gotErr, c.wantOutcome, c.wantErr)
		}
	}
}
