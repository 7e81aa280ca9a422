package states_test

import (
	"slices"
	"testing"

	"github.com/kaas-dev/kaas/states"
)

// TestResumeRules pins where each open machine resumes from, for every
// persisted state, with the fence claim still held by this process or not.
func TestResumeRules(t *testing.T) {
	cases := []struct {
		def       states.Definition
		persisted states.State
		claimed   states.State // resumed from while the claim still holds
		unclaimed states.State // resumed from by any other process or epoch
		held      bool
	}{
		{states.PartitionOpen, "", "", "", false},
		{states.PartitionOpen, "pending", "pending", "pending", false},
		{states.PartitionOpen, "dir-ready", "pending", "pending", false},
		{states.PartitionOpen, "stamped", "stamped", "stamped", false},
		{states.PartitionOpen, "fenced", "fenced", "stamped", false},
		{states.PartitionOpen, "recovered", "stamped", "stamped", true},
		{states.PartitionOpen, "serving", "stamped", "stamped", true},
		{states.CoordinatorOpen, "pending", "pending", "pending", false},
		{states.CoordinatorOpen, "dir-ready", "dir-ready", "dir-ready", false},
		{states.CoordinatorOpen, "fenced", "fenced", "dir-ready", false},
		{states.CoordinatorOpen, "loaded", "dir-ready", "dir-ready", true},
		{states.CoordinatorOpen, "serving", "dir-ready", "dir-ready", true},
	}
	for _, c := range cases {
		if got := c.def.Resume(c.persisted, true); got != c.claimed {
			t.Errorf("%s: Resume(%q, claim held) = %q, want %q", c.def.Kind, c.persisted, got, c.claimed)
		}
		if got := c.def.Resume(c.persisted, false); got != c.unclaimed {
			t.Errorf("%s: Resume(%q, no claim) = %q, want %q", c.def.Kind, c.persisted, got, c.unclaimed)
		}
		if got := c.def.HeldHandles(c.persisted); got != c.held {
			t.Errorf("%s: HeldHandles(%q) = %v, want %v", c.def.Kind, c.persisted, got, c.held)
		}
	}
	// The delete and reclaim machines' states are facts on the volume.
	for _, def := range []states.Definition{states.TopicDelete, states.DirectoryReclaim} {
		for _, s := range def.States() {
			for _, claim := range []bool{false, true} {
				if got := def.Resume(s, claim); got != s {
					t.Errorf("%s: Resume(%q, %v) = %q, want it kept", def.Kind, s, claim, got)
				}
			}
		}
	}
}

// TestResumeRulesGoBack: every rule names a state of its machine, resumes
// from an earlier state of the chain, and never applies to the initial
// state.
func TestResumeRulesGoBack(t *testing.T) {
	for _, def := range states.Machines {
		chain := def.States()
		for s, r := range def.Resumes {
			at, from := slices.Index(chain, s), slices.Index(chain, r.From)
			switch {
			case at < 0:
				t.Errorf("%s: resume rule for %q, which is not a state of the machine", def.Kind, s)
			case at == 0:
				t.Errorf("%s: resume rule for the initial state %q", def.Kind, s)
			case r.Means == states.Kept:
				t.Errorf("%s: resume rule for %q says kept: leave it out", def.Kind, s)
			case from < 0 || from >= at:
				t.Errorf("%s: %q resumes from %q, which is not an earlier state of the chain %v", def.Kind, s, r.From, chain)
			}
		}
	}
}
