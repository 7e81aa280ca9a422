package faultfs

import (
	"errors"
	"io/fs"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

func TestDelay(t *testing.T) {
	m := memfs.New()
	ffs := New(m, func(op Op) Action {
		if op.Kind == OpRename {
			return Delay(50 * time.Millisecond)
		}
		return Proceed
	})
	var slept []time.Duration
	ffs.SetSleep(func(d time.Duration) {
		// Taking the FS's lock here would deadlock if the delay held it.
		slept = append(slept, d)
		if _, err := m.Stat("/b"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("rename applied before its delay ended: %v", err)
		}
		_ = ffs.Ops()
	})
	if err := volume.WriteFileAtomic(ffs, "/a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(slept, []time.Duration{50 * time.Millisecond}) {
		t.Fatalf("slept %v", slept)
	}
	if err := ffs.Rename("/a", "/b"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stat("/b"); err != nil {
		t.Fatalf("rename not applied after the delay: %v", err)
	}
	if Delay(time.Second).String() != "Delay(1s)" || Delay(time.Second) == Delay(2*time.Second) {
		t.Fatal("Delay prints or compares wrong")
	}
}

// TestStall holds one rename until the test releases it and checks that
// the rest of the volume keeps working meanwhile.
func TestStall(t *testing.T) {
	m := memfs.New()
	if err := volume.WriteFileAtomic(m, "/a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	release, decided := make(chan struct{}), make(chan struct{})
	ffs := New(m, func(op Op) Action {
		if op.Kind == OpRename {
			close(decided)
			return Stall(release)
		}
		return Proceed
	})
	done := make(chan error)
	go func() { done <- ffs.Rename("/a", "/b") }()
	<-decided
	// The stalled rename holds no lock: other operations go on.
	if _, err := ffs.Stat("/a"); err != nil {
		t.Fatalf("stat while a rename is stalled: %v", err)
	}
	if _, err := m.Stat("/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stalled rename applied: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stat("/b"); err != nil {
		t.Fatalf("released rename not applied: %v", err)
	}
}

// TestStallFor stops the whole volume from one rename on, holds the stall
// open through the sleep function, and checks that an operation started
// meanwhile waits for it too, and that operations after it do not.
func TestStallFor(t *testing.T) {
	m := memfs.New()
	if err := volume.WriteFileAtomic(m, "/a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	removeDecided := make(chan struct{}, 1)
	ffs := New(m, func(op Op) Action {
		switch op.Kind {
		case OpRename:
			if op.NewPath == "/b" {
				return StallFor(time.Minute)
			}
		case OpRemove:
			removeDecided <- struct{}{}
		}
		return Proceed
	})
	sleeping, hold := make(chan time.Duration), make(chan struct{})
	ffs.SetSleep(func(d time.Duration) { sleeping <- d; <-hold })

	renamed := make(chan error)
	go func() { renamed <- ffs.Rename("/a", "/b") }()
	if d := <-sleeping; d != time.Minute {
		t.Fatalf("stall slept %v", d)
	}
	if err := volume.WriteFileAtomic(m, "/c", []byte("x")); err != nil {
		t.Fatal(err)
	}
	removed := make(chan error)
	go func() { removed <- ffs.Remove("/c") }()
	<-removeDecided
	select {
	case err := <-removed:
		t.Fatalf("remove returned %v during the stall", err)
	case err := <-renamed:
		t.Fatalf("rename returned %v during the stall", err)
	default:
	}
	if _, err := m.Stat("/c"); err != nil {
		t.Fatalf("remove applied during the stall: %v", err)
	}
	close(hold)
	if err := <-renamed; err != nil {
		t.Fatal(err)
	}
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	// The stall is over: later operations run at once.
	if _, err := ffs.Stat("/b"); err != nil {
		t.Fatal(err)
	}
	if StallFor(time.Second).String() != "StallFor(1s)" || Stall(nil).String() != "Stall" {
		t.Fatal("stall actions print wrong")
	}
}

func TestReplacedNameErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
		n    int
		// what the Open/Stat/OpenReadWrite calls of /d/x after the rename
		// give, in order
		want []error
	}{
		{"two ESTALE", syscall.ESTALE, 2, []error{syscall.ESTALE, syscall.ESTALE, nil, nil}},
		{"default is ESTALE", nil, 1, []error{syscall.ESTALE, nil, nil, nil}},
		{"ENOENT", syscall.ENOENT, 3, []error{fs.ErrNotExist, fs.ErrNotExist, fs.ErrNotExist, nil}},
		{"none", syscall.ESTALE, 0, []error{nil, nil, nil, nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := memfs.New()
			if err := m.MkdirAll("/d", 0); err != nil {
				t.Fatal(err)
			}
			ffs := New(m, ReplacedNameErrors("/d/x", tc.err, tc.n))
			for _, p := range []string{"/d/x", "/d/y"} {
				if err := volume.WriteFileAtomic(ffs, p, []byte("old")); err != nil {
					t.Fatal(err)
				}
			}
			// WriteFileAtomic renamed onto /d/x: the counts are armed.
			// Renaming onto another name leaves /d/x's count alone.
			if err := ffs.Rename("/d/y", "/d/z"); err != nil {
				t.Fatal(err)
			}
			calls := []func() error{
				func() error { _, err := ffs.Stat("/d/x"); return err },
				func() error { f, err := ffs.Open("/d//x"); closeIf(f); return err },
				func() error { f, err := ffs.OpenReadWrite("/d/x"); closeIf(f); return err },
				func() error { _, err := ffs.Stat("/d/x"); return err },
			}
			for i, call := range calls {
				// Another name is never affected.
				if _, err := ffs.Stat("/d/z"); err != nil {
					t.Fatalf("stat of another name: %v", err)
				}
				err := call()
				if want := tc.want[i]; (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
					t.Fatalf("call %d: %v, want %v", i, err, want)
				}
			}
		})
	}
}

func closeIf(f volume.File) {
	if f != nil {
		_ = f.Close()
	}
}
