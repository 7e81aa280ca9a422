package partlog

import (
	"context"
	"errors"
	"math"
	"path"
	"runtime"
	"testing"

	"github.com/kaas-dev/kaas/volume"
)

// openSlotted opens a log in its own directory of fsys sharing slots.
func openSlotted(t *testing.T, fsys volume.FS, name string, slots *WriteSlots) *Log {
	t.Helper()
	dir := path.Join(testDir, name)
	if err := volume.MkdirAllSync(fsys, dir); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, 1, newFakeClock())
	cfg.WriteSlots = slots
	l, err := Open(fsys, dir, cfg)
	if err != nil {
		t.Fatalf("Open %s: %v", name, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestWriteSlotsBoundLogsWithUnsyncedAppends: a log holds a slot from its
// first append until a round makes it clean; another log's reservation
// waits for it (or fails when its context ends first), and is handed the
// slot by that round.
func TestWriteSlotsBoundLogsWithUnsyncedAppends(t *testing.T) {
	fsys := newMemFS(t)
	slots := NewWriteSlots(1)
	a := openSlotted(t, fsys, "a", slots)
	b := openSlotted(t, fsys, "b", slots)

	if err := a.ReserveWrite(context.Background()); err != nil {
		t.Fatalf("a's reservation: %v", err)
	}
	res := mustAppend(t, a, batch(2, 10, 1))
	if err := a.ReserveWrite(context.Background()); err != nil {
		t.Fatalf("a holds a slot: its next reservation is free: %v", err)
	}
	if st := slots.Stats(); st.Held != 1 {
		t.Fatalf("after a's append: %+v, want 1 held", st)
	}

	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.ReserveWrite(done); !errors.Is(err, ErrNoWriteSlot) {
		t.Fatalf("b's reservation with every slot held: %v, want ErrNoWriteSlot", err)
	}
	if st := slots.Stats(); st.Waiting != 0 || st.Held != 1 {
		t.Fatalf("after b gave up: %+v, want nobody waiting, 1 held", st)
	}

	reserved := make(chan error, 1)
	go func() { reserved <- b.ReserveWrite(context.Background()) }()
	for slots.Stats().Waiting == 0 { // until b waits
		select {
		case err := <-reserved:
			t.Fatalf("b reserved while a holds the only slot: %v", err)
		default:
			runtime.Gosched()
		}
	}
	mustSync(t, a, res.LastOffset) // a is clean: its slot goes to b
	if err := <-reserved; err != nil {
		t.Fatalf("b's reservation after a's round: %v", err)
	}
	mustAppend(t, b, batch(1, 10, 1))
	if st := slots.Stats(); st.Held != 1 || st.Overflows != 0 || st.Waits != 2 {
		t.Fatalf("after b's append: %+v, want 1 held, no overflow, 2 waits", st)
	}

	// An append without a reservation when every slot is held goes over
	// the bound, counted, and its round gives the slot back.
	res = mustAppend(t, a, batch(1, 10, 1))
	if st := slots.Stats(); st.Held != 2 || st.Overflows != 1 {
		t.Fatalf("after a's unreserved append: %+v, want 2 held, 1 overflow", st)
	}
	mustSync(t, a, res.LastOffset)
	mustClose(t, b) // Close gives b's slot back after its final sync
	if st := slots.Stats(); st.Held != 0 {
		t.Fatalf("after a's round and b's close: %+v, want none held", st)
	}
}

// TestWriteSlotsSetMax: raising the bound hands slots to waiters; a bound
// of 0 is none.
func TestWriteSlotsSetMax(t *testing.T) {
	w := NewWriteSlots(1)
	if !w.tryAcquire() {
		t.Fatal("first slot refused")
	}
	got := make(chan error, 1)
	go func() { got <- w.acquire(context.Background()) }()
	for w.Stats().Waiting == 0 { // until the waiter has queued
		runtime.Gosched()
		select {
		case err := <-got:
			t.Fatalf("acquired over the bound: %v", err)
		default:
		}
	}
	w.SetMax(2)
	if err := <-got; err != nil {
		t.Fatalf("waiter after the bound was raised: %v", err)
	}
	w.SetMax(0)
	for range 100 {
		if !w.tryAcquire() {
			t.Fatal("a bound of 0 refused a slot")
		}
	}
	if st := w.Stats(); st.Held != 102 {
		t.Fatalf("%+v, want 102 held", st)
	}
}

// TestWriteSlotsClosedLog: a reservation on a closed log takes no slot for
// good (Close gave the log's back already).
func TestWriteSlotsClosedLog(t *testing.T) {
	fsys := newMemFS(t)
	slots := NewWriteSlots(1)
	a := openSlotted(t, fsys, "a", slots)
	mustAppend(t, a, batch(1, 10, 1))
	mustClose(t, a)
	if err := a.ReserveWrite(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("reservation on a closed log: %v, want ErrClosed", err)
	}
	if st := slots.Stats(); st.Held != 0 {
		t.Fatalf("after a closed log's reservation: %+v, want none held", st)
	}
}

// TestWriteSlotsReleaseReserved: a reservation whose append was not made
// (refused, or a retry answered from producer state) gives its slot back,
// and a round with nothing to fsync frees a slot held by a clean log; a
// log with appends not yet durable keeps its slot.
func TestWriteSlotsReleaseReserved(t *testing.T) {
	fsys := newMemFS(t)
	slots := NewWriteSlots(1)
	a := openSlotted(t, fsys, "a", slots)
	if err := a.ReserveWrite(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.ReleaseReserved()
	if st := slots.Stats(); st.Held != 0 {
		t.Fatalf("after a reservation given back unused: %+v, want none held", st)
	}

	res := mustAppend(t, a, batch(1, 10, 1))
	a.ReleaseReserved() // the append is not durable yet: kept
	if st := slots.Stats(); st.Held != 1 {
		t.Fatalf("with an append waiting for its round: %+v, want 1 held", st)
	}
	mustSync(t, a, res.LastOffset)
	if st := slots.Stats(); st.Held != 0 {
		t.Fatalf("after the round: %+v, want none held", st)
	}

	// A reservation followed by a round that has nothing to fsync.
	if err := a.ReserveWrite(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(context.Background(), math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	a.ReleaseReserved()
	if st := slots.Stats(); st.Held != 0 {
		t.Fatalf("after a round with nothing to fsync and a release: %+v, want none held", st)
	}
}
