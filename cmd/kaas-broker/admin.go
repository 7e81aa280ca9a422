package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/wire/tlsfiles"
)

// adminOptions secure the admin HTTP address (--admin): TLS from PEM files
// reloaded when they change, a bearer token for everything but the probes,
// and the profiler only when asked for.
type adminOptions struct {
	certFile, keyFile, tokenFile string
	pprof                        bool
}

func (a *adminOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&a.certFile, "admin-tls-cert-file", "", "PEM certificate of the admin address, reloaded when it changes (KAAS_ADMIN_TLS_CERT_FILE; empty: plain HTTP)")
	fs.StringVar(&a.keyFile, "admin-tls-key-file", "", "PEM key of --admin-tls-cert-file (KAAS_ADMIN_TLS_KEY_FILE)")
	fs.StringVar(&a.tokenFile, "admin-auth-token-file", "", "file holding the bearer token every admin request but /healthz and /readyz must carry, reread when it changes (KAAS_ADMIN_AUTH_TOKEN_FILE; empty: no authentication)")
	fs.BoolVar(&a.pprof, "admin-pprof", false, "serve /debug/pprof/ on the admin address (KAAS_ADMIN_PPROF)")
}

// validate checks the flags that go together.
func (a adminOptions) validate() error {
	if (a.certFile == "") != (a.keyFile == "") {
		return errors.New("--admin-tls-cert-file and --admin-tls-key-file go together")
	}
	return nil
}

// adminEngine and adminServer are what the admin routes read: the engine's
// readiness and status, the Kafka server's readiness.
type adminEngine interface {
	Readiness() (bool, string)
	Describe() engine.BrokerStatus
	ReconcileStatus() ([]engine.StatusRow, error)
}

type adminServer interface{ Ready() error }

// adminMux routes the admin address: probes, status, /metrics (when
// metrics is not nil) and, with pprof, the profiler.
func adminMux(eng adminEngine, srv adminServer, pprofOn bool, metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		// Liveness: the process answers. Slow storage must not get the
		// broker killed into a restart loop, so no volume I/O here.
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if ready, why := eng.Readiness(); !ready {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		// A broker that cannot take clients (fds exhausted, the request
		// budget stuck) is not ready either.
		if err := srv.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	if pprofOn {
		// Where a broker spends its CPU is a question users ask; the
		// profiler also exposes memory contents, so it is off by default.
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, eng.Describe())
	})
	mux.HandleFunc("GET /reconcile-status", func(w http.ResponseWriter, r *http.Request) {
		rows, err := eng.ReconcileStatus()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, rows)
	})
	return mux
}

// probePaths are served without a token: the kubelet's probes carry none.
var probePaths = map[string]bool{"/healthz": true, "/readyz": true}

// requireToken lets a request through when it is a probe or carries
// "Authorization: Bearer <token>" with the token file's current token.
func requireToken(h http.Handler, tok *tokenFile) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if probePaths[r.URL.Path] {
			h.ServeHTTP(w, r)
			return
		}
		given, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !tok.matches(given) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kaas-broker admin"`)
			http.Error(w, "unauthorized: this admin address needs Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// tokenFile is a bearer token read from a file and reread when the file's
// time or size changes (a Secret update), at most every checkEvery. A new
// file that is empty or unreadable is logged and the old token kept.
type tokenFile struct {
	path       string
	checkEvery time.Duration
	now        func() time.Time
	log        logr.Logger

	mu      sync.Mutex
	checked time.Time
	stamp   stamp
	sum     [sha256.Size]byte
}

type stamp struct {
	mod  time.Time
	size int64
}

func loadTokenFile(path string, log logr.Logger, now func() time.Time) (*tokenFile, error) {
	t := &tokenFile{path: path, checkEvery: time.Second, now: now, log: log}
	st, sum, err := t.read()
	if err != nil {
		return nil, err
	}
	t.stamp, t.sum, t.checked = st, sum, now()
	return t, nil
}

func (t *tokenFile) read() (stamp, [sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	fi, err := os.Stat(t.path)
	if err != nil {
		return stamp{}, sum, fmt.Errorf("admin token file: %w", err)
	}
	b, err := os.ReadFile(t.path)
	if err != nil {
		return stamp{}, sum, fmt.Errorf("admin token file: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return stamp{}, sum, fmt.Errorf("admin token file %s is empty", t.path)
	}
	return stamp{mod: fi.ModTime(), size: fi.Size()}, sha256.Sum256(b), nil
}

// matches compares digests in constant time, so neither the token's
// bytes nor its length leak through timing.
func (t *tokenFile) matches(given string) bool {
	want := t.current()
	got := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(want[:], got[:]) == 1
}

func (t *tokenFile) current() [sha256.Size]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if now.Sub(t.checked) < t.checkEvery {
		return t.sum
	}
	t.checked = now
	fi, err := os.Stat(t.path)
	if err == nil && fi.ModTime().Equal(t.stamp.mod) && fi.Size() == t.stamp.size {
		return t.sum
	}
	st, sum, err := t.read()
	if err != nil {
		t.log.Error(err, "new admin token not loaded; the token loaded before still holds")
		return t.sum
	}
	t.stamp, t.sum = st, sum
	t.log.Info("admin token reloaded", "file", t.path)
	return t.sum
}

// serve wraps mux as the options say and serves it on ln (with TLS
// if a certificate is given) until the returned server is shut down.
func (a adminOptions) serve(ln net.Listener, mux http.Handler, log logr.Logger) (*http.Server, error) {
	h := mux
	if a.tokenFile != "" {
		tok, err := loadTokenFile(a.tokenFile, log, time.Now)
		if err != nil {
			return nil, err
		}
		h = requireToken(h, tok)
	}
	if a.certFile != "" {
		files, err := tlsfiles.Load(tlsfiles.Config{CertFile: a.certFile, KeyFile: a.keyFile, Logger: log.WithName("tls")})
		if err != nil {
			return nil, fmt.Errorf("admin TLS: %w", err)
		}
		ln = tls.NewListener(ln, files.ServerConfig())
	}
	s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.Serve(ln) }()
	return s, nil
}
