package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kaas-dev/kaas/states"
)

// machinesCmd draws kaas's state machines from their states.Definition:
//
//	kaasctl machines [KIND...] [-o mermaid|dot|markdown]
func machinesCmd(args []string, out io.Writer) error {
	var kinds []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		kinds, args = append(kinds, args[0]), args[1:]
	}
	fs := flag.NewFlagSet("kaasctl machines", flag.ContinueOnError)
	output := fs.String("o", "mermaid", "output: mermaid (stateDiagram-v2), dot (Graphviz) or markdown (docs/machines.md)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	kinds = append(kinds, fs.Args()...)
	defs, err := selectMachines(kinds)
	if err != nil {
		return err
	}
	switch *output {
	case "mermaid":
		for i, def := range defs {
			if i > 0 {
				fmt.Fprintln(out)
			}
			fmt.Fprintf(out, "%%%% %s\n%s", def.Kind, mermaid(def))
		}
	case "dot":
		for _, def := range defs {
			fmt.Fprint(out, dot(def))
		}
	case "markdown":
		if len(kinds) > 0 {
			return fmt.Errorf("-o markdown writes docs/machines.md, which draws every machine: name none")
		}
		fmt.Fprint(out, machinesDoc())
	default:
		return fmt.Errorf("-o must be mermaid, dot or markdown, not %q", *output)
	}
	return nil
}

// selectMachines returns the machines named by kinds, all of them when
// kinds is empty.
func selectMachines(kinds []string) ([]states.Definition, error) {
	if len(kinds) == 0 {
		return states.Machines, nil
	}
	var out []states.Definition
	for _, k := range kinds {
		found := false
		for _, def := range states.Machines {
			if def.Kind == k {
				out, found = append(out, def), true
			}
		}
		if !found {
			var all []string
			for _, def := range states.Machines {
				all = append(all, def.Kind)
			}
			return nil, fmt.Errorf("no machine %q (machines: %s)", k, strings.Join(all, ", "))
		}
	}
	return out, nil
}

// mermaidID is a state's name as a Mermaid state id (no dashes).
func mermaidID(state states.State) string { return strings.ReplaceAll(string(state), "-", "_") }

// mermaid draws def as a Mermaid stateDiagram-v2. Mermaid cannot style one
// transition apart from another, so retries and resumes say what they are
// in their labels.
func mermaid(def states.Definition) string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n    direction LR\n")
	for _, s := range def.States() {
		if id := mermaidID(s); id != string(s) {
			fmt.Fprintf(&b, "    state %q as %s\n", s, id)
		}
	}
	fmt.Fprintf(&b, "    [*] --> %s\n", mermaidID(def.Initial))
	for _, e := range def.Edges() {
		fmt.Fprintf(&b, "    %s --> %s: %s\n", mermaidID(e.From), mermaidID(e.To), edgeLabel(e))
	}
	fmt.Fprintf(&b, "    %s --> [*]\n", mermaidID(def.End))
	return b.String()
}

// dotStyle is how each kind of edge is drawn in Graphviz.
var dotStyle = map[states.EdgeKind]string{
	states.StepEdge:   "",
	states.RetryEdge:  ", style=dashed, color=firebrick, fontcolor=firebrick",
	states.ResumeEdge: ", style=dotted, color=steelblue, fontcolor=steelblue",
}

// dot draws def as a Graphviz digraph: steps solid, retries dashed,
// resumes dotted, the end state doubled.
func dot(def states.Definition) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", strconv.Quote(def.Kind))
	b.WriteString("\trankdir=LR;\n\tnode [shape=box, style=rounded];\n")
	b.WriteString("\t\"[*]\" [shape=point, label=\"\"];\n")
	fmt.Fprintf(&b, "\t%s [peripheries=2];\n", quoteState(def.End))
	fmt.Fprintf(&b, "\t\"[*]\" -> %s;\n", quoteState(def.Initial))
	for _, e := range def.Edges() {
		fmt.Fprintf(&b, "\t%s -> %s [label=%s%s];\n", quoteState(e.From), quoteState(e.To), strconv.Quote(edgeLabel(e)), dotStyle[e.Kind])
	}
	b.WriteString("}\n")
	return b.String()
}

func quoteState(s states.State) string { return strconv.Quote(string(s)) }

// edgeLabel is what an edge says in a drawing: a step the engine does is
// marked "(engine)".
func edgeLabel(e states.Edge) string {
	if e.Host {
		return e.Label + " (engine)"
	}
	return e.Label
}
