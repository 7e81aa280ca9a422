package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/wire/tlsfiles/tlstest"
)

// secureAdmin is a broker admin address with TLS (a certificate for
// 127.0.0.1 from its own CA) that answers /reconcile-status only with
// Authorization: Bearer <token>, as --admin-auth-token-file makes it.
func secureAdmin(t *testing.T, token string) (srv *httptest.Server, caFile string) {
	t.Helper()
	ca := tlstest.NewCA(t, "admin-ca")
	certPEM, keyPEM := ca.Issue(t, pkix.Name{CommonName: "broker"}, false)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	rows := []engine.StatusRow{{Record: states.Record{Kind: "partition-open", Object: "orders/0", Desired: "serving", State: "serving"}}}
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kaas-broker admin"`)
			http.Error(w, "unauthorized: this admin address needs Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/reconcile-status" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(rows)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile = filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, caFile
}

// clearAdminEnv keeps the caller's KAAS_ADMIN_* out of a test's flags.
func clearAdminEnv(t *testing.T) {
	for _, v := range []string{"KAAS_ADMIN_CA_FILE", "KAAS_ADMIN_SERVER_NAME", "KAAS_ADMIN_TOKEN_FILE"} {
		t.Setenv(v, "")
	}
}

func TestAdminOverTLSWithAToken(t *testing.T) {
	clearAdminEnv(t)
	const token = "s3cret-token"
	srv, caFile := secureAdmin(t, token)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokenFile := write("token", token+"\n")
	wrongToken := write("wrong", "not-it")
	emptyToken := write("empty", "\n")
	otherCA := filepath.Join(dir, "other-ca.crt")
	if err := os.WriteFile(otherCA, tlstest.NewCA(t, "other").PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	plainURL := "http" + strings.TrimPrefix(srv.URL, "https")

	cases := []struct {
		name    string
		args    []string
		wantErr string // empty: the table is printed
	}{
		{"CA and token from the environment", nil, ""},
		{"CA and token", []string{"--admin", srv.URL, "--admin-ca-file", caFile, "--admin-token-file", tokenFile}, ""},
		{"server name of the certificate", []string{"--admin", srv.URL, "--admin-ca-file", caFile, "--admin-token-file", tokenFile,
			"--admin-server-name", "127.0.0.1"}, ""},
		{"server name the certificate does not have", []string{"--admin", srv.URL, "--admin-ca-file", caFile, "--admin-token-file", tokenFile,
			"--admin-server-name", "kaas-bootstrap.kaas.svc"}, "kaas-bootstrap.kaas.svc"},
		{"no token", []string{"--admin", srv.URL, "--admin-ca-file", caFile}, "401 Unauthorized"},
		{"wrong token", []string{"--admin", srv.URL, "--admin-ca-file", caFile, "--admin-token-file", wrongToken}, "401 Unauthorized"},
		{"empty token file", []string{"--admin", srv.URL, "--admin-ca-file", caFile, "--admin-token-file", emptyToken}, "is empty"},
		{"missing token file", []string{"--admin", srv.URL, "--admin-ca-file", caFile, "--admin-token-file", filepath.Join(dir, "nope")}, "--admin-token-file"},
		{"system roots do not know the CA", []string{"--admin", srv.URL, "--admin-token-file", tokenFile}, "--admin-ca-file"},
		{"another CA", []string{"--admin", srv.URL, "--admin-ca-file", otherCA, "--admin-token-file", tokenFile}, "--admin-ca-file"},
		{"CA file that holds no certificate", []string{"--admin", srv.URL, "--admin-ca-file", tokenFile}, "no PEM certificate"},
		{"CA file with an http URL", []string{"--admin", plainURL, "--admin-ca-file", caFile}, "need an https:// --admin URL"},
		{"not an http URL", []string{"--admin", "ftp://127.0.0.1:9644"}, "not an http:// or https:// URL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if args == nil {
				t.Setenv("KAAS_ADMIN_CA_FILE", caFile)
				t.Setenv("KAAS_ADMIN_TOKEN_FILE", tokenFile)
				args = []string{"--admin", srv.URL}
			}
			var out bytes.Buffer
			err := run(append([]string{"reconcile-status"}, args...), &out)
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(out.String(), "orders/0") {
					t.Errorf("no row in:\n%s", out.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("error %v, want one that says %q", err, c.wantErr)
			}
		})
	}
}

// TestAdminTokenOverPlainHTTP: the token goes over http:// too (a
// port-forward to 127.0.0.1 is the usual way in).
func TestAdminTokenOverPlainHTTP(t *testing.T) {
	clearAdminEnv(t)
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		_ = json.NewEncoder(w).Encode([]engine.StatusRow{})
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"reconcile-status", "--admin", srv.URL, "--admin-token-file", tokenFile}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if got != "Bearer abc" {
		t.Errorf("Authorization %q, want %q", got, "Bearer abc")
	}
}

// TestAdminWithoutAScheme: --admin HOST:PORT is http://, or https:// when a
// TLS flag is given.
func TestAdminWithoutAScheme(t *testing.T) {
	cases := []struct {
		flags adminFlags
		want  string
	}{
		{adminFlags{url: "127.0.0.1:9644"}, "http://127.0.0.1:9644"},
		{adminFlags{url: "broker-0.kaas:9644", caFile: "ca.crt"}, "https://broker-0.kaas:9644"},
		{adminFlags{url: "localhost:9644", serverName: "kaas-admin"}, "https://localhost:9644"},
		{adminFlags{url: "https://127.0.0.1:9644"}, "https://127.0.0.1:9644"},
		{adminFlags{url: "http://127.0.0.1:9644", caFile: "ca.crt"}, "http://127.0.0.1:9644"},
		{adminFlags{}, ""},
	}
	for _, c := range cases {
		if got := c.flags.withScheme(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.flags, got, c.want)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("[]")) }))
	defer srv.Close()
	var out bytes.Buffer
	if err := run([]string{"reconcile-status", "--admin", strings.TrimPrefix(srv.URL, "http://")}, &out); err != nil {
		t.Fatalf("--admin HOST:PORT: %v", err)
	}
}
