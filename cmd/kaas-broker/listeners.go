package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/wire"
	"github.com/kaas-dev/kaas/wire/listeners"
	"github.com/kaas-dev/kaas/wire/sasl"
	"github.com/kaas-dev/kaas/wire/tlsfiles"
)

// listenerOptions are the flags of Kafka's listener model: the listeners
// and their security protocols, TLS files and SASL mechanisms. Without
// --listeners, --listen is one PLAINTEXT listener (and --advertise its
// advertised address), as before.
type listenerOptions struct {
	listeners, protocolMap, advertised, interBroker string
	tlsCert, tlsKey, tlsClientCA, tlsClientAuth     string
	principalRules                                  string
	saslMechanisms                                  string
	maxReauth                                       time.Duration
	oauthJWKS, oauthIssuer, oauthAudience           string
	interBrokerAuth                                 interBrokerAuth
}

func (l *listenerOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&l.listeners, "listeners", "", "listeners as NAME://HOST:PORT,...; each name is its security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) unless --listener-security-protocol-map maps it (KAAS_LISTENERS; empty: --listen, one PLAINTEXT listener)")
	fs.StringVar(&l.protocolMap, "listener-security-protocol-map", "", "NAME:PROTOCOL,... for listeners with names of their own (KAAS_LISTENER_SECURITY_PROTOCOL_MAP)")
	fs.StringVar(&l.advertised, "advertised-listeners", "", "NAME://HOST:PORT,... told to clients, by listener (KAAS_ADVERTISED_LISTENERS; default each listener's own address)")
	fs.StringVar(&l.interBroker, "inter-broker-listener", "", "the listener brokers reach each other on, of any protocol (KAAS_INTER_BROKER_LISTENER; default the PLAINTEXT listener)")
	fs.StringVar(&l.tlsCert, "tls-cert-file", "", "PEM certificate of the SSL and SASL_SSL listeners, reloaded when it changes (KAAS_TLS_CERT_FILE)")
	fs.StringVar(&l.tlsKey, "tls-key-file", "", "PEM key of --tls-cert-file (KAAS_TLS_KEY_FILE)")
	fs.StringVar(&l.tlsClientCA, "tls-client-ca-file", "", "PEM CAs client certificates are verified against (KAAS_TLS_CLIENT_CA_FILE)")
	fs.StringVar(&l.tlsClientAuth, "tls-client-auth", "none", "client certificates on SSL listeners: none, requested or required (ssl.client.auth; KAAS_TLS_CLIENT_AUTH)")
	fs.StringVar(&l.principalRules, "tls-principal-mapping-rules", "", "RULE:pattern/replacement/[LU],...,DEFAULT naming an SSL client from its certificate subject (ssl.principal.mapping.rules; KAAS_TLS_PRINCIPAL_MAPPING_RULES; default the CN)")
	fs.StringVar(&l.saslMechanisms, "sasl-mechanisms", "SCRAM-SHA-512,SCRAM-SHA-256", "SASL mechanisms of the SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (sasl.enabled.mechanisms; KAAS_SASL_MECHANISMS)")
	fs.DurationVar(&l.maxReauth, "connections-max-reauth", 0, "a SASL session lasts at most this long without re-authenticating (connections.max.reauth.ms; KAAS_CONNECTIONS_MAX_REAUTH; 0: until its token expires)")
	fs.StringVar(&l.oauthJWKS, "oauth-jwks-file", "", "JWKS file OAUTHBEARER tokens are verified against, re-read when it changes (KAAS_OAUTH_JWKS_FILE)")
	fs.StringVar(&l.oauthIssuer, "oauth-issuer", "", "the iss an OAUTHBEARER token must carry (KAAS_OAUTH_ISSUER)")
	fs.StringVar(&l.oauthAudience, "oauth-audience", "", "an aud an OAUTHBEARER token must carry (KAAS_OAUTH_AUDIENCE)")
	l.interBrokerAuth.register(fs)
}

// boundListener is a listener with its bound socket.
type boundListener struct {
	ln net.Listener
	wl wire.Listener
}

// srv serves the listener on srv until Shutdown.
func (b boundListener) srv(srv *wire.Server) error { return srv.ServeListener(b.ln, b.wl) }

// listenerSetup is what listen readies.
type listenerSetup struct {
	bound []boundListener
	// interBroker is the inter-broker listener's advertised address;
	// byName every listener's, for the heartbeat.
	interBroker string
	byName      map[string]string
	// peers is how this broker reaches the others' inter-broker listener.
	peers wire.PeerSecurity
	// brokerPrincipals may send the inter-broker-only APIs; nil when no
	// listener authenticates (wire.Config.BrokerPrincipals).
	brokerPrincipals []string
}

