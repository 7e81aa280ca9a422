package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// frame is one refresh of a watched command: its rows for -o json and its
// table for -o table.
type frame struct {
	rows  any
	table func(io.Writer) error
}

// nextFrame reads the cluster once more. A false ok means nothing to show
// yet (kaasctl top's first scrape), and the watch waits a tick.
type nextFrame func(ctx context.Context) (f frame, ok bool, err error)

// watchOptions say how a command refreshes; the clock and the ticker are
// injected so that tests need not sleep.
type watchOptions struct {
	watch    bool // keep refreshing; otherwise stop after the first frame
	interval time.Duration
	json     bool
	terminal bool // clear and redraw in place (ANSI); otherwise a new table each time
	now      func() time.Time
	ticker   func(time.Duration) (<-chan time.Time, func())
}

// clearScreen moves the cursor home and clears the screen (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// newWatchOptions are the options of a command run from the shell: the
// real clock and ticker, and a terminal when out is one.
func newWatchOptions(watch bool, interval time.Duration, output string, out io.Writer) watchOptions {
	return watchOptions{watch: watch, interval: interval, json: output == "json", terminal: isTerminal(out),
		now: time.Now, ticker: realTicker}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// runWatch shows frames until ctx ends (SIGINT), or after the first one
// without --watch. While watching, an error is shown in its frame and the
// watch goes on: a broker restarting must not end an operator's watch.
func runWatch(ctx context.Context, out io.Writer, o watchOptions, next nextFrame) error {
	if o.interval <= 0 {
		return fmt.Errorf("--interval must be positive, not %v", o.interval)
	}
	var tick <-chan time.Time
	for {
		f, ok, err := next(ctx)
		if err != nil && (!o.watch || ctx.Err() != nil) {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err != nil || ok {
			if werr := o.show(out, f, err); werr != nil {
				return werr
			}
			if !o.watch && ok {
				return nil
			}
		}
		if tick == nil {
			c, stop := o.ticker(o.interval)
			defer stop()
			tick = c
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		}
	}
}

// show writes one frame: a JSON line, or a table (redrawn in place on a
// terminal, under a time line when watching).
func (o watchOptions) show(out io.Writer, f frame, ferr error) error {
	at := o.now().UTC().Truncate(time.Second)
	if o.json {
		if !o.watch {
			return printJSON(out, f.rows)
		}
		line := struct {
			Time  time.Time `json:"time"`
			Rows  any       `json:"rows,omitempty"`
			Error string    `json:"error,omitempty"`
		}{Time: at, Rows: f.rows}
		if ferr != nil {
			line.Rows, line.Error = nil, ferr.Error()
		}
		return json.NewEncoder(out).Encode(line)
	}
	var b bytes.Buffer
	if o.watch {
		if o.terminal {
			b.WriteString(clearScreen)
		}
		fmt.Fprintf(&b, "%s  (every %v; Ctrl-C to stop)\n", at.Format(time.RFC3339), o.interval)
	}
	if ferr != nil {
		fmt.Fprintf(&b, "error: %v\n", ferr)
	} else if err := f.table(&b); err != nil {
		return err
	}
	if o.watch && !o.terminal {
		b.WriteString("\n")
	}
	_, err := out.Write(b.Bytes())
	return err
}
