// Package wire is kaas's Kafka front end: a TCP server speaking the Kafka
// protocol through franz-go's kmsg, one file per API key (named by key
// number, kfake-style), one table (dispatch.go) from which ApiVersions is
// derived. Handlers are thin: they translate to and from package engine,
// which owns all state.
package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/semaphore"

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
	// FrameTimeout bounds how long a started frame may take to arrive.
	FrameTimeout time.Duration
	// IdleTimeout closes connections with no request for this long
	// (connections.max.idle.ms). Default 10 min.
	IdleTimeout time.Duration
	// MaxQueuedBytes bounds the bytes of all request frames being read and
	// dispatched at once, across connections (queued.max.request.bytes).
	// Default 512 MiB; never below MaxFrameBytes.
	MaxQueuedBytes int64
	// MaxInFlight bounds requests being processed per connection.
	MaxInFlight int
	// MetadataWait bounds how long Metadata waits for auto-created topics.
	MetadataWait time.Duration
}

// Server serves the Kafka protocol.
type Server struct {
	cfg  Config
	eng  *engine.Engine
	log  logr.Logger
	host string
	port int32

	mu    sync.Mutex
	ln    net.Listener
	conns map[*conn]struct{}
	// queued is the memory budget of request frames (MaxQueuedBytes).
	queued *semaphore.Weighted
	wg     sync.WaitGroup
	quit   chan struct{}
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
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 32
	}
	if cfg.MetadataWait <= 0 {
		cfg.MetadataWait = 3 * time.Second
	}
	host, portS, err := net.SplitHostPort(cfg.Advertise)
	if err != nil {
		return nil, fmt.Errorf("advertised address %q: %w", cfg.Advertise, err)
	}
	port, err := strconv.Atoi(portS)
	if err != nil {
		return nil, fmt.Errorf("advertised port %q: %w", portS, err)
	}
	return &Server{cfg: cfg, eng: cfg.Engine, log: cfg.Logger, host: host, port: int32(port),
		conns: map[*conn]struct{}{}, quit: make(chan struct{}), queued: semaphore.NewWeighted(cfg.MaxQueuedBytes)}, nil
}

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	select {
	case <-s.quit: // Shutdown ran before Serve: nothing would close ln
		_ = ln.Close()
		return nil
	default:
	}
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-s.quit:
				return nil
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		c := newConn(s, nc)
		s.mu.Lock()
		select {
		case <-s.quit:
			// Accepted while Shutdown ran: it has already told the
			// registered connections to stop and may be in wg.Wait.
			s.mu.Unlock()
			_ = nc.Close()
			return nil
		default:
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Shutdown stops accepting, lets in-flight requests finish (until ctx ends),
// then closes every connection.
func (s *Server) Shutdown(ctx context.Context) {
	close(s.quit)
	s.mu.Lock()
	if s.ln != nil {
		_ = s.ln.Close()
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