// listen binds every listener and readies what its protocol needs, and
// the inter-broker listener's security (interbroker.go). A listener that
// is not advertised advertises the address it bound (advertisedFrom).
func (l listenerOptions) listen(o options, log logr.Logger, fsys volume.FS, clusterDir string) (setup listenerSetup, err error) {
	spec, advertised := l.listeners, l.advertised
	if spec == "" {
		spec = "PLAINTEXT://" + o.listen
		if o.advertise != "" {
			advertised = "PLAINTEXT://" + o.advertise
		}
	}
	ls, err := listeners.Parse(spec, l.protocolMap, advertised)
	if err != nil {
		return listenerSetup{}, err
	}
	var bound []boundListener
	defer func() {
		if err != nil {
			for _, b := range bound {
				_ = b.ln.Close()
			}
			setup = listenerSetup{}
		}
	}()
	var files *tlsfiles.Files
	var saslCfg *sasl.Config
	byName := map[string]string{}
	for _, x := range ls {
		wl := wire.Listener{Name: x.Name, Protocol: x.Protocol, Advertise: x.Advertise}
		if x.Protocol.TLS() && files == nil {
			if files, err = l.tlsFiles(log); err != nil {
				return listenerSetup{}, err
			}
		}
		switch x.Protocol {
		case listeners.SSL:
			wl.TLS = files.ServerConfig()
		case listeners.SASLSSL:
			wl.TLS = files.SASLServerConfig()
		}
		if x.Protocol == listeners.SSL {
			if wl.Principals, err = auth.ParsePrincipalRules(l.principalRules); err != nil {
				return listenerSetup{}, err
			}
		}
		if x.Protocol.SASL() && saslCfg == nil {
			if saslCfg, err = l.sasl(log, fsys, clusterDir); err != nil {
				return listenerSetup{}, err
			}
		}
		if x.Protocol.SASL() {
			wl.SASL = saslCfg
		}
		ln, err := net.Listen("tcp", x.Bind)
		if err != nil {
			return listenerSetup{}, fmt.Errorf("listen on %s for %s: %w", x.Bind, x.Name, err)
		}
		if wl.Advertise == "" {
			wl.Advertise = advertisedFrom(ln.Addr().(*net.TCPAddr))
		}
		bound = append(bound, boundListener{ln: ln, wl: wl})
		byName[x.Name] = wl.Advertise
	}
	name := strings.ToUpper(l.interBroker)
	if name == "" {
		name = string(listeners.Plaintext)
	}
	for _, b := range bound {
		if b.wl.Name != name {
			continue
		}
		setup = listenerSetup{bound: bound, interBroker: b.wl.Advertise, byName: byName}
		setup.peers, setup.brokerPrincipals, err = l.interBrokerSecurity(log, b.wl, bound, files, saslCfg, o.authz.authorizer == "acl")
		return setup, err
	}
	return listenerSetup{}, fmt.Errorf("inter-broker listener %s is not a listener: give --inter-broker-listener", name)
}

func (l listenerOptions) tlsFiles(log logr.Logger) (*tlsfiles.Files, error) {
	if l.tlsCert == "" || l.tlsKey == "" {
		return nil, fmt.Errorf("an SSL or SASL_SSL listener needs --tls-cert-file and --tls-key-file")
	}
	serverCA := l.interBrokerAuth.tlsCA
	if serverCA == "" {
		serverCA = l.tlsClientCA
	}
	return tlsfiles.Load(tlsfiles.Config{CertFile: l.tlsCert, KeyFile: l.tlsKey, ClientCAFile: l.tlsClientCA,
		ClientAuth: tlsfiles.ClientAuth(l.tlsClientAuth), ServerCAFile: serverCA, Logger: log.WithName("tls")})
}

func (l listenerOptions) sasl(log logr.Logger, fsys volume.FS, clusterDir string) (*sasl.Config, error) {
	cfg := &sasl.Config{Lookup: auth.StoreLookup(fsys, clusterDir), MaxReauth: l.maxReauth,
		Rules: auth.TokenRules{Issuer: l.oauthIssuer, Audience: l.oauthAudience, Skew: 30 * time.Second}}
	cfg.Secret = make([]byte, 32)
	if _, err := rand.Read(cfg.Secret); err != nil {
		return nil, err
	}
	for m := range strings.SplitSeq(l.saslMechanisms, ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		switch m {
		case "":
			continue
		case sasl.Plain, sasl.ScramSHA256, sasl.ScramSHA512:
		case sasl.OAuthBearer:
			if l.oauthJWKS == "" {
				return nil, fmt.Errorf("OAUTHBEARER needs --oauth-jwks-file")
			}
			jwks, err := sasl.LoadJWKSFile(sasl.JWKSFileConfig{Path: l.oauthJWKS, Logger: log.WithName("oauth")})
			if err != nil {
				return nil, err
			}
			cfg.Keys = jwks.Keys
		default:
			return nil, fmt.Errorf("--sasl-mechanisms: %q is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", m)
		}
		cfg.Mechanisms = append(cfg.Mechanisms, m)
	}
	if len(cfg.Mechanisms) == 0 {
		return nil, fmt.Errorf("a SASL listener needs --sasl-mechanisms")
	}
	return cfg, nil
}
