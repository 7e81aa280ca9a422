// Package tlsfiles serves a TLS listener's certificate and client CAs from
// PEM files and reloads them when they change, as cert-manager rotates
// them: no restart, and no connection dropped (a handshake takes what was
// loaded last; established connections keep theirs). A new file that does
// not load is logged and the old certificate kept.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// ClientAuth is how an SSL listener asks for client certificates
// (Kafka's ssl.client.auth).
type ClientAuth string

const (
	ClientAuthNone      ClientAuth = "none"
	ClientAuthRequested ClientAuth = "requested"
	ClientAuthRequired  ClientAuth = "required"
)

func (a ClientAuth) tlsType() (tls.ClientAuthType, error) {
	switch a {
	case "", ClientAuthNone:
		return tls.NoClientCert, nil
	case ClientAuthRequested:
		return tls.VerifyClientCertIfGiven, nil
	case ClientAuthRequired:
		return tls.RequireAndVerifyClientCert, nil
	}
	return 0, fmt.Errorf("client auth %q: none, requested or required", a)
}

// Config names the files.
type Config struct {
	CertFile, KeyFile string
	// ClientCAFile holds the CAs client certificates are verified
	// against; needed unless ClientAuth is none.
	ClientCAFile string
	ClientAuth   ClientAuth
	// ServerCAFile holds the CAs the certificates of other brokers are
	// verified against when this broker connects to them (ClientConfig);
	// empty: the system's.
	ServerCAFile string
	// CheckEvery bounds how often a handshake looks at the files' times
	// and sizes (default 1 s).
	CheckEvery time.Duration
	Logger     logr.Logger
	Now        func() time.Time
}

// Files is a listener's TLS material, kept current.
type Files struct {
	cfg        Config
	clientAuth tls.ClientAuthType

	mu      sync.Mutex
	checked time.Time
	stamps  []stamp
	cert    *tls.Certificate
	cas     *x509.CertPool
	// serverCAs are ServerCAFile's (nil: the system's).
	serverCAs *x509.CertPool
}

// stamp is what tells a changed file: its modification time and size.
type stamp struct {
	mod  time.Time
	size int64
}

// Load reads the files once; it fails when they do not load, so that a
// broker does not start with a listener it cannot serve.
func Load(cfg Config) (*Files, error) {
	ca, err := cfg.ClientAuth.tlsType()
	if err != nil {
		return nil, err
	}
	if ca != tls.NoClientCert && cfg.ClientCAFile == "" {
		return nil, errors.New("client certificates are asked for, but no client CA file is given")
	}
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	f := &Files{cfg: cfg, clientAuth: ca}
	stamps, err := f.stat()
	if err != nil {
		return nil, err
	}
	if err := f.load(stamps); err != nil {
		return nil, err
	}
	f.checked = cfg.Now()
	return f, nil
}

func (f *Files) paths() []string {
	p := []string{f.cfg.CertFile, f.cfg.KeyFile}
	if f.cfg.ClientCAFile != "" {
		p = append(p, f.cfg.ClientCAFile)
	}
	if f.cfg.ServerCAFile != "" {
		p = append(p, f.cfg.ServerCAFile)
	}
	return p
}

func (f *Files) stat() ([]stamp, error) {
	var out []stamp
	for _, p := range f.paths() {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out = append(out, stamp{mod: st.ModTime(), size: st.Size()})
	}
	return out, nil
}

func (f *Files) load(stamps []stamp) error {
	cert, err := tls.LoadX509KeyPair(f.cfg.CertFile, f.cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("load the certificate %s and key %s: %w", f.cfg.CertFile, f.cfg.KeyFile, err)
	}
	cas, err := loadPool(f.cfg.ClientCAFile, "client")
	if err != nil {
		return err
	}
	serverCAs, err := loadPool(f.cfg.ServerCAFile, "server")
	if err != nil {
		return err
	}
	f.cert, f.cas, f.serverCAs, f.stamps = &cert, cas, serverCAs, stamps
	return nil
}

// loadPool reads the CAs of path (of whose certificates: kind); nil for
// no path.
func loadPool(path, kind string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the %s CAs: %w", kind, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s CA file %s holds no certificate", kind, path)
	}
	return pool, nil
}

// current reloads the files if they changed since the last look (at most
// every CheckEvery) and returns what is loaded.
func (f *Files) current() (*tls.Certificate, *x509.CertPool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.cfg.Now()
	if now.Sub(f.checked) < f.cfg.CheckEvery {
		return f.cert, f.cas
	}
	f.checked = now
	stamps, err := f.stat()
	if err != nil {
		f.cfg.Logger.Error(err, "TLS files not readable; serving the certificate loaded before")
		return f.cert, f.cas
	}
	if !changed(stamps, f.stamps) {
		return f.cert, f.cas
	}
	if err := f.load(stamps); err != nil {
		// A rotation may write the certificate and the key one after the
		// other: the next look tries again.
		f.cfg.Logger.Error(err, "new TLS files do not load; serving the certificate loaded before")
		return f.cert, f.cas
	}
	f.cfg.Logger.Info("TLS certificate reloaded", "cert", f.cfg.CertFile, "notAfter", f.cert.Leaf.NotAfter)
	return f.cert, f.cas
}

func changed(a, b []stamp) bool {
	if len(a) != len(b) {
		return true
	}
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size {
			return true
		}
	}
	return false
}

// ClientConfig is the tls.Config of one connection this broker makes to
// another broker at host: TLS 1.2 and 1.3, the other's certificate
// verified for host against ServerCAFile (the system's CAs without one),
// and, withCert, this broker's certificate presented when the other asks
// for one (an SSL listener with client authentication). The files are as
// last loaded.
func (f *Files) ClientConfig(host string, withCert bool) *tls.Config {
	cert, _ := f.current()
	f.mu.Lock()
	roots := f.serverCAs
	f.mu.Unlock()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host, RootCAs: roots}
	if withCert {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg
}

// Certificate is this broker's certificate, as last loaded.
func (f *Files) Certificate() *x509.Certificate {
	cert, _ := f.current()
	return cert.Leaf
}

// ServerConfig is an SSL listener's tls.Config: TLS 1.2 and 1.3 only,
// each handshake with the files as last loaded, client certificates asked
// for as ClientAuth says.
func (f *Files) ServerConfig() *tls.Config { return f.config(f.clientAuth) }

// SASLServerConfig is a SASL_SSL listener's: the same, without client
// certificates (its clients authenticate with SASL, as in Kafka).
func (f *Files) SASLServerConfig() *tls.Config { return f.config(tls.NoClientCert) }

func (f *Files) config(clientAuth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, cas := f.current()
			return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert},
				ClientAuth: clientAuth, ClientCAs: cas}, nil
		},
	}
}
