package wire

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

// TestRequestBudget walks the budget through charges, each either granted
// at once or refused (a cancelled context: charge returns nil only when it
// did not have to wait).
func TestRequestBudget(t *testing.T) {
	type step struct {
		frame   string // frames are named; sizes below
		want    int64  // charge up to this; 0: drop the frame
		granted bool
		held    int64 // the frame's charge after the step
	}
	sizes := map[string]int64{"a": 100, "b": 100, "big": 80, "small": 10, "half": 50}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a small request gets in where a big one cannot", []step{
			{"half", 50, true, 50},
			{"big", 80, false, 0}, // 50 free
			{"small", 10, true, 10},
		}},
		{"a partial charge that could deadlock is refused", []step{
			{"a", 10, true, 10},
			{"b", 10, false, 0}, // a could no longer finish: 80 free for its 90
			{"a", 100, true, 100},
			{"a", 0, true, 0},
			{"b", 10, true, 10},
		}},
		{"a frame takes all it needs at once when a partial charge is unsafe", []step{
			{"a", 40, true, 40},
			{"small", 4, true, 10}, // 4 would leave 56 for a's 60
		}},
		{"a frame growing is not held up by one refused", []step{
			{"a", 40, true, 40},
			{"b", 10, false, 0}, // 50 left for its 90
			{"a", 50, true, 50},
			{"a", 100, true, 100},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newRequestBudget(100, time.Now)
			frames := map[string]*frameCharge{}
			cancelled, cancel := context.WithCancel(context.Background())
			cancel()
			for i, s := range tc.steps {
				f := frames[s.frame]
				if f == nil {
					f = &frameCharge{size: sizes[s.frame], idx: -1}
					frames[s.frame] = f
				}
				if s.want == 0 {
					b.drop(f)
				} else if _, err := b.charge(cancelled, f, s.want); (err == nil) != s.granted {
					t.Fatalf("step %d: %s charging %d: granted %v, want %v", i, s.frame, s.want, err == nil, s.granted)
				}
				if f.held != s.held {
					t.Fatalf("step %d: %s holds %d, want %d", i, s.frame, f.held, s.held)
				}
			}
		})
	}
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestServerReady: Ready reports a request budget nobody gets into, and
// accepting that keeps failing, once they last unreadyAfter.
func TestServerReady(t *testing.T) {
	s, err := NewServer(Config{Advertise: "127.0.0.1:9092", MaxFrameBytes: 100, MaxQueuedBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(1000, 0)}
	s.now = clock.Now
	if err := s.Ready(); err != nil {
		t.Fatalf("idle server: %v", err)
	}

	hog := &frameCharge{size: 100, idx: -1}
	if _, err := s.budget.charge(context.Background(), hog, 100); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		_, _ = s.budget.charge(ctx, &frameCharge{size: 10, idx: -1}, 10)
	}()
	eventually(t, "a request waits", func() bool {
		s.budget.mu.Lock()
		defer s.budget.mu.Unlock()
		return s.budget.waiters == 1
	})
	clock.advance(unreadyAfter - time.Second)
	if err := s.Ready(); err != nil {
		t.Fatalf("blocked for less than %v: %v", unreadyAfter, err)
	}
	clock.advance(time.Second)
	if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "request budget") {
		t.Fatalf("blocked for %v: Ready %v", unreadyAfter, err)
	}
	cancel()
	<-waited
	if err := s.Ready(); err != nil {
		t.Fatalf("nobody waiting: %v", err)
	}

	s.accepts.failed(s, acceptErr(syscall.EMFILE), time.Second)
	clock.advance(unreadyAfter)
	if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "too many open files") {
		t.Fatalf("accept failing for %v: Ready %v", unreadyAfter, err)
	}
	s.accepts.succeeded()
	if err := s.Ready(); err != nil {
		t.Fatalf("accepting again: %v", err)
	}
}

// memConn is a net.Conn reading an endless stream of frames of one size
// from memory, at most 64 KiB per Read (as a socket would hand them over).
type memConn struct {
	net.Conn
	frame []byte
	off   int
}

func (m *memConn) Read(p []byte) (int, error) {
	if m.off == len(m.frame) {
		m.off = 0
	}
	n := copy(p[:min(len(p), 64<<10)], m.frame[m.off:])
	m.off += n
	return n, nil
}

func (m *memConn) SetReadDeadline(time.Time) error { return nil }

// BenchmarkReadFrame compares reading frame bodies the way kaas did before
// charging the budget as bytes arrive (one charge of the announced size on
// a FIFO semaphore, one buffer of that size) with readBody.
func BenchmarkReadFrame(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 1 << 20, 16 << 20} {
		name := func(how string) string { return fmt.Sprintf("%s/%dKiB", how, size>>10) }
		b.Run(name("announced"), func(b *testing.B) {
			sem := semaphore.NewWeighted(512 << 20)
			nc := &memConn{frame: make([]byte, size)}
			b.SetBytes(int64(size))
			for b.Loop() {
				if err := sem.Acquire(context.Background(), int64(size)); err != nil {
					b.Fatal(err)
				}
				buf := make([]byte, size)
				if _, err := io.ReadFull(nc, buf); err != nil {
					b.Fatal(err)
				}
				sem.Release(int64(size))
			}
		})
		b.Run(name("arriving"), func(b *testing.B) {
			s, err := NewServer(Config{Advertise: "127.0.0.1:9092", MaxFrameBytes: 100 << 20})
			if err != nil {
				b.Fatal(err)
			}
			c := newConn(s, &memConn{frame: make([]byte, size)}, s.plaintext)
			b.SetBytes(int64(size))
			for b.Loop() {
				_, charge, err := c.readBody(size)
				if err != nil {
					b.Fatal(err)
				}
				c.releaseCharge(charge)
			}
		})
	}
}
