package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/states"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/machines.md from the states.Definitions")

// machinesDocPath is docs/machines.md, from this package's directory.
var machinesDocPath = filepath.Join("..", "..", "docs", "machines.md")

// TestMachinesDocIsCurrent: docs/machines.md is what `kaasctl machines -o
// markdown` makes of the Definitions today.
func TestMachinesDocIsCurrent(t *testing.T) {
	want := machinesDoc()
	if *updateDocs {
		if err := os.WriteFile(machinesDocPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(machinesDocPath)
	if err != nil {
		t.Fatalf("read docs/machines.md: %v\nregenerate it from the repository root: %s", err, regenerateMachinesDoc)
	}
	if string(got) != want {
		t.Fatalf("docs/machines.md is not what the states.Definitions draw (a machine changed, or the file was edited by hand).\n"+
			"Regenerate it from the repository root:\n\t%s\nor: go test ./cmd/kaasctl/ -run TestMachinesDocIsCurrent -update\nfirst difference at line %d",
			regenerateMachinesDoc, firstDiffLine(string(got), want))
	}
}

func firstDiffLine(a, b string) int {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

func TestMachinesDrawsEveryMachine(t *testing.T) {
	for _, format := range []string{"mermaid", "dot"} {
		var out bytes.Buffer
		if err := run([]string{"machines", "-o", format}, &out); err != nil {
			t.Fatalf("-o %s: %v", format, err)
		}
		for _, def := range states.Machines {
			if !strings.Contains(out.String(), def.Kind) {
				t.Errorf("-o %s does not draw %s:\n%s", format, def.Kind, out.String())
			}
			// Every edge the Definition knows is drawn, retries and
			// resumes included.
			for _, e := range def.Edges() {
				if !strings.Contains(out.String(), e.Label) {
					t.Errorf("-o %s: %s edge %s -> %s %q missing", format, def.Kind, e.From, e.To, e.Label)
				}
			}
		}
	}
}

func TestMachinesMermaid(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"machines", "coordinator-open"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"%% coordinator-open\nstateDiagram-v2\n",
		`state "dir-ready" as dir_ready`,
		"[*] --> pending\n",
		"pending --> dir_ready: make-dir\n",
		"dir_ready --> dir_ready: fence failed, retried with backoff\n",
		"fenced --> dir_ready: on resume at another epoch or in another process\n",
		"loaded --> dir_ready: on resume, no handles held\n",
		"serving --> [*]\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("mermaid output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "partition-open") {
		t.Errorf("asked for one machine, drew more:\n%s", out.String())
	}
}

func TestMachinesDot(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"machines", "partition-open", "-o", "dot"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"digraph \"partition-open\" {\n",
		"\"serving\" [peripheries=2];",
		"\"pending\" -> \"dir-ready\" [label=\"make-dir\"];",
		"\"stamped\" -> \"stamped\" [label=\"fence failed, retried with backoff\", style=dashed",
		"\"dir-ready\" -> \"pending\" [label=\"on resume, observed again\", style=dotted",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dot output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestMachinesRefusesWhatItCannotDraw(t *testing.T) {
	for _, args := range [][]string{
		{"machines", "no-such-machine"},
		{"machines", "-o", "svg"},
		{"machines", "topic-delete", "-o", "markdown"},
	} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("kaasctl %s: no error", strings.Join(args, " "))
		}
	}
}
