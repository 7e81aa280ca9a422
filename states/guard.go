package states

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/looplab/fsm"
)

// guard is a Definition's looplab/fsm machine at one state. The fsm, not a
// walk of the step list, decides which events are legal where: Drive asks
// it for the next event and fires every event through it.
type guard struct {
	def Definition
	fsm *fsm.FSM
}

func (d Definition) guard(state State) *guard {
	return &guard{def: d, fsm: fsm.NewFSM(string(state), d.Events(), nil)}
}

// current is the fsm's state.
func (g *guard) current() State { return State(g.fsm.Current()) }

// legal lists the events the fsm allows from its current state, sorted.
func (g *guard) legal() []string {
	ev := g.fsm.AvailableTransitions()
	sort.Strings(ev)
	return ev
}

// next is the one event that leaves the current state (the machines are
// chains).
func (g *guard) next() (Event, error) {
	switch ev := g.legal(); len(ev) {
	case 1:
		return Event(ev[0]), nil
	case 0:
		return "", fmt.Errorf("%w: no step leaves %q", ErrIllegalTransition, g.fsm.Current())
	default:
		return "", fmt.Errorf("%w: several steps leave %q (%s): a machine is a chain", ErrIllegalTransition,
			g.fsm.Current(), strings.Join(ev, ", "))
	}
}

// fire moves the fsm along event, or refuses an event that is not legal
// from the current state. The action is done by the time an event is
// fired, so its result is recorded even if ctx ended meanwhile (looplab/fsm
// refuses a transition on a cancelled ctx, which would leave a finished
// step unrecorded).
func (g *guard) fire(ctx context.Context, event Event) error {
	from := g.fsm.Current()
	err := g.fsm.Event(context.WithoutCancel(ctx), string(event))
	var same fsm.NoTransitionError
	if err == nil || errors.As(err, &same) {
		return nil
	}
	legal := "none"
	if ev := g.legal(); len(ev) > 0 {
		legal = strings.Join(ev, ", ")
	}
	return fmt.Errorf("%w: event %q is not legal from state %q of %s (legal there: %s): %v",
		ErrIllegalTransition, event, from, g.def.Kind, legal, err)
}

// Fire is the state event leads to from state, as the machine's fsm
// decides: an event that is not legal from state (or not an event of the
// machine at all) is refused with ErrIllegalTransition, naming the events
// that are legal there.
func (d Definition) Fire(state State, event Event) (State, error) {
	if !d.Known(state) {
		return "", fmt.Errorf("%s: %w: unknown state %q", d.Kind, ErrIllegalTransition, state)
	}
	g := d.guard(state)
	if err := g.fire(context.Background(), event); err != nil {
		return "", err
	}
	return g.current(), nil
}
