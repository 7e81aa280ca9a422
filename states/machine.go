// Package states holds kaas's named end states: every multi-step change to
// the volume is a Definition (a looplab/fsm transition table with a named end
// state, and what each persisted state means to a process that loads it)
// plus one idempotent action per step. `kaasctl machines` draws them all
// (docs/machines.md). Drive runs the action for the
// current state outside any fsm callback (the fsm names the one event legal
// there), fires the event through the fsm, which refuses an illegal one,
// persists the new state atomically, and goes on until the end state.
//
// A crash between an action and the persist re-runs the action on the next
// pass, so every action must be idempotent: "already done" is success.
package states

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/looplab/fsm"
)

// State is a state of a machine, as its records persist it.
type State string

// Event names a step of a machine: the event its action's success fires.
type Event string

// Step is one edge of a machine: from a state, an event whose action does the
// work, to the next state.
type Step struct {
	From  State
	Event Event
	To    State
	// Host marks a step the engine does: its action calls the machine's
	// host interface (PartitionOpenHost, ...), named after the event. The
	// other steps act on the volume alone.
	Host bool
}

// Definition is the whole of a machine: its transition table, which of its
// steps the engine does through the machine's host interface (Step.Host),
// and what each persisted state means to a process that loads it. Steps
// form a single chain from Initial to End; the chain is what crash sweeps
// enumerate.
type Definition struct {
	Kind string
	// Summary says in one sentence what the machine brings about.
	Summary string
	Initial State
	End     State
	Steps   []Step
	// Resumes gives, for the states that do not simply hold when a record
	// is loaded, where a process resumes instead (Resume). A state without
	// a rule is kept.
	Resumes map[State]ResumeRule
	// SaveAtStops says the record is status, not progress: Drive saves it
	// only where a pass stops (an error, a wait) and at the end state, not
	// after every step. It suits a machine whose every intermediate state
	// a loading process resumes from an earlier one anyway (its Resumes,
	// with Kept states only where the step to them is idempotent and
	// cheap to run again), so a crash between steps leaves the volume
	// ahead of the record, which the next pass observes. It saves an
	// atomic write, two fsyncs, per step of the machines run most often.
	SaveAtStops bool
}

// Events is the looplab/fsm form of the table.
func (d Definition) Events() fsm.Events {
	ev := make(fsm.Events, 0, len(d.Steps))
	for _, s := range d.Steps {
		ev = append(ev, fsm.EventDesc{Name: string(s.Event), Src: []string{string(s.From)}, Dst: string(s.To)})
	}
	return ev
}

// States lists the states in chain order.
func (d Definition) States() []State {
	out := []State{d.Initial}
	for _, s := range d.Steps {
		out = append(out, s.To)
	}
	return out
}

// StepFrom returns the step that leaves state.
func (d Definition) StepFrom(state State) (Step, bool) {
	for _, s := range d.Steps {
		if s.From == state {
			return s, true
		}
	}
	return Step{}, false
}

// Known reports whether state belongs to the machine.
func (d Definition) Known(state State) bool {
	for _, s := range d.States() {
		if s == state {
			return true
		}
	}
	return false
}

// Action does the work of one step. It must be idempotent.
type Action func(ctx context.Context) error

// Actions maps event names to their actions.
type Actions map[Event]Action

// ErrIllegalTransition is a bug: the table and the record disagree.
var ErrIllegalTransition = errors.New("illegal transition")

// Drive runs rec from its current state to the machine's end state. After
// every step it calls save with the updated record (with SaveAtStops, only
// after the last); a failed action or save
// stops the pass with the error recorded in rec (attempts, last error), and
// save is called once more so the failure is visible. An action that waits
// (IsWaiting) stops the pass the same way, but its last error reads
// "waiting: <step>: <reason>" and attempts do not grow. The caller re-drives
// later with backoff.
func Drive(ctx context.Context, def Definition, rec *Record, acts Actions, save func(*Record) error, now func() time.Time) error {
	if rec.State == "" {
		rec.State = def.Initial
	}
	if !def.Known(rec.State) {
		return fmt.Errorf("%s %s: %w: unknown state %q", def.Kind, rec.Object, ErrIllegalTransition, rec.State)
	}
	machine := def.guard(rec.State)
	for rec.State != def.End {
		event, err := machine.next()
		if err != nil {
			return fmt.Errorf("%s %s: %w", def.Kind, rec.Object, err)
		}
		act := acts[event]
		if act == nil {
			return fmt.Errorf("%s %s: %w: no action for %q", def.Kind, rec.Object, ErrIllegalTransition, event)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := act(ctx); err != nil {
			if IsWaiting(err) {
				// A wait is not an attempt; the record still says what it
				// waits for.
				rec.LastError = fmt.Sprintf("%s%s: %v", waitingPrefix, event, err)
			} else {
				rec.Attempts++
				rec.LastError = fmt.Sprintf("%s: %v", event, err)
			}
			if serr := save(rec); serr != nil {
				err = errors.Join(err, fmt.Errorf("save status: %w", serr))
			}
			return fmt.Errorf("%s %s: step %s: %w", def.Kind, rec.Object, event, err)
		}
		if err := machine.fire(ctx, event); err != nil {
			return fmt.Errorf("%s %s: %w", def.Kind, rec.Object, err)
		}
		rec.State = machine.current()
		rec.Since = now().UTC()
		rec.LastError = ""
		if def.SaveAtStops && rec.State != def.End {
			continue
		}
		if err := save(rec); err != nil {
			rec.Attempts++
			return fmt.Errorf("%s %s: save after %s: %w", def.Kind, rec.Object, event, err)
		}
	}
	return nil
}
