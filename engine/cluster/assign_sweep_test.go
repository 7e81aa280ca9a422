package cluster

import (
	"path"
	"slices"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// A controller that crashes between the create of its temp file and the
// rename leaves the temp behind; the next successful assignment write (by
// any controller) removes it, and nothing else in the directory.
func TestWriteAssignmentSweepsLeftoverTemps(t *testing.T) {
	m := memfs.New()
	ts := []Topic{{ID: "t", Partitions: 3}}
	a1, _ := NextAssignment(nil, ts, brokers(1), 1)
	if err := WriteAssignment(m, clusterDir, a1); err != nil {
		t.Fatal(err)
	}
	// Two writes crash after their create (before the rename), as a
	// SIGKILLed controller would leave them.
	for range 2 {
		crashing := faultfs.New(m, func(op faultfs.Op) faultfs.Action {
			if op.Kind == faultfs.OpWrite {
				return faultfs.CrashBefore
			}
			return faultfs.Proceed
		})
		if err := WriteAssignment(crashing, clusterDir, a1); err == nil {
			t.Fatal("crashing write succeeded")
		}
	}
	// Files that are not assignment temps stay.
	others := []string{".cluster.json.tmp-0123456789abcdef", "cluster.json", ".assignment.json.tmp-x"}
	for _, n := range others {
		if err := volume.WriteFileAtomic(m, path.Join(clusterDir, n), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if temps := assignmentTempsIn(t, m); len(temps) != 2 {
		t.Fatalf("temps after the crashes: %v, want 2", temps)
	}
	a2, _ := NextAssignment(a1, ts, brokers(1, 2), 2)
	if err := WriteAssignment(m, clusterDir, a2); err != nil {
		t.Fatal(err)
	}
	if temps := assignmentTempsIn(t, m); len(temps) != 0 {
		t.Fatalf("temps after the next write: %v", temps)
	}
	ents, err := m.ReadDir(clusterDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	for _, n := range append(others, AssignmentFile) {
		if !slices.Contains(names, n) {
			t.Errorf("%s was removed; left %v", n, names)
		}
	}
	if got, err := ReadAssignment(m, clusterDir); err != nil || got.ControllerEpoch != 2 {
		t.Fatalf("assignment %+v, %v", got, err)
	}
}

func assignmentTempsIn(t *testing.T, fsys volume.FS) []string {
	t.Helper()
	ents, err := fsys.ReadDir(clusterDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if volume.IsTempName(e.Name()) && len(e.Name()) > len(".assignment.json") && e.Name()[:len(".assignment.json")] == ".assignment.json" {
			out = append(out, e.Name())
		}
	}
	return out
}
