package engine

import (
	"sort"

	"github.com/kaas-dev/kaas/engine/reconcile"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
)

// ReconcileKind is the kind of the status rows of reconcile keys whose last
// pass did not succeed (a topic waiting, the groups failing), beside the
// state machines' records.
const ReconcileKind = "reconcile"

// StatusRow is one row of the reconcile status: a machine's record, or a
// reconcile key's last outcome (Kind ReconcileKind, Object the key), with
// the outcome spelled out: "waiting: <reason>", "failed: <error>",
// "failed (terminal): <error>", "in progress", "done".
type StatusRow struct {
	states.Record
	Outcome string `json:"outcome,omitempty"`
}

// ReconcileStatus is the machines' records on the volume and, after them,
// a row for every reconcile key of this broker whose last pass did not
// succeed.
func (e *Engine) ReconcileStatus() ([]StatusRow, error) {
	recs, err := e.Status()
	if err != nil {
		return nil, err
	}
	rows := StatusRows(recs)
	keys := e.queue.Statuses()
	sort.Slice(keys, func(i, j int) bool { return keys[i].Key.String() < keys[j].Key.String() })
	for _, st := range keys {
		rows = append(rows, e.keyStatusRow(st))
	}
	return rows, nil
}

func (e *Engine) keyStatusRow(st reconcile.KeyStatus[Key]) StatusRow {
	rec := states.Record{Kind: ReconcileKind, Object: st.Key.String(), Desired: states.State(reconcile.OutcomeOK.String()),
		State: states.State(st.Outcome.String()), Attempts: st.Attempts, Since: st.Since.UTC(), Owner: e.owner}
	if st.Outcome != reconcile.OutcomeWaiting {
		rec.LastError = st.Reason // a wait is not an error
	}
	return StatusRow{Record: rec, Outcome: st.Outcome.String() + ": " + st.Reason}
}

// ReadStatusRows is ReconcileStatus with no broker running (kaasctl): the
// machines' records on the volume, and no reconcile keys.
func ReadStatusRows(fsys volume.FS, clusterDir string) ([]StatusRow, error) {
	recs, err := ReadStatus(fsys, clusterDir)
	if err != nil {
		return nil, err
	}
	return StatusRows(recs), nil
}

// StatusRows gives each machine record the outcome its fields tell.
func StatusRows(recs []states.Record) []StatusRow {
	rows := make([]StatusRow, 0, len(recs))
	for _, r := range recs {
		rows = append(rows, StatusRow{Record: r, Outcome: RecordOutcome(r)})
	}
	return rows
}

// RecordOutcome is what a machine record's fields tell of its outcome:
// waiting when its last error is a wait ("waiting: <step>: <reason>"),
// failed with any other last error, done at its desired state, else in
// progress.
func RecordOutcome(r states.Record) string {
	switch {
	case r.IsWaiting():
		return r.LastError
	case r.LastError != "":
		return "failed: " + r.LastError
	case r.State == r.Desired:
		return "done"
	}
	return "in progress"
}
