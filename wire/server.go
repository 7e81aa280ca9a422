// Package wire is kaas's Kafka front end: a TCP server speaking the Kafka
// protocol through franz-go's kmsg, one file per API key (named by key
// number, kfake-style), one table (dispatch.go) from which ApiVersions is
// derived. Handlers are thin: they translate to and from package engine,
// which owns all state.
package wire

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/engine"
)

// Config configures a Server.
type Config struct {
	Engine *engine.Engine
	Logger logr.Logger
	// Advertise is the host:port clients are told to connect to.
	Advertise string
	// Rack is advertised as the broker's rack (its zone).
	Rack string
	// MaxFrameBytes bounds one request (socket.request.max.bytes); larger
	// frames close the connection, as Kafka does. Default 100 MiB.
	MaxFrameBytes int32
	// FrameTimeout bounds how long a started frame may take to arrive
	// (time spent waiting for the request budget does not count).
	FrameTimeout time.Duration
	// IdleTimeout closes connections with no request for this long
	// (connections.max.idle.ms). Default 10 min.
	IdleTimeout time.Duration
	// MaxQueuedBytes bounds the bytes of all request frames being read or
	// not yet answered, across connections (queued.max.request.bytes),
	// charged as their bytes arrive. Default 512 MiB; never below
	// MaxFrameBytes.
	MaxQueuedBytes int64
	// MaxConnQueuedBytes bounds the bytes of one connection's frames being
	// read or not yet answered: a connection pipelining large requests
	// waits before reading the next one rather than take the whole
	// MaxQueuedBytes. One frame is always let in. Default MaxQueuedBytes/4.
	MaxConnQueuedBytes int64
	// MaxInFlight bounds requests being processed per connection.
	MaxInFlight int
	// MetadataWait bounds how long Metadata waits for auto-created topics.
	MetadataWait time.Duration
	// MaxConnections bounds the open client connections (max.connections)
	// and MaxConnectionsPerIP those from one address
	// (max.connections.per.ip); a connection over either is closed as soon
	// as it is accepted. 0 is unlimited.
	MaxConnections, MaxConnectionsPerIP int
	// MaxFetchWait caps a Fetch's MaxWaitMillis: a long poll never outlives
	// the request timeout of the clients (Java's request.timeout.ms is 30 s
	// by default). Default 30 s.
	MaxFetchWait time.Duration
	// FetchMaxBytes caps the records of one Fetch answer, whatever the
	// request's MaxBytes (fetch.max.bytes); the first batch of the first
	// partition with data is still answered whole. Default 55 MiB.
	FetchMaxBytes int32
	// BrokerPrincipals are the principals (User:<name>) that may send the
	// inter-broker-only APIs (interbroker.go): the brokers' own, and
	// super users. Empty: any connection may, for a broker that
	// authenticates no client.
	BrokerPrincipals []string
	// MaxProduceBytesPerSecond is a broker-wide produce rate guard: all
	// clients share one meter and, over it, produce responses are
	// throttled as by a client quota. 0 is off.
	MaxProduceBytesPerSecond float64
	// DisableMetrics turns the front end's metrics off (Collector is nil):
	// the benchmarks' baseline.
	DisableMetrics bool
}

// DefaultFetchMaxBytes is Kafka's fetch.max.bytes default.
const DefaultFetchMaxBytes = 55 << 20

// unreadyAfter is how long accepting may fail, or requests wait for the
// request budget without any getting in, before Ready reports the broker
// cannot serve.
const unreadyAfter = 10 * time.Second

