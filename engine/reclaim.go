package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
)

// Directory reclaim (states.DirectoryReclaim) and the trash sweep.
//
// Who drives: the controller, the one writer of topic directories
// (docs/design.md §2 "only the engine touches data directories ... done by the
// controller's reconciler"), as for topic-delete. A partition owner whose
// open meets another incarnation's stamp fails its stamp step with
// states.ErrStampMismatch and retries with backoff; the controller, at its
// reconcile of the topic, finds the stale stamp (it reads it whether or
// not it owns a partition of the topic) and drives the reclaim. Two
// brokers never race to rename the directory.
//
// Lifecycle fencing: the release step waits until the assignment no longer
// names the old topic ID and no live broker's heartbeat lists one of its
// partitions open (a broker drops the old incarnation's handles when it
// installs the new desired state, upsertTopic). A zombie of the old
// incarnation (a broker that lost its lease but still runs) is not seen
// by that check; a rename under its open handles is safe for the new
// incarnation: the rename is atomic and moves the inodes, so the zombie's
// late writes land in the trash, where nobody reads them, and vanish with
// the purge (on NFS they keep a .nfsXXXX file until it closes, which the
// purge waits out). Its acknowledgements are stopped by the serving lease
// it lost and by its fence re-check, which opens the fence by path: the
// old fence went to the trash, and the new incarnation's directory has no
// fence (ErrFenced) or its own, at an epoch above every epoch the old
// incarnation had (cluster.Assignment.MaxLeaderEpoch).

// reclaimStale is the controller's half of a partition open: it makes sure
// the topic directory is not stamped by another incarnation than spec's
// before the partitions are opened, driving directory-reclaim when it is,
// and finishes a reclaim a crash interrupted. A directory once seen
// stamped with spec.ID is not checked again by this process: only this
// reconciler could change that stamp.
func (e *Engine) reclaimStale(ctx context.Context, spec desired.TopicSpec) error {
	if id, ok := e.stampOK.Load(spec.Name); ok && id.(string) == spec.ID {
		return nil
	}
	def := states.DirectoryReclaim
	rec, err := states.Load(e.fsys, e.cfg.ClusterDir, def.Kind, spec.Name)
	if err != nil {
		return err
	}
	if rec != nil && rec.State != def.End && rec.TopicID != spec.ID {
		// A reclaim a crash (or a controller change) interrupted: finish
		// it first, whatever the stamp says now.
		if err := e.driveReclaim(ctx, spec, rec); err != nil {
			return err
		}
	}
	st, err := states.ReadStamp(e.fsys, e.cfg.DataDir, spec.Name)
	switch {
	case err == nil && st.TopicID == spec.ID:
		e.stampOK.Store(spec.Name, spec.ID)
		return nil
	case err == nil:
		// Stamped by a previous incarnation: reclaim it.
	case errors.Is(err, fs.ErrNotExist):
		return nil // no directory yet, or unstamped: the open creates or adopts it
	case states.IsTornStamp(err):
		return nil // not provably another incarnation's: the open adopts it (EnsureStamp)
	default:
		return fmt.Errorf("topic %s: read stamp: %w", spec.Name, err)
	}
	rec = def.NewRecord(spec.Name, st.TopicID, e.owner, e.cfg.Now())
	e.passLog(ctx).Info("topic directory belongs to a previous incarnation: reclaiming it",
		"topic", spec.Name, "oldTopicID", st.TopicID, "topicID", spec.ID)
	return e.driveReclaim(ctx, spec, rec)
}

