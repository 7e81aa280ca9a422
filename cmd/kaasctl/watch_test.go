package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// fakeTicks is an injected ticker: the test's frames come one per tick,
// and the watch ends (as on SIGINT) once frames have been shown.
type fakeTicks struct {
	c       chan time.Time
	stopped bool
}

func newFakeTicks() *fakeTicks { return &fakeTicks{c: make(chan time.Time, 16)} }

func (f *fakeTicks) ticker(time.Duration) (<-chan time.Time, func()) {
	return f.c, func() { f.stopped = true }
}

// countingFrames shows "frame N" (or an error on the frames in fail) and
// cancels ctx after the last; each call but the last queues a tick.
func countingFrames(ticks *fakeTicks, last int, fail map[int]bool, cancel func()) nextFrame {
	n := 0
	return func(context.Context) (frame, bool, error) {
		n++
		if n >= last {
			defer cancel()
		} else {
			ticks.c <- time.Time{}
		}
		if fail[n] {
			return frame{}, false, errors.New("broker away")
		}
		rows := []map[string]int{{"frame": n}}
		return frame{rows: rows, table: func(w io.Writer) error {
			_, err := io.WriteString(w, "FRAME\n"+strings.Repeat("#", n)+"\n")
			return err
		}}, true, nil
	}
}

func TestRunWatch(t *testing.T) {
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name     string
		watch    bool
		json     bool
		terminal bool
		frames   int
		fail     map[int]bool
		check    func(t *testing.T, out string)
	}{
		{"once, a table", false, false, false, 1, nil, func(t *testing.T, out string) {
			if out != "FRAME\n#\n" {
				t.Errorf("out %q", out)
			}
		}},
		{"once, json", false, true, false, 1, nil, func(t *testing.T, out string) {
			var rows []map[string]int
			if err := json.Unmarshal([]byte(out), &rows); err != nil || rows[0]["frame"] != 1 {
				t.Errorf("out %q: %v", out, err)
			}
		}},
		{"watch on a terminal redraws in place", true, false, true, 3, nil, func(t *testing.T, out string) {
			if strings.Count(out, clearScreen) != 3 || !strings.HasPrefix(out, clearScreen) {
				t.Errorf("want 3 redraws, each clearing the screen first: %q", out)
			}
			if !strings.Contains(out, "2026-01-02T03:04:05Z  (every 2s; Ctrl-C to stop)\nFRAME\n###\n") {
				t.Errorf("last frame missing: %q", out)
			}
		}},
		{"watch into a pipe prints a new table each time", true, false, false, 3, nil, func(t *testing.T, out string) {
			if strings.Contains(out, "\x1b") || strings.Count(out, "FRAME\n") != 3 {
				t.Errorf("want 3 plain tables: %q", out)
			}
		}},
		{"watch with json streams one object per line", true, true, false, 3, map[int]bool{2: true}, func(t *testing.T, out string) {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 3 {
				t.Fatalf("%d lines, want 3: %q", len(lines), out)
			}
			for i, l := range lines {
				var v struct {
					Time  time.Time        `json:"time"`
					Rows  []map[string]int `json:"rows"`
					Error string           `json:"error"`
				}
				if err := json.Unmarshal([]byte(l), &v); err != nil {
					t.Fatalf("line %d %q: %v", i, l, err)
				}
				if !v.Time.Equal(clock) {
					t.Errorf("line %d time %v", i, v.Time)
				}
				if i == 1 && v.Error != "broker away" {
					t.Errorf("line 2 should carry the error: %q", l)
				}
				if i != 1 && (len(v.Rows) != 1 || v.Rows[0]["frame"] != i+1) {
					t.Errorf("line %d rows %v", i, v.Rows)
				}
			}
		}},
		{"watch goes on past an error", true, false, false, 2, map[int]bool{1: true}, func(t *testing.T, out string) {
			if !strings.Contains(out, "error: broker away\n") || !strings.Contains(out, "FRAME\n##\n") {
				t.Errorf("out %q", out)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ticks := newFakeTicks()
			o := watchOptions{watch: c.watch, interval: 2 * time.Second, json: c.json, terminal: c.terminal,
				now: func() time.Time { return clock }, ticker: ticks.ticker}
			var out bytes.Buffer
			if err := runWatch(ctx, &out, o, countingFrames(ticks, c.frames, c.fail, cancel)); err != nil {
				t.Fatal(err)
			}
			c.check(t, out.String())
		})
	}
}

func TestRunWatchOnceFailsOnAnError(t *testing.T) {
	ticks := newFakeTicks()
	o := watchOptions{interval: time.Second, now: time.Now, ticker: ticks.ticker}
	next := func(context.Context) (frame, bool, error) { return frame{}, false, errors.New("no volume") }
	if err := runWatch(context.Background(), io.Discard, o, next); err == nil || err.Error() != "no volume" {
		t.Fatalf("err %v, want the frame's error", err)
	}
	o.interval = 0
	if err := runWatch(context.Background(), io.Discard, o, next); err == nil {
		t.Fatal("a zero --interval must be refused")
	}
}

// TestReconcileStatusWatchFromTheVolume: --watch with -o json streams the
// volume's rows, one line per refresh, until interrupted.
func TestReconcileStatusWatchFromTheVolume(t *testing.T) {
	data := volumeWithStatus(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticks := newFakeTicks()
	ticks.c <- time.Time{}
	o := watchOptions{watch: true, interval: time.Second, json: true, now: time.Now, ticker: ticks.ticker}
	frames := reconcileStatusFrames(source{data: data})
	shown := 0
	next := func(ctx context.Context) (frame, bool, error) {
		if shown++; shown == 2 {
			cancel()
		}
		return frames(ctx)
	}
	var out bytes.Buffer
	if err := runWatch(ctx, &out, o, next); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"kind":"topic-delete"`) {
		t.Fatalf("want 2 lines of rows:\n%s", out.String())
	}
	if !ticks.stopped {
		t.Error("the ticker was not stopped")
	}
}