// Server serves the Kafka protocol.
type Server struct {
	cfg Config
	eng *engine.Engine
	log logr.Logger
	now func() time.Time
	// plaintext is the listener Serve serves: PLAINTEXT at cfg.Advertise.
	plaintext *Listener
	// brokerPrincipals is Config.BrokerPrincipals as a set.
	brokerPrincipals map[string]bool
	// quotas meters handled requests for the client quotas and the
	// broker-wide produce guard (quota_enforce.go).
	quotas *quotaMeters
	// metrics counts requests, connections and traffic (metrics.go); nil
	// with DisableMetrics.
	metrics *metrics

	mu    sync.Mutex
	lns   []net.Listener
	conns map[*conn]struct{}
	perIP map[netip.Addr]int // open connections by remote address, when limited
	// budget is the memory budget of request frames (MaxQueuedBytes).
	budget *requestBudget
	wg     sync.WaitGroup
	quit   chan struct{}

	accepts acceptHealth
	// rejectedConns counts connections closed over a connection limit;
	// connQueueWaits, reads that waited for their connection's share of
	// the budget (MaxConnQueuedBytes).
	rejectedConns, connQueueWaits atomic.Int64
	rejectLog                     logEvery
}

// NewServer returns a server; Serve starts it.
func NewServer(cfg Config) (*Server, error) {
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = 100 << 20
	}
	if cfg.FrameTimeout <= 0 {
		cfg.FrameTimeout = 30 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.MaxQueuedBytes <= 0 {
		cfg.MaxQueuedBytes = 512 << 20
	}
	cfg.MaxQueuedBytes = max(cfg.MaxQueuedBytes, int64(cfg.MaxFrameBytes))
	if cfg.MaxConnQueuedBytes <= 0 {
		cfg.MaxConnQueuedBytes = cfg.MaxQueuedBytes / 4
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 32
	}
	if cfg.MetadataWait <= 0 {
		cfg.MetadataWait = 3 * time.Second
	}
	if cfg.MaxFetchWait <= 0 {
		cfg.MaxFetchWait = 30 * time.Second
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if cfg.MaxConnections < 0 || cfg.MaxConnectionsPerIP < 0 {
		return nil, fmt.Errorf("connection limits must not be negative (max %d, per IP %d)", cfg.MaxConnections, cfg.MaxConnectionsPerIP)
	}
	plaintext := &Listener{Advertise: cfg.Advertise}
	if err := plaintext.prepare(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, eng: cfg.Engine, log: cfg.Logger, plaintext: plaintext, now: time.Now,
		conns: map[*conn]struct{}{}, perIP: map[netip.Addr]int{}, quit: make(chan struct{})}
	if len(cfg.BrokerPrincipals) > 0 {
		s.brokerPrincipals = map[string]bool{}
		for _, p := range cfg.BrokerPrincipals {
			s.brokerPrincipals[p] = true
		}
	}
	if !cfg.DisableMetrics {
		s.metrics = newMetrics()
	}
	s.quotas = newQuotaMeters(cfg.Engine, cfg.MaxProduceBytesPerSecond, func() int64 { return s.now().UnixMilli() })
	s.budget = newRequestBudget(cfg.MaxQueuedBytes, func() time.Time { return s.now() })
	return s, nil
}

// Serve accepts PLAINTEXT connections on ln, advertised at
// Config.Advertise, until Shutdown (ServeListener).
func (s *Server) Serve(ln net.Listener) error { return s.serve(ln, s.plaintext) }

// ServeListener accepts connections on ln for listener l until Shutdown.
// Accept errors other than a closed listener (EMFILE, ENFILE, ENOBUFS,
// ...) never end it: it backs off (5 ms doubling to 1 s, as net/http
// does) and retries.
func (s *Server) ServeListener(ln net.Listener, l Listener) error {
	if err := l.prepare(); err != nil {
		_ = ln.Close()
		return err
	}
	return s.serve(ln, &l)
}

func (s *Server) serve(ln net.Listener, l *Listener) error {
	if s.metrics != nil {
		l.stats = s.metrics.listener(l.Name)
	}
	s.mu.Lock()
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	select {
	case <-s.quit: // Shutdown ran before Serve: nothing would close ln
		_ = ln.Close()
		return nil
	default:
	}
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-s.quit:
				return nil
			default:
			}
			if !retryableAccept(err) {
				return fmt.Errorf("accept: %w", err)
			}
			backoff = acceptBackoff(backoff)
			s.accepts.failed(s, err, backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.quit:
				t.Stop()
				return nil
			}
			continue
		}
		backoff = 0
		s.accepts.succeeded()
		if !s.admit(nc, l) {
			return nil
		}
	}
}

