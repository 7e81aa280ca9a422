package wire

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// retryableAccept reports whether Serve should retry after err: every
// accept error except those saying the listener itself is gone. Running
// out of file descriptors (EMFILE, ENFILE) or kernel memory (ENOBUFS,
// ENOMEM), or a connection aborted before it was accepted, passes; a
// broker must never exit for them (Kafka's acceptor, too, logs and goes
// on).
func retryableAccept(err error) bool {
	for _, fatal := range []error{net.ErrClosed, syscall.EBADF, syscall.EINVAL, syscall.ENOTSOCK} {
		if errors.Is(err, fatal) {
			return false
		}
	}
	return true
}

// acceptBackoff is the wait after one more failed accept: 5 ms, doubling
// up to 1 s (net/http's).
func acceptBackoff(prev time.Duration) time.Duration {
	if prev == 0 {
		return 5 * time.Millisecond
	}
	return min(2*prev, time.Second)
}

// acceptHealth remembers since when accepting has failed, for Ready and for
// rate-limited logging.
type acceptHealth struct {
	mu    sync.Mutex
	since time.Time // zero while accepting works
	err   error
	log   logEvery
}

// failed records a failed accept and logs it, at most every 10 s.
func (h *acceptHealth) failed(s *Server, err error, backoff time.Duration) {
	now := s.now()
	h.mu.Lock()
	if h.since.IsZero() {
		h.since = now
	}
	h.err = err
	since := h.since
	h.mu.Unlock()
	if ok, suppressed := h.log.allow(now, 10*time.Second); ok {
		s.log.Error(err, "accepting a connection failed; retrying", "retryIn", backoff,
			"failingFor", now.Sub(since).Round(time.Millisecond), "failuresSinceLastLog", suppressed+1)
	}
}

func (h *acceptHealth) succeeded() {
	h.mu.Lock()
	h.since, h.err = time.Time{}, nil
	h.mu.Unlock()
}

// failingFor reports how long accepting has failed (0 if it works) and the
// last error.
func (h *acceptHealth) failingFor(now time.Time) (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since.IsZero() {
		return 0, nil
	}
	return now.Sub(h.since), h.err
}

// logEvery rate-limits a log line: allow is true at most once per period,
// and then says how many calls it refused since.
type logEvery struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (l *logEvery) allow(now time.Time, period time.Duration) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < period {
		l.suppressed++
		return false, 0
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	return true, n
}
