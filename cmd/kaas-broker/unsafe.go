package main

import (
	"flag"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/volume"
)

// Switches for chaos tests only. A negative control turns one safety
// mechanism off so that a chaos spec can show its checker catches the loss
// that follows; a debug clock lets a spec jump this broker's wall clock.
// None of them is ever set in production, and the broker says so loudly.
type unsafeOptions struct {
	negative   string // comma-separated negative controls
	debugClock bool
}

// The negative controls.
const (
	// noFsync makes every file and directory sync a no-op that reports
	// success: acknowledged data lives only in the host's cache.
	noFsync = "no-fsync"
	// noFenceRecheck acknowledges without re-reading the fence after each
	// fsync: a paused writer that a new owner fenced keeps acknowledging.
	noFenceRecheck = "no-fence-recheck"
	// wallClockLease judges liveness by comparing this host's (debug) wall
	// clock with the wall time in other hosts' heartbeats: a clock jump
	// then expires live brokers.
	wallClockLease = "wall-clock-lease"
	// inPlaceAssignment overwrites the assignment file in place (no temp
	// file, no rename): readers and crashes can find it torn.
	inPlaceAssignment = "in-place-assignment"
	// noServingLease keeps serving partitions after the heartbeat could
	// not be renewed for most of a lease (a stalled or paused broker).
	noServingLease = "no-serving-lease"
	// compactDropLatest makes the log cleaner remove the latest value of
	// one key in 64: the loss the compaction checker must catch.
	compactDropLatest = "compact-drop-latest"
)

func (u *unsafeOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&u.negative, "unsafe-negative-control", "",
		"for chaos tests only: turn a safety mechanism off ("+noFsync+", "+noFenceRecheck+", "+wallClockLease+", "+inPlaceAssignment+", "+noServingLease+", "+compactDropLatest+"; KAAS_UNSAFE_NEGATIVE_CONTROL)")
	fs.BoolVar(&u.debugClock, "debug-clock", false,
		"for chaos tests only: serve POST /debug/clock?jump=DURATION on the admin address to jump this broker's wall clock (KAAS_DEBUG_CLOCK)")
}

// controls parses the negative-control list.
func (u unsafeOptions) controls() (map[string]bool, error) {
	out := map[string]bool{}
	for _, c := range strings.Split(u.negative, ",") {
		switch c = strings.TrimSpace(c); c {
		case "":
		case noFsync, noFenceRecheck, wallClockLease, inPlaceAssignment, noServingLease, compactDropLatest:
			out[c] = true
		default:
			return nil, fmt.Errorf("--unsafe-negative-control: unknown control %q (want %s, %s, %s, %s, %s or %s)", c, noFsync, noFenceRecheck, wallClockLease, inPlaceAssignment, noServingLease, compactDropLatest)
		}
	}
	if out[wallClockLease] && !u.debugClock {
		return nil, fmt.Errorf("--unsafe-negative-control=%s needs --debug-clock", wallClockLease)
	}
	return out, nil
}

// engineControls are the engine's negative controls among the parsed
// controls (no-fsync is this command's own: noSyncFS).
func engineControls(negative map[string]bool) engine.NegativeControls {
	return engine.NegativeControls{
		CompareWallClocks:  negative[wallClockLease],
		SkipFenceRecheck:   negative[noFenceRecheck],
		InPlaceAssignment:  negative[inPlaceAssignment],
		IgnoreServingLease: negative[noServingLease],
		CompactDropLatest:  negative[compactDropLatest],
	}
}

// jumpClock is a wall clock that a test can move: Now is the real time
// plus an offset, without the monotonic reading, so that code measuring
// durations on it sees every jump as a real clock step would show it.
type jumpClock struct{ offset atomic.Int64 }

func (c *jumpClock) Now() time.Time {
	return time.Now().Round(0).Add(time.Duration(c.offset.Load()))
}

// serve handles POST /debug/clock?jump=D (D may be negative) and answers
// with the offset now in force.
func (c *jumpClock) serve(mux *http.ServeMux) {
	mux.HandleFunc("POST /debug/clock", func(w http.ResponseWriter, r *http.Request) {
		if j := r.URL.Query().Get("jump"); j != "" {
			d, err := time.ParseDuration(j)
			if err != nil {
				http.Error(w, "jump: "+err.Error(), http.StatusBadRequest)
				return
			}
			c.offset.Add(int64(d))
		}
		if r.URL.Query().Get("reset") == "true" {
			c.offset.Store(0)
		}
		_, _ = fmt.Fprintf(w, "offset %s\n", time.Duration(c.offset.Load()))
	})
}

// noSyncFS reports success for every sync without doing it.
type noSyncFS struct{ volume.FS }

type noSyncFile struct{ volume.File }

func (noSyncFile) Sync() error { return nil }

func (noSyncFS) SyncDir(string) error { return nil }

func (f noSyncFS) wrap(file volume.File, err error) (volume.File, error) {
	if err != nil {
		return nil, err
	}
	return noSyncFile{file}, nil
}

func (f noSyncFS) Create(name string) (volume.File, error) { return f.wrap(f.FS.Create(name)) }
func (f noSyncFS) CreateExclusive(name string) (volume.File, error) {
	return f.wrap(f.FS.CreateExclusive(name))
}
func (f noSyncFS) Open(name string) (volume.File, error) { return f.wrap(f.FS.Open(name)) }
func (f noSyncFS) OpenReadWrite(name string) (volume.File, error) {
	return f.wrap(f.FS.OpenReadWrite(name))
}
