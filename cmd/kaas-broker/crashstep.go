package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
)

// Crash at a machine step, for the lifecycle specs (--crash-at-step,
// KAAS_CRASH_AT_STEP). Never set in production. The value is
//
//	KIND:STEP[:OBJECT]
//
// KIND is a machine of states.Machines (topic-delete, directory-reclaim,
// ...), STEP one of its states or events (an event names the state it
// leads to), OBJECT the record's object (any if absent). The broker exits
// with status 2, running no deferred cleanup, no release and no graceful
// close, right after a record of that machine is saved in that state with
// no error: the step is done and recorded, the next one not begun. It
// writes one line to stderr first ("kaas-broker: crash at step ...").
//
// The record is recognized by its path, <cluster>/status/KIND/*.json, as
// the atomic write renames it into place, and read back to see its state.
type crashAtStep struct {
	volume.FS
	kind, state, object string
	exit                func(rec states.Record)
}

func parseCrashAtStep(spec string) (kind, state, object string, err error) {
	parts := strings.SplitN(spec, ":", 3)
	if len(parts) < 2 {
		return "", "", "", fmt.Errorf("--crash-at-step %q: want KIND:STEP[:OBJECT]", spec)
	}
	kind, step := parts[0], parts[1]
	if len(parts) == 3 {
		object = parts[2]
	}
	for _, def := range states.Machines {
		if def.Kind != kind {
			continue
		}
		if def.Known(states.State(step)) {
			return kind, step, object, nil
		}
		for _, s := range def.Steps {
			if s.Event == states.Event(step) {
				return kind, string(s.To), object, nil
			}
		}
		return "", "", "", fmt.Errorf("--crash-at-step %q: %s has no state or event %q (states %v)", spec, kind, step, def.States())
	}
	var kinds []string
	for _, def := range states.Machines {
		kinds = append(kinds, def.Kind)
	}
	return "", "", "", fmt.Errorf("--crash-at-step %q: no machine %q (machines %v)", spec, kind, kinds)
}

// withCrashAtStep wraps fsys so that the process exits once the named step
// is recorded; an empty spec leaves fsys as it is.
func withCrashAtStep(fsys volume.FS, spec string, exit func(rec states.Record)) (volume.FS, error) {
	if spec == "" {
		return fsys, nil
	}
	kind, state, object, err := parseCrashAtStep(spec)
	if err != nil {
		return nil, err
	}
	return &crashAtStep{FS: fsys, kind: kind, state: state, object: object, exit: exit}, nil
}

func (c *crashAtStep) Rename(oldname, newname string) error {
	if err := c.FS.Rename(oldname, newname); err != nil {
		return err
	}
	dir := path.Dir(newname)
	if path.Base(dir) != c.kind || path.Base(path.Dir(dir)) != states.StatusDir || path.Ext(newname) != ".json" {
		return nil
	}
	b, err := volume.ReadFile(c.FS, newname)
	if err != nil {
		return nil
	}
	var rec states.Record
	if json.Unmarshal(b, &rec) != nil {
		return nil
	}
	if rec.Kind == c.kind && string(rec.State) == c.state && rec.LastError == "" && (c.object == "" || rec.Object == c.object) {
		c.exit(rec)
	}
	return nil
}

// exitAtStep announces the crash and exits with status 2 at once.
func exitAtStep(rec states.Record) {
	fmt.Fprintf(os.Stderr, "kaas-broker: crash at step: %s %s reached %s (--crash-at-step)\n", rec.Kind, rec.Object, rec.State)
	os.Exit(2)
}