// driveReclaim drives rec, the reclaim of the directory of spec's topic
// stamped by incarnation rec.TopicID, to reclaimed. spec is the incarnation
// now desired.
func (e *Engine) driveReclaim(ctx context.Context, spec desired.TopicSpec, rec *states.Record) error {
	oldID := rec.TopicID
	if oldID == spec.ID {
		return fmt.Errorf("topic %s: refusing to reclaim the directory of the desired incarnation %s", spec.Name, oldID)
	}
	rec.Owner = e.owner
	acts := states.DirectoryReclaimActions(e.fsys, e.cfg.DataDir, spec.Name, oldID, reclaimHost{e: e, spec: spec, oldID: oldID})
	if err := e.drive(ctx, states.DirectoryReclaim, rec, acts); err != nil {
		return err
	}
	e.forgetDropped(oldID)
	e.passLog(ctx).Info("topic directory reclaimed", "topic", spec.Name, "oldTopicID", oldID, "topicID", spec.ID)
	return nil
}

// sweepTrash is the controller's sweep of <data>/trash, at start-up, at
// takeover and every resync: an entry whose machine (topic-delete or
// directory-reclaim, found by the topic and ID in its name) is still
// running is left to it (and its topic reconciled, so that a machine an
// earlier controller left half-way is driven); any other entry, whose
// machine ended or was never recorded, is purged. Idempotent.
func (e *Engine) sweepTrash(ctx context.Context) error {
	if !e.isController() {
		return nil
	}
	dir := path.Join(e.cfg.DataDir, states.TrashDir)
	ents, err := e.fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("trash sweep: %w", err)
	}
	var errs []error
	for _, ent := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		topic, id, ok := states.TrashEntry(ent.Name())
		if !ok {
			continue // not kaas's
		}
		var running bool
		var err error
		if topic != "" {
			running, err = e.machineRunning(topic, id)
		} else {
			// A shortened name (a long topic name): the machine's record
			// names the topic.
			topic, running, err = e.machineRunningFor(ent.Name(), id)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if running {
			e.stampOK.Delete(topic)
			e.queue.Add(topicKey(topic))
			continue
		}
		if err := states.PurgeTrashEntry(e.fsys, e.cfg.DataDir, ent.Name()); err != nil {
			errs = append(errs, fmt.Errorf("trash sweep: %w", err))
			continue
		}
		e.passLog(ctx).Info("trash sweep removed a leftover incarnation", "entry", ent.Name(), "topic", topic, "topicID", id)
	}
	return errors.Join(errs...)
}

// trashMachines are the machines that move a topic directory into the trash.
var trashMachines = []states.Definition{states.TopicDelete, states.DirectoryReclaim}

// machineRunning reports whether a topic-delete or directory-reclaim of
// incarnation id of topic is recorded and has not reached its end.
func (e *Engine) machineRunning(topic, id string) (bool, error) {
	for _, def := range trashMachines {
		rec, err := states.Load(e.fsys, e.cfg.ClusterDir, def.Kind, topic)
		if err != nil {
			return false, err
		}
		if rec != nil && rec.TopicID == id && rec.State != def.End {
			return true, nil
		}
	}
	return false, nil
}

// machineRunningFor is machineRunning for the trash entry called entry,
// whose name does not carry its topic whole: it looks for a record of
// incarnation id (the ID is the identity) whose trash entry is this one,
// and returns its topic, or "" when no machine names the entry.
func (e *Engine) machineRunningFor(entry, id string) (topic string, running bool, err error) {
	for _, def := range trashMachines {
		recs, err := states.LoadKind(e.fsys, e.cfg.ClusterDir, def.Kind)
		if err != nil {
			return "", false, err
		}
		for _, rec := range recs {
			if rec.TopicID != id || path.Base(states.TrashPath(e.cfg.DataDir, rec.Object, id)) != entry {
				continue
			}
			topic = rec.Object
			if rec.State != def.End {
				return topic, true, nil
			}
		}
	}
	return topic, false, nil
}

// maxRetryDelay caps the reconcile queue's backoff: a machine that fails
// until something outside it changes (a purge waiting for the last handle
// on an NFS .nfsXXXX file, an open waiting for the controller's reclaim)
// completes within seconds of the change, at one attempt per few seconds.
const maxRetryDelay = 5 * time.Second