// admit registers and serves nc, or closes it at once when it is over a
// connection limit, before anything is allocated for it. False means
// Shutdown has begun.
func (s *Server) admit(nc net.Conn, l *Listener) bool {
	ip := remoteIP(nc)
	s.mu.Lock()
	select {
	case <-s.quit:
		// Accepted while Shutdown ran: it has already told the
		// registered connections to stop and may be in wg.Wait.
		s.mu.Unlock()
		_ = nc.Close()
		return false
	default:
	}
	if over := s.overLimit(ip); over != "" {
		s.mu.Unlock()
		_ = nc.Close()
		n := s.rejectedConns.Add(1)
		if ok, suppressed := s.rejectLog.allow(s.now(), time.Second); ok {
			s.log.V(1).Info("closed a connection over a limit", "remote", nc.RemoteAddr().String(), "limit", over,
				"rejectedInAll", n, "rejectedSinceLastLog", suppressed+1)
		}
		return true
	}
	if l.TLS != nil {
		nc = tls.Server(nc, l.TLS) // the handshake runs first in serve
	}
	c := newConn(s, nc, l)
	c.ip = ip
	s.conns[c] = struct{}{}
	if s.cfg.MaxConnectionsPerIP > 0 {
		s.perIP[ip]++
	}
	s.wg.Add(1)
	s.mu.Unlock()
	if l.stats != nil {
		l.stats.open.Add(1)
		l.stats.total.Add(1)
	}
	go func() {
		defer s.wg.Done()
		c.serve()
		if l.stats != nil {
			l.stats.open.Add(-1)
		}
		s.mu.Lock()
		delete(s.conns, c)
		if s.cfg.MaxConnectionsPerIP > 0 {
			if s.perIP[c.ip]--; s.perIP[c.ip] <= 0 {
				delete(s.perIP, c.ip)
			}
		}
		s.mu.Unlock()
	}()
	return true
}

// overLimit names the connection limit a new connection from ip would
// exceed, or returns ""; s.mu is held.
func (s *Server) overLimit(ip netip.Addr) string {
	switch {
	case s.cfg.MaxConnections > 0 && len(s.conns) >= s.cfg.MaxConnections:
		return "max.connections"
	case s.cfg.MaxConnectionsPerIP > 0 && s.perIP[ip] >= s.cfg.MaxConnectionsPerIP:
		return "max.connections.per.ip"
	}
	return ""
}

// remoteIP is the address a connection comes from (the zero Addr when it
// is not TCP).
func remoteIP(nc net.Conn) netip.Addr {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// Ready reports why the broker cannot serve clients, or nil: accepting
// connections has failed (file descriptors exhausted) for unreadyAfter, or
// requests have waited that long for the request budget without any
// getting in.
func (s *Server) Ready() error {
	if d, err := s.accepts.failingFor(s.now()); d >= unreadyAfter {
		return fmt.Errorf("accepting connections has failed for %v: %w", d.Round(time.Second), err)
	}
	if d, held := s.budget.blocked(); d >= unreadyAfter {
		return fmt.Errorf("requests have waited %v for the request budget (%d of %d bytes held by requests being read or answered)",
			d.Round(time.Second), held, s.cfg.MaxQueuedBytes)
	}
	return nil
}

// Shutdown stops accepting, lets in-flight requests finish (until ctx ends),
// then closes every connection.
func (s *Server) Shutdown(ctx context.Context) {
	close(s.quit)
	s.mu.Lock()
	for _, ln := range s.lns {
		_ = ln.Close()
	}
	for c := range s.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			// Cancel too: a long-polling fetch or a produce waiting for
			// its fsync watches c.ctx, not the socket, and the writer
			// waits for its reply before the connection can end.
			c.cancel()
			_ = c.nc.Close()
		}
		s.mu.Unlock()
		<-done
	}
}
