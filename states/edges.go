package states

// EdgeKind tells the edges of a machine's drawing apart.
type EdgeKind int

const (
	// StepEdge: a step's action succeeded and the new state was saved.
	StepEdge EdgeKind = iota
	// RetryEdge: a step's action, or the save after it, failed or waits.
	// The record stays where it was with the error (and, for a failure,
	// the attempt) recorded, and the reconciler drives it again later,
	// with backoff (Drive).
	RetryEdge
	// ResumeEdge: a loaded record's state does not hold for the process
	// that loads it, which resumes from an earlier state (Resume).
	ResumeEdge
)

// Edge is one arrow of a machine's drawing.
type Edge struct {
	From, To State
	Kind     EdgeKind
	// Label is the step's event, or for the other kinds what happened.
	Label string
	// Host: the step is the machine's host's (the engine's) to do.
	Host bool
}

// Edges lists every edge the Definition knows, in chain order: for each
// step the step itself and its retry, then the resume rules of the state
// it reaches.
func (d Definition) Edges() []Edge {
	var out []Edge
	out = append(out, d.resumeEdges(d.Initial)...)
	for _, s := range d.Steps {
		out = append(out,
			Edge{From: s.From, To: s.To, Kind: StepEdge, Label: string(s.Event), Host: s.Host},
			Edge{From: s.From, To: s.From, Kind: RetryEdge, Label: string(s.Event) + " failed, retried with backoff"})
		out = append(out, d.resumeEdges(s.To)...)
	}
	return out
}

func (d Definition) resumeEdges(state State) []Edge {
	r := d.Rule(state)
	var why string
	switch r.Means {
	case Observed:
		why = "on resume, observed again"
	case Claimed:
		why = "on resume at another epoch or in another process"
	case HeldHandles:
		why = "on resume, no handles held"
	default:
		return nil
	}
	return []Edge{{From: state, To: r.From, Kind: ResumeEdge, Label: why}}
}
