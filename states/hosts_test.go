package states_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// recordingHost is every machine's host at once: it notes which step it
// was asked to do, and with which record.
type recordingHost struct {
	called []string
	rec    *states.Record
}

func (h *recordingHost) note(step string, rec *states.Record) error {
	h.called = append(h.called, step)
	h.rec = rec
	return nil
}

func (h *recordingHost) Fence(_ context.Context, rec *states.Record) error {
	return h.note("fence", rec)
}
func (h *recordingHost) Recover(_ context.Context, rec *states.Record) error {
	return h.note("recover", rec)
}
func (h *recordingHost) Load(_ context.Context, rec *states.Record) error { return h.note("load", rec) }
func (h *recordingHost) Serve(_ context.Context, rec *states.Record) error {
	return h.note("serve", rec)
}
func (h *recordingHost) Plan(_ context.Context, rec *states.Record) error { return h.note("plan", rec) }
func (h *recordingHost) Map(_ context.Context, rec *states.Record) error  { return h.note("map", rec) }
func (h *recordingHost) Clean(_ context.Context, rec *states.Record) error {
	return h.note("clean", rec)
}
func (h *recordingHost) Retire(_ context.Context, rec *states.Record) error {
	return h.note("retire", rec)
}
func (h *recordingHost) Release(context.Context) error { return h.note("release", nil) }
func (h *recordingHost) Forget(context.Context) error  { return h.note("forget", nil) }

// hostActions builds each machine's actions around host.
var hostActions = map[string]func(fsys volume.FS, rec *states.Record, host *recordingHost) states.Actions{
	states.PartitionOpen.Kind: func(fsys volume.FS, rec *states.Record, host *recordingHost) states.Actions {
		return states.PartitionOpenActions(fsys, sweepData, sweepTopic, sweepTopicID, 0, rec, host)
	},
	states.CoordinatorOpen.Kind: func(fsys volume.FS, rec *states.Record, host *recordingHost) states.Actions {
		return states.CoordinatorOpenActions(fsys, sweepCluster, coordShard, rec, host)
	},
	states.TopicDelete.Kind: func(fsys volume.FS, _ *states.Record, host *recordingHost) states.Actions {
		return states.TopicDeleteActions(fsys, sweepData, sweepTopic, sweepTopicID, host)
	},
	states.DirectoryReclaim.Kind: func(fsys volume.FS, _ *states.Record, host *recordingHost) states.Actions {
		return states.DirectoryReclaimActions(fsys, sweepData, sweepTopic, sweepTopicID, host)
	},
	states.SegmentCompact.Kind: func(_ volume.FS, rec *states.Record, host *recordingHost) states.Actions {
		return states.SegmentCompactActions(rec, host)
	},
}

// TestHostStepsAreTheHosts: the steps a Definition marks Host are exactly
// the ones whose actions call the machine's host, each the method named
// after its event, given the record being driven.
func TestHostStepsAreTheHosts(t *testing.T) {
	for _, def := range states.Machines {
		t.Run(def.Kind, func(t *testing.T) {
			build := hostActions[def.Kind]
			if build == nil {
				t.Fatalf("no actions for machine %q in hostActions", def.Kind)
			}
			fsys := memfs.New()
			rec := def.NewRecord("x", sweepTopicID, hostOwner, sweepNow())
			host := &recordingHost{}
			acts := build(fsys, rec, host)
			if len(acts) != len(def.Steps) {
				t.Fatalf("%d actions for %d steps", len(acts), len(def.Steps))
			}
			for _, s := range def.Steps {
				act := acts[s.Event]
				if act == nil {
					t.Fatalf("no action for step %s", s.Event)
				}
				host.called, host.rec = nil, nil
				if err := act(context.Background()); err != nil {
					t.Fatalf("step %s: %v", s.Event, err)
				}
				switch {
				case s.Host && strings.Join(host.called, ",") != string(s.Event):
					t.Errorf("host step %s called the host's %v", s.Event, host.called)
				case !s.Host && len(host.called) > 0:
					t.Errorf("step %s is not marked Host but called the host's %v", s.Event, host.called)
				case s.Host && host.rec != nil && host.rec != rec:
					t.Errorf("host step %s got another record than the one driven", s.Event)
				}
			}
		})
	}
}

// TestStampMismatchWaits: a partition open that meets another
// incarnation's stamp waits for the directory-reclaim: the record counts
// no attempt, says it waits, and the error still names the mismatch.
func TestStampMismatchWaits(t *testing.T) {
	fsys := memfs.New()
	if err := volume.MkdirAllSync(fsys, states.TopicDir(sweepData, sweepTopic)); err != nil {
		t.Fatal(err)
	}
	if err := states.EnsureStamp(fsys, sweepData, sweepTopic, "another-incarnation"); err != nil {
		t.Fatal(err)
	}
	rec := states.PartitionOpen.NewRecord(states.PartitionObject(sweepTopic, 0), sweepTopicID, hostOwner, sweepNow())
	host := &recordingHost{}
	err := states.Drive(context.Background(), states.PartitionOpen, rec,
		states.PartitionOpenActions(fsys, sweepData, sweepTopic, sweepTopicID, 0, rec, host), saver(fsys), sweepNow)
	if !errors.Is(err, states.ErrStampMismatch) || !states.IsWaiting(err) {
		t.Fatalf("drive: %v (waiting %v), want a wait on the stamp mismatch", err, states.IsWaiting(err))
	}
	if rec.State != "dir-ready" || rec.Attempts != 0 || !rec.IsWaiting() || len(host.called) != 0 {
		t.Fatalf("record %s, %d attempts, waiting %v, host called %v", rec.State, rec.Attempts, rec.IsWaiting(), host.called)
	}
}
