package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/wire/tlsfiles/tlstest"
)

type fakeAdminEngine struct{ ready bool }

func (f fakeAdminEngine) Readiness() (bool, string) { return f.ready, "still opening" }
func (f fakeAdminEngine) Describe() engine.BrokerStatus {
	return engine.BrokerStatus{BrokerID: 3, ClusterID: "c1", Ready: f.ready}
}
func (f fakeAdminEngine) ReconcileStatus() ([]engine.StatusRow, error) { return nil, nil }

type fakeAdminServer struct{ err error }

func (f fakeAdminServer) Ready() error { return f.err }

func writeToken(t *testing.T, dir, token string) string {
	t.Helper()
	p := filepath.Join(dir, "token")
	if err := os.WriteFile(p, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAdminRoutes: the probes answer without a token, everything else
// needs the current token, and the profiler exists only with --admin-pprof.
func TestAdminRoutes(t *testing.T) {
	tokenPath := writeToken(t, t.TempDir(), "s3cret\n")
	tok, err := loadTokenFile(tokenPath, logr.Discard(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name          string
		pprof, secure bool
		path, auth    string
		ready         bool
		want          int
	}{
		{"healthz open", false, false, "/healthz", "", true, 200},
		{"status open", false, false, "/status", "", true, 200},
		{"pprof off by default", false, false, "/debug/pprof/", "", true, 404},
		{"pprof on", true, false, "/debug/pprof/", "", true, 200},
		{"healthz needs no token", false, true, "/healthz", "", true, 200},
		{"readyz needs no token", false, true, "/readyz", "", true, 200},
		{"readyz not ready", false, true, "/readyz", "", false, 503},
		{"status without token", false, true, "/status", "", true, 401},
		{"status wrong token", false, true, "/status", "Bearer s3cre", true, 401},
		{"status wrong scheme", false, true, "/status", "Basic s3cret", true, 401},
		{"status with token", false, true, "/status", "Bearer s3cret", true, 200},
		{"reconcile-status without token", false, true, "/reconcile-status", "", true, 401},
		{"pprof without token", true, true, "/debug/pprof/", "", true, 401},
		{"pprof with token", true, true, "/debug/pprof/", "Bearer s3cret", true, 200},
		{"pprof off with token", false, true, "/debug/pprof/", "Bearer s3cret", true, 404},
		{"metrics without token", false, true, "/metrics", "", true, 401},
		{"metrics with token", false, true, "/metrics", "Bearer s3cret", true, 200},
		{"metrics open without a token file", false, false, "/metrics", "", true, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h http.Handler = adminMux(fakeAdminEngine{ready: c.ready}, fakeAdminServer{}, c.pprof, testMetricsHandler())
			if c.secure {
				h = requireToken(h, tok)
			}
			req := httptest.NewRequest("GET", c.path, nil)
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != c.want {
				t.Fatalf("GET %s: %d %q, want %d", c.path, rec.Code, rec.Body.String(), c.want)
			}
			if c.path == "/metrics" && rec.Code == 200 && !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain; version=0.0.4") {
				t.Fatalf("GET /metrics: Content-Type %q, want Prometheus's text format", rec.Header().Get("Content-Type"))
			}
			if rec.Code == 401 && rec.Header().Get("WWW-Authenticate") == "" {
				t.Fatal("a 401 without WWW-Authenticate")
			}
		})
	}
}

// TestAdminReadyzServerNotReady: a Kafka server that cannot take clients
// makes the broker not ready.
func TestAdminReadyzServerNotReady(t *testing.T) {
	h := adminMux(fakeAdminEngine{ready: true}, fakeAdminServer{err: errors.New("fds exhausted")}, false, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "fds exhausted") {
		t.Fatalf("readyz: %d %q", rec.Code, rec.Body.String())
	}
}

// TestAdminTokenReload: a changed token file replaces the token after the
// check interval; an emptied one keeps the old token.
func TestAdminTokenReload(t *testing.T) {
	dir := t.TempDir()
	path := writeToken(t, dir, "one")
	now := time.Unix(1000, 0)
	tok, err := loadTokenFile(path, logr.Discard(), func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		write   *string
		advance time.Duration
		token   string
		want    bool
	}{
		{nil, 0, "one", true},
		{ptr("second"), 0, "second", false}, // not looked at yet
		{nil, 0, "one", true},
		{nil, 2 * time.Second, "second", true},
		{nil, 0, "one", false},
		{ptr(""), 2 * time.Second, "second", true}, // an empty file is refused
		{ptr("third"), 2 * time.Second, "third", true},
	}
	for i, s := range steps {
		if s.write != nil {
			// A new modification time, whatever the file system's clock
			// granularity: rotations change size or time.
			writeToken(t, dir, *s.write)
			mod := time.Unix(2000+int64(i), 0)
			if err := os.Chtimes(path, mod, mod); err != nil {
				t.Fatal(err)
			}
		}
		now = now.Add(s.advance)
		if got := tok.matches(s.token); got != s.want {
			t.Fatalf("step %d: matches(%q) = %v, want %v", i, s.token, got, s.want)
		}
	}
}

func ptr(s string) *string { return &s }

// TestAdminServeTLSAndToken: the admin address served with TLS and a
// token, over a real socket.
func TestAdminServeTLSAndToken(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "admin-ca")
	cert, key, _ := ca.ServerFiles(t, dir)
	a := adminOptions{certFile: cert, keyFile: key, tokenFile: writeToken(t, dir, "tok")}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.serve(ln, adminMux(fakeAdminEngine{ready: true}, fakeAdminServer{}, false, nil), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	base := "https://" + ln.Addr().String()
	get := func(path, token string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, token string
		want        int
	}{{"/healthz", "", 200}, {"/status", "", 401}, {"/status", "tok", 200}} {
		if got := get(c.path, c.token); got != c.want {
			t.Errorf("GET %s (token %q): %d, want %d", c.path, c.token, got, c.want)
		}
	}
	plain, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode == 200 {
			t.Fatal("plain HTTP answered on a TLS admin address")
		}
	}
}

// TestAdminFlags: the flags, their variables, and the pairs that go
// together.
func TestAdminFlags(t *testing.T) {
	t.Setenv("KAAS_ADMIN_PPROF", "true")
	t.Setenv("KAAS_ADMIN_AUTH_TOKEN_FILE", "/secrets/token")
	o, err := parseFlags(nil)
	if err != nil || !o.adminSec.pprof || o.adminSec.tokenFile != "/secrets/token" {
		t.Fatalf("%+v, %v", o.adminSec, err)
	}
	if _, err := parseFlags([]string{"--admin-tls-cert-file", "/c.pem"}); err == nil {
		t.Fatal("a certificate without a key accepted")
	}
	if _, err := loadTokenFile(writeToken(t, t.TempDir(), " \n"), logr.Discard(), time.Now); err == nil {
		t.Fatal("an empty token file accepted")
	}
}

// testMetricsHandler serves a registry with the Go runtime collector, as
// /metrics does.
func testMetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	return metricsHandler(reg)
}
