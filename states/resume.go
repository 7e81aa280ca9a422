package states

// A Resumption says what a persisted state means to the process that loads
// its record: whether the state still holds for it, and why not.
type Resumption int

const (
	// Kept: the state is a fact on the volume, and a process resumes from
	// it. States without a rule are kept.
	Kept Resumption = iota
	// Observed: the state was true when it was written, but another actor
	// may have undone it since (a reclaim moves directories), so it is
	// observed again, not remembered: a process resumes from the rule's
	// From, whose idempotent step re-establishes it.
	Observed
	// Claimed: the state holds for the process that reached it, at the
	// leader epoch the record names (a fence claim): any other process, or
	// the same one at another epoch, resumes from From.
	Claimed
	// HeldHandles: the state describes handles (an open log, a loaded
	// store) held by the process that reached it. A process that loads the
	// record holds none of them, so it resumes from From.
	HeldHandles
)

func (r Resumption) String() string {
	switch r {
	case Kept:
		return "kept"
	case Observed:
		return "observed"
	case Claimed:
		return "claimed"
	case HeldHandles:
		return "held-handles"
	}
	return "unknown"
}

// ResumeRule is what one persisted state means after a restart (or to any
// pass that loads the record): see Resumption.
type ResumeRule struct {
	Means Resumption
	// From is where a process resumes when the state does not hold for
	// it; unused for Kept.
	From State
}

// Rule returns the resume rule of state (Kept when the Definition gives
// none).
func (d Definition) Rule(state State) ResumeRule {
	if r, ok := d.Resumes[state]; ok {
		return r
	}
	return ResumeRule{Means: Kept}
}

// Resume is the state a process drives a record from when the volume says
// persisted. stillClaimed says whether this process still holds, at the
// epoch it drives now, the claim a Claimed state names; a process that
// has just started holds none.
func (d Definition) Resume(persisted State, stillClaimed bool) State {
	r := d.Rule(persisted)
	switch r.Means {
	case Observed, HeldHandles:
		return r.From
	case Claimed:
		if stillClaimed {
			return persisted
		}
		return r.From
	}
	return persisted
}

// HeldHandles reports whether a process held handles in state: a record
// persisted there names handles that are gone with that process.
func (d Definition) HeldHandles(state State) bool { return d.Rule(state).Means == HeldHandles }
