package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

// AlreadyRunningError is a StartCheck's finding that another process is
// running as the same broker: its heartbeat advanced while the check
// watched it.
type AlreadyRunningError struct {
	BrokerID    int32
	Incarnation string // the running process's
}

func (e *AlreadyRunningError) Error() string {
	return fmt.Sprintf("broker %d is already running (incarnation %s, heartbeat advancing)", e.BrokerID, e.Incarnation)
}

// StartCheck keeps a second process from starting as a broker that is
// running. Liveness is judged as an Observer judges it: by the heartbeat
// advancing, as seen on this process's monotonic clock; the wall-clock
// time in the file is never looked at.
type StartCheck struct {
	FS         volume.FS
	ClusterDir string
	BrokerID   int32
	// Lease is how long a running broker may go without a beat. A
	// heartbeat that does not advance for that long belongs to a process
	// that is gone (a crash).
	Lease time.Duration
	// Poll is how often the file is read again while waiting; default
	// Lease/8.
	Poll time.Duration
	// Now and Sleep are the clock and the wait; default MonotonicClock()
	// and a timer. Tests set both.
	Now   Clock
	Sleep func(ctx context.Context, d time.Duration) error
	// Waiting, when set, is called once when the check has to watch the
	// heartbeat (it is there and not leaving), with what it found.
	Waiting func(found Heartbeat)
}

// Run reads the broker's heartbeat file and returns at once when there is
// none or when it is marked leaving (a clean shutdown). Otherwise it
// watches the file for up to one lease: if it advances (a higher counter,
// or another incarnation) and is not leaving, another process runs as the
// broker and Run returns an *AlreadyRunningError; if not, the process that
// wrote it is gone. Run returns the incarnation it found, for
// Heartbeater.Replaces ("" if none).
func (c StartCheck) Run(ctx context.Context) (found string, err error) {
	now, sleep, poll := c.Now, c.Sleep, c.Poll
	if now == nil {
		now = MonotonicClock()
	}
	if sleep == nil {
		sleep = sleepCtx
	}
	if poll <= 0 {
		poll = c.Lease / 8
	}
	first, err := ReadHeartbeat(c.FS, c.ClusterDir, c.BrokerID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case errors.Is(err, ErrNotHeartbeat):
		// Not a heartbeat (nothing kaas writes): any valid one that
		// appears while watching is progress.
	case err != nil:
		return "", fmt.Errorf("check that broker %d is not running: %w", c.BrokerID, err)
	case first.Leaving:
		return first.Incarnation, nil
	}
	if c.Waiting != nil {
		c.Waiting(first)
	}
	start := now()
	for now()-start < c.Lease {
		if err := sleep(ctx, min(poll, c.Lease-(now()-start))); err != nil {
			return "", err
		}
		hb, err := ReadHeartbeat(c.FS, c.ClusterDir, c.BrokerID)
		switch {
		case err != nil:
			continue // no observation this time
		case hb.Leaving:
			return hb.Incarnation, nil // it stopped cleanly meanwhile
		case hb.Incarnation != first.Incarnation || hb.Counter > first.Counter:
			return "", &AlreadyRunningError{BrokerID: c.BrokerID, Incarnation: hb.Incarnation}
		}
	}
	return first.Incarnation, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
