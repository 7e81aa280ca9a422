package main

import (
	"fmt"
	"strings"

	"github.com/kaas-dev/kaas/states"
)

// regenerateMachinesDoc is the one command that rewrites docs/machines.md.
const regenerateMachinesDoc = "go run ./cmd/kaasctl machines -o markdown > docs/machines.md"

const machinesDocIntro = `# State machines

Every change kaas makes to the volume in more than one step is a named
state machine (package states): a chain of steps from an initial state to
a named end state, one idempotent action per step. The machine's record,
under ` + "`<cluster>/status/<kind>/`" + `, is saved after every step, and it is what
` + "`kaasctl reconcile-status`" + ` prints. A crash between an action and its save
runs the action again on the next pass, so every action takes "already
done" for success; the crash sweeps in states/ crash each machine at every
volume operation of its workloads and check that it converges. A machine
whose every state between resumes from an earlier one anyway saves its
record only where a pass stops (an error, a wait) and at its end state
(` + "`Definition.SaveAtStops`" + `, said under its drawing): its record is status,
not progress, and a takeover of thousands of partitions does not pay an
atomic write per step of each. Such a record is also written without
fsync (renamed into place, so a reader never sees half of one): a crash
may lose it or leave it empty, and a record that does not decode reads as
none, as if the machine had not started.

The drawings below are made from each machine's ` + "`states.Definition`" + ` by
` + "`kaasctl machines`" + ` (` + "`-o dot`" + ` for Graphviz). Three kinds of arrow:

- an arrow labelled with an event is a step: its action succeeded and the
  new state was saved. "(engine)" marks a step the machine's host does
  (the engine, which knows the assigned epoch and holds the handles);
  the others are the machine's own volume steps;
- an arrow back to the same state, "failed, retried with backoff": the
  action, or the save after it, failed or waits; the record keeps its
  state with the error (lastError, "waiting: ..." for a wait), a failure
  counts an attempt and a wait does not, and the reconciler drives it
  again later;
- an arrow "on resume ..." back to an earlier state is a resume rule: what a
  persisted state means to the process that loads the record, after a
  restart or on another broker. A state that describes handles (an open
  log, a loaded store) means nothing to a process that holds none; a fence
  claim holds only for the process and the leader epoch that made it; a
  directory another actor may have moved is observed again.

`

// machinesDoc is the content of docs/machines.md.
func machinesDoc() string {
	var b strings.Builder
	b.WriteString(machinesDocIntro)
	fmt.Fprintf(&b, "<!-- Generated from the states.Definitions: %s -->\n", regenerateMachinesDoc)
	for _, def := range states.Machines {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n```mermaid\n%s```\n", def.Kind, def.Summary, mermaid(def))
		if def.SaveAtStops {
			b.WriteString("\nIts record is saved only where a pass stops and at `" + string(def.End) + "`.\n")
		}
	}
	return b.String()
}
