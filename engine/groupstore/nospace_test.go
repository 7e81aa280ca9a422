package groupstore

import (
	"errors"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// TestAppendNoSpaceFailsShard: a full cluster volume refuses the append
// with ErrNoSpace and, as the Journal contract says, fails the shard (once)
// so the coordinator is reloaded; the reload at a new epoch, once space
// returns, holds exactly the acknowledged records.
func TestAppendNoSpaceFailsShard(t *testing.T) {
	mem := newVolume(t)
	var full atomic.Bool
	ffs := faultfs.New(mem, func(op faultfs.Op) faultfs.Action {
		if full.Load() && op.Kind == faultfs.OpWriteAt {
			return faultfs.FailAfter(syscall.ENOSPC)
		}
		return faultfs.Proceed
	})
	var failures atomic.Int32
	s, _ := openAt(t, ffs, 1, func(c *Config) { c.OnFailure = func() { failures.Add(1) } })
	want := model{}
	appendAcked(t, s, want, put("a", "1"))

	full.Store(true)
	if _, _, err := s.Append([]Record{put("b", "2")}); !errors.Is(err, partlog.ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full volume: %v, want ErrNoSpace", err)
	}
	if failures.Load() != 1 || !errors.Is(s.Err(), partlog.ErrNoSpace) {
		t.Fatalf("OnFailure %d times, Err %v", failures.Load(), s.Err())
	}
	full.Store(false)
	if _, _, err := s.Append([]Record{put("c", "3")}); !errors.Is(err, partlog.ErrNoSpace) {
		t.Fatalf("append to a failed shard: %v, want the full-volume failure", err)
	}
	if failures.Load() != 1 {
		t.Fatalf("OnFailure %d times, want once", failures.Load())
	}
	_ = s.Close()

	s, _ = openAt(t, mem, 2)
	defer s.Close()
	if got, _ := tableOf(t, s); len(got) != 1 || got["a"] != "1" {
		t.Fatalf("reloaded table %v, want %v", got, want)
	}
	appendAcked(t, s, want, put("d", "4"))
}
