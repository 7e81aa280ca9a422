package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/wire/tlsfiles/tlstest"
)

func TestParseSecurityFlags(t *testing.T) {
	ca := tlstest.NewCA(t, "root")
	certFile, keyFile, caFile := ca.ServerFiles(t, t.TempDir())
	tests := []struct {
		name    string
		args    []string
		check   func(config) bool
		wantErr string
	}{
		{name: "plaintext by default", args: []string{"--kfake"}, check: func(c config) bool {
			return !c.Security.TLS && c.Security.SASLMechanism == "" && len(c.Security.clientOpts()) == 0
		}},
		{name: "ca file implies TLS", args: []string{"--brokers", "127.0.0.1:9093", "--tls-ca-file", caFile}, check: func(c config) bool {
			return c.Security.TLS && c.Security.tlsConfig.RootCAs != nil && len(c.Security.clientOpts()) == 1
		}},
		{name: "mTLS", args: []string{"--brokers", "127.0.0.1:9093", "--tls-ca-file", caFile, "--tls-cert-file", certFile, "--tls-key-file", keyFile},
			check: func(c config) bool { return len(c.Security.tlsConfig.Certificates) == 1 }},
		{name: "SASL lower case", args: []string{"--brokers", "127.0.0.1:9093", "--tls", "--sasl-mechanism", "scram-sha-512", "--sasl-user", "u", "--sasl-password", "p"},
			check: func(c config) bool {
				return c.Security.SASLMechanism == "SCRAM-SHA-512" && len(c.Security.clientOpts()) == 2 &&
					c.Security.describe() == "TLS, SASL SCRAM-SHA-512 as u"
			}},
		{name: "unknown mechanism", args: []string{"--kfake", "--sasl-mechanism", "GSSAPI", "--sasl-user", "u"}, wantErr: "--sasl-mechanism must be"},
		{name: "mechanism without user", args: []string{"--kfake", "--sasl-mechanism", "PLAIN"}, wantErr: "needs --sasl-user"},
		{name: "user without mechanism", args: []string{"--kfake", "--sasl-user", "u"}, wantErr: "need --sasl-mechanism"},
		{name: "cert without key", args: []string{"--kfake", "--tls-cert-file", certFile}, wantErr: "go together"},
		{name: "missing ca file", args: []string{"--kfake", "--tls-ca-file", filepath.Join(t.TempDir(), "none")}, wantErr: "--tls-ca-file"},
		{name: "ca file without PEM", args: []string{"--kfake", "--tls-ca-file", keyFile}, wantErr: "no PEM certificate"},
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
				t.Fatalf("unexpected security %+v", cfg.Security)
			}
		})
	}
}

func TestSecurityForProtocol(t *testing.T) {
	withSASL := security{SASLMechanism: "PLAIN", SASLUser: "u", SASLPassword: "p"}
	tests := []struct {
		base     security
		protocol string
		tls      bool
		mech     string
		wantErr  bool
	}{
		{withSASL, "PLAINTEXT", false, "", false},
		{withSASL, "SSL", true, "", false},
		{withSASL, "SASL_PLAINTEXT", false, "PLAIN", false},
		{withSASL, "SASL_SSL", true, "PLAIN", false},
		{security{TLS: true}, "PLAINTEXT", false, "", false},
		{security{}, "SASL_SSL", false, "", true},
	}
	for _, tt := range tests {
		got, err := tt.base.forProtocol(tt.protocol)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err %v", tt.protocol, err)
			continue
		}
		if err != nil {
			continue
		}
		if got.TLS != tt.tls || got.SASLMechanism != tt.mech || (got.tlsConfig != nil) != tt.tls {
			t.Errorf("%s from %+v: got %+v", tt.protocol, tt.base, got)
		}
		if tt.mech == "" && (got.SASLUser != "" || got.SASLPassword != "") {
			t.Errorf("%s kept the credential", tt.protocol)
		}
	}
}
