package kafkaadmin

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Conn says how to reach a cluster's Kafka listener: its bootstrap
// addresses, TLS (on with TLS or a CA file), and SASL.
type Conn struct {
	Bootstrap string // HOST:PORT[,HOST:PORT]
	ClientID  string
	TLS       bool
	CAFile    string // PEM CAs the listener's certificate is verified against (default the system's)
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: no
	// SASL); the password is read from SASLPasswordFile.
	SASLMechanism, SASLUser, SASLPasswordFile string
}

// NewClient checks c and makes the client.
func NewClient(c Conn) (*kgo.Client, error) {
	if c.Bootstrap == "" {
		return nil, errors.New("no bootstrap address: give --bootstrap HOST:PORT")
	}
	id := c.ClientID
	if id == "" {
		id = "kaas-admin"
	}
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(c.Bootstrap, ",")...), kgo.ClientID(id)}
	if c.TLS || c.CAFile != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.CAFile != "" {
			pem, err := os.ReadFile(c.CAFile)
			if err != nil {
				return nil, fmt.Errorf("CA file: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("CA file %s holds no PEM certificate", c.CAFile)
			}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if c.SASLMechanism != "" {
		if c.SASLUser == "" || c.SASLPasswordFile == "" {
			return nil, fmt.Errorf("SASL %s needs a user name and a password file", c.SASLMechanism)
		}
		b, err := os.ReadFile(c.SASLPasswordFile)
		if err != nil {
			return nil, fmt.Errorf("SASL password file: %w", err)
		}
		pw := strings.TrimRight(string(b), "\r\n")
		if pw == "" {
			return nil, fmt.Errorf("SASL password file %s is empty", c.SASLPasswordFile)
		}
		switch strings.ToUpper(c.SASLMechanism) {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: c.SASLUser, Pass: pw}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: c.SASLUser, Pass: pw}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: c.SASLUser, Pass: pw}.AsSha512Mechanism()))
		default:
			return nil, fmt.Errorf("SASL mechanism %q: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASLMechanism)
		}
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client for %s: %w", c.Bootstrap, err)
	}
	return cl, nil
}
