package wire

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kaas-dev/kaas/wire/sasl"
)

// PeerSecurity is how this broker reaches the others on the inter-broker
// listener: TLS when its protocol is SSL or SASL_SSL, a SASL mechanism when
// it is SASL_PLAINTEXT or SASL_SSL. The zero value is PLAINTEXT.
type PeerSecurity struct {
	// TLS returns the client config of one connection to host (its
	// server name); it is called for every connection, so that rotated
	// certificates and CAs are picked up (wire/tlsfiles).
	TLS func(host string) *tls.Config
	// SASL authenticates this broker as its broker principal (PeerSASL).
	SASL kgosasl.Mechanism
}

// peerDialTimeout bounds one connection to another broker.
const peerDialTimeout = 5 * time.Second

// dialer dials a peer with TLS when the inter-broker listener has it.
func (s PeerSecurity) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if s.TLS == nil {
		return nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("peer address %q: %w", addr, err)
		}
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: peerDialTimeout}, Config: s.TLS(host)}
		return d.DialContext(ctx, network, addr)
	}
}

// PeerSASL is the broker's SASL credential for the inter-broker listener:
// mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, user, and password,
// called at every authentication (a rotated secret file is picked up).
func PeerSASL(mechanism, user string, password func() (string, error)) (kgosasl.Mechanism, error) {
	if user == "" {
		return nil, fmt.Errorf("the inter-broker SASL credential has no user")
	}
	switch mechanism {
	case sasl.Plain:
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			pw, err := password()
			return plain.Auth{User: user, Pass: pw}, err
		}), nil
	case sasl.ScramSHA256, sasl.ScramSHA512:
		fn := func(context.Context) (scram.Auth, error) {
			pw, err := password()
			return scram.Auth{User: user, Pass: pw}, err
		}
		if mechanism == sasl.ScramSHA256 {
			return scram.Sha256(fn), nil
		}
		return scram.Sha512(fn), nil
	}
	return nil, fmt.Errorf("inter-broker SASL mechanism %q: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mechanism)
}
