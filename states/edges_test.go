package states_test

import (
	"testing"

	"github.com/kaas-dev/kaas/states"
)

// TestEdges: a drawing shows every step, the retry of every step, and
// every resume rule, and nothing else.
func TestEdges(t *testing.T) {
	for _, def := range states.Machines {
		count := map[states.EdgeKind]int{}
		for _, e := range def.Edges() {
			count[e.Kind]++
			if !def.Known(e.From) || !def.Known(e.To) {
				t.Errorf("%s: edge %+v leaves the machine", def.Kind, e)
			}
			switch e.Kind {
			case states.StepEdge:
				if s, ok := def.StepFrom(e.From); !ok || s.To != e.To || string(s.Event) != e.Label {
					t.Errorf("%s: step edge %+v is not a step", def.Kind, e)
				}
			case states.RetryEdge:
				if e.From != e.To {
					t.Errorf("%s: retry edge %+v leaves its state", def.Kind, e)
				}
			case states.ResumeEdge:
				if got := def.Resume(e.From, false); got != e.To {
					t.Errorf("%s: resume edge %+v, but Resume(%q) = %q", def.Kind, e, e.From, got)
				}
			}
		}
		if count[states.StepEdge] != len(def.Steps) || count[states.RetryEdge] != len(def.Steps) || count[states.ResumeEdge] != len(def.Resumes) {
			t.Errorf("%s: %d steps, %d retries, %d resumes drawn; want %d, %d, %d", def.Kind,
				count[states.StepEdge], count[states.RetryEdge], count[states.ResumeEdge], len(def.Steps), len(def.Steps), len(def.Resumes))
		}
	}
}
