package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/kaas-dev/kaas/wire"
	"github.com/kaas-dev/kaas/wire/listeners"
	"github.com/kaas-dev/kaas/wire/sasl"
	"github.com/kaas-dev/kaas/wire/tlsfiles"
)

// interBrokerAuth is how brokers reach each other on the inter-broker
// listener, and who may send them inter-broker requests: the broker
// credential of a SASL inter-broker listener, the CAs another broker's
// certificate is verified against, and Kafka's super.users.
type interBrokerAuth struct {
	mechanism, user, passwordFile string
	tlsCA                         string
	superUsers                    string
}

func (a *interBrokerAuth) register(fs *flag.FlagSet) {
	fs.StringVar(&a.mechanism, "inter-broker-sasl-mechanism", sasl.ScramSHA512, "SASL mechanism brokers authenticate to each other with on a SASL inter-broker listener: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, one of --sasl-mechanisms (sasl.mechanism.inter.broker.protocol; KAAS_INTER_BROKER_SASL_MECHANISM)")
	fs.StringVar(&a.user, "inter-broker-username", "", "the broker credential's user on a SASL inter-broker listener, created like any user (kaasctl users set); User:<it> is the broker principal (KAAS_INTER_BROKER_USERNAME)")
	fs.StringVar(&a.passwordFile, "inter-broker-password-file", "", "file holding the broker credential's password, read at every authentication (KAAS_INTER_BROKER_PASSWORD_FILE)")
	fs.StringVar(&a.tlsCA, "inter-broker-tls-ca-file", "", "PEM CAs the other brokers' certificates are verified against on a TLS inter-broker listener (KAAS_INTER_BROKER_TLS_CA_FILE; default --tls-client-ca-file, else the system's)")
	fs.StringVar(&a.superUsers, "super-users", "", "principals allowed everything, as User:a;User:b: inter-broker requests too (super.users; KAAS_SUPER_USERS)")
}

// interBrokerSecurity readies the connections to the other brokers' ib
// listener and names the principals that may send inter-broker requests:
// the broker principal (the SASL credential's user, or on SSL the mapped
// principal of this broker's certificate, else User:ANONYMOUS) and the
// super users; none at all when no listener authenticates and there is no
// authorizer, so a PLAINTEXT-only cluster serves them to anyone, as
// before. With the authorizer on the list is always given: on an
// all-PLAINTEXT cluster it names User:ANONYMOUS, which every client is,
// so that the brokers' own requests are not refused (Kafka would need
// User:ANONYMOUS in super.users, which would open everything else too).
func (l listenerOptions) interBrokerSecurity(log logr.Logger, ib wire.Listener, bound []boundListener, files *tlsfiles.Files, saslCfg *sasl.Config, authorizer bool) (wire.PeerSecurity, []string, error) {
	a := l.interBrokerAuth
	var sec wire.PeerSecurity
	principal := "User:ANONYMOUS"
	clientCerts := l.tlsClientAuth != "" && tlsfiles.ClientAuth(l.tlsClientAuth) != tlsfiles.ClientAuthNone
	if ib.Protocol.TLS() {
		withCert := ib.Protocol == listeners.SSL && clientCerts
		sec.TLS = func(host string) *tls.Config { return files.ClientConfig(host, withCert) }
		if withCert {
			name, err := ib.Principals.Principal(files.Certificate().Subject)
			if err != nil {
				return sec, nil, fmt.Errorf("the broker principal of the SSL inter-broker listener %s: %w", ib.Name, err)
			}
			principal = "User:" + name
		}
	}
	if ib.Protocol.SASL() {
		mech, err := a.saslMechanism(ib, saslCfg)
		if err != nil {
			return sec, nil, err
		}
		sec.SASL = mech
		principal = "User:" + a.user
	} else if a.user != "" || a.passwordFile != "" {
		log.Info("the inter-broker listener does not use SASL: --inter-broker-username and --inter-broker-password-file are not used", "listener", ib.Name, "protocol", ib.Protocol)
	}
	supers, err := parseSuperUsers(a.superUsers)
	if err != nil {
		return sec, nil, err
	}
	if !authenticates(bound, clientCerts) && !authorizer {
		return sec, nil, nil
	}
	if principal == "User:ANONYMOUS" {
		log.Info("the inter-broker listener authenticates nobody: any client of it may send inter-broker requests", "listener", ib.Name, "protocol", ib.Protocol)
	}
	return sec, append([]string{principal}, supers...), nil
}

// saslMechanism is the broker credential for a SASL inter-broker listener.
func (a interBrokerAuth) saslMechanism(ib wire.Listener, saslCfg *sasl.Config) (kgosasl.Mechanism, error) {
	if a.user == "" || a.passwordFile == "" {
		return nil, fmt.Errorf("the inter-broker listener %s is %s: give --inter-broker-username and --inter-broker-password-file", ib.Name, ib.Protocol)
	}
	mech := strings.ToUpper(strings.TrimSpace(a.mechanism))
	if !slices.Contains(saslCfg.Mechanisms, mech) {
		return nil, fmt.Errorf("--inter-broker-sasl-mechanism %s is not among --sasl-mechanisms %s", mech, strings.Join(saslCfg.Mechanisms, ","))
	}
	password := func() (string, error) { return readPassword(a.passwordFile) }
	if _, err := password(); err != nil {
		return nil, err
	}
	return wire.PeerSASL(mech, a.user, password)
}

// readPassword reads a password file, without its trailing line end.
func readPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("inter-broker password: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("inter-broker password file %s is empty", path)
	}
	return pw, nil
}

// authenticates reports whether any listener authenticates its clients:
// a SASL one, or an SSL one asking for client certificates.
func authenticates(bound []boundListener, clientCerts bool) bool {
	for _, b := range bound {
		if b.wl.Protocol.SASL() || (b.wl.Protocol == listeners.SSL && clientCerts) {
			return true
		}
	}
	return false
}

// parseSuperUsers reads super.users: principals separated by semicolons,
// each User:<name>.
func parseSuperUsers(s string) ([]string, error) {
	var out []string
	for p := range strings.SplitSeq(s, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		name, ok := strings.CutPrefix(p, "User:")
		if !ok || name == "" {
			return nil, fmt.Errorf("--super-users: %q is not User:<name>", p)
		}
		out = append(out, p)
	}
	return out, nil
}
