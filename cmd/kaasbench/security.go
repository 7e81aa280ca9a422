package main

// Client security: how kaasbench's clients reach a TLS or SASL listener.
//
//	--tls                  connect with TLS (implied by --tls-ca-file and
//	                       --tls-cert-file)
//	--tls-ca-file FILE     PEM CAs the broker's certificate is verified
//	                       against (default: the system's)
//	--tls-cert-file FILE, --tls-key-file FILE
//	                       PEM client certificate and key (mTLS)
//	--sasl-mechanism M     PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
//	--sasl-user U, --sasl-password P
//
// With --listeners (listeners.go) the listener's protocol decides whether
// TLS and SASL are used; these flags give the files and the credential.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// security is how clients connect: plain TCP, TLS, SASL or both.
type security struct {
	TLS           bool   `json:"tls"`
	CAFile        string `json:"tls_ca_file,omitempty"`
	CertFile      string `json:"tls_cert_file,omitempty"`
	KeyFile       string `json:"tls_key_file,omitempty"`
	SASLMechanism string `json:"sasl_mechanism,omitempty"` // "" for none
	SASLUser      string `json:"sasl_user,omitempty"`
	SASLPassword  string `json:"-"`

	tlsConfig *tls.Config // built by prepare
}

func (s *security) register(fs *flag.FlagSet) {
	fs.BoolVar(&s.TLS, "tls", false, "connect with TLS (implied by --tls-ca-file and --tls-cert-file)")
	fs.StringVar(&s.CAFile, "tls-ca-file", "", "PEM CAs to verify the broker's certificate against (default the system's)")
	fs.StringVar(&s.CertFile, "tls-cert-file", "", "PEM client certificate (mTLS)")
	fs.StringVar(&s.KeyFile, "tls-key-file", "", "PEM key of --tls-cert-file")
	fs.StringVar(&s.SASLMechanism, "sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default none)")
	fs.StringVar(&s.SASLUser, "sasl-user", "", "SASL user")
	fs.StringVar(&s.SASLPassword, "sasl-password", "", "SASL password")
}

// prepare normalises and checks s and loads its TLS files.
func (s *security) prepare() error {
	s.SASLMechanism = strings.ToUpper(strings.TrimSpace(s.SASLMechanism))
	if s.CAFile != "" || s.CertFile != "" {
		s.TLS = true
	}
	var errs []error
	switch s.SASLMechanism {
	case "", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		errs = append(errs, fmt.Errorf("--sasl-mechanism must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, not %q", s.SASLMechanism))
	}
	if s.SASLMechanism != "" && s.SASLUser == "" {
		errs = append(errs, errors.New("--sasl-mechanism needs --sasl-user"))
	}
	if s.SASLMechanism == "" && (s.SASLUser != "" || s.SASLPassword != "") {
		errs = append(errs, errors.New("--sasl-user and --sasl-password need --sasl-mechanism"))
	}
	if (s.CertFile == "") != (s.KeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file go together"))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if !s.TLS {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return fmt.Errorf("--tls-ca-file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--tls-ca-file %s holds no PEM certificate", s.CAFile)
		}
	}
	if s.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	s.tlsConfig = cfg
	return nil
}

// mechanism is the SASL mechanism s logs in with, nil for none.
func (s security) mechanism() sasl.Mechanism {
	switch s.SASLMechanism {
	case "PLAIN":
		return plain.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsSha512Mechanism()
	}
	return nil
}

// clientOpts are the franz-go options for s.
func (s security) clientOpts() []kgo.Opt {
	var opts []kgo.Opt
	if s.TLS {
		opts = append(opts, kgo.DialTLSConfig(s.tlsConfig.Clone()))
	}
	if m := s.mechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts
}

// forProtocol is s as a client of a listener with protocol p (PLAINTEXT,
// SSL, SASL_PLAINTEXT or SASL_SSL): TLS iff p is SSL or SASL_SSL, SASL iff
// p is SASL_*. A SASL listener with no --sasl-mechanism is an error.
func (s security) forProtocol(p string) (security, error) {
	out := s
	out.TLS = strings.HasSuffix(p, "SSL")
	if !strings.HasPrefix(p, "SASL_") {
		out.SASLMechanism, out.SASLUser, out.SASLPassword = "", "", ""
	} else if s.SASLMechanism == "" {
		return out, fmt.Errorf("listener protocol %s needs --sasl-mechanism, --sasl-user and --sasl-password", p)
	}
	if !out.TLS {
		out.tlsConfig = nil
	} else if out.tlsConfig == nil {
		out.tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return out, nil
}

// describe is s in a few words, for the configuration block.
func (s security) describe() string {
	var parts []string
	if s.TLS {
		t := "TLS"
		if s.CertFile != "" {
			t += " with client certificate"
		}
		parts = append(parts, t)
	}
	if s.SASLMechanism != "" {
		parts = append(parts, "SASL "+s.SASLMechanism+" as "+s.SASLUser)
	}
	if len(parts) == 0 {
		return "plaintext"
	}
	return strings.Join(parts, ", ")
}
