package cluster

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// readOnlyProcedures are the exported functions and methods that reach the
// volume but never change it; TestReadOnlyProceduresDoNotMutate runs each
// once and checks.
var readOnlyProcedures = map[string]func(fsys volume.FS) error{
	"ReadHeartbeats":     func(fsys volume.FS) error { _, err := ReadHeartbeats(fsys, clusterDir); return err },
	"ReadAssignment":     func(fsys volume.FS) error { _, err := ReadAssignment(fsys, clusterDir); return err },
	"ReadAssignmentHead": func(fsys volume.FS) error { _, err := ReadAssignmentHead(fsys, clusterDir); return err },
	"AssignmentReader.HeadUnchanged": func(fsys volume.FS) error {
		NewAssignmentReader(fsys, clusterDir).HeadUnchanged()
		return nil
	},
	"ReadAssignmentID": func(fsys volume.FS) error { _, err := ReadAssignmentID(fsys, clusterDir); return err },
	"LoadAssignment":   func(fsys volume.FS) error { _, _, err := LoadAssignment(fsys, clusterDir); return err },
	"CurrentClaim":     func(fsys volume.FS) error { _, _, err := CurrentClaim(fsys, clusterDir); return err },
	"NewHeartbeater": func(fsys volume.FS) error {
		NewHeartbeater(fsys, clusterDir, Heartbeat{BrokerID: 2, Incarnation: "x"})
		return nil
	},
	"Heartbeater.SetOpen":      func(fsys volume.FS) error { heartbeater(fsys).SetOpen([]string{"t/0@id"}); return nil },
	"Heartbeater.SetWallClock": func(fsys volume.FS) error { heartbeater(fsys).SetWallClock(time.Now); return nil },
	"Heartbeater.SetReopen":    func(fsys volume.FS) error { heartbeater(fsys).SetReopen([]string{"t/0@id#1"}); return nil },
	"Heartbeater.SetReleased": func(fsys volume.FS) error {
		heartbeater(fsys).SetReleased(AssignmentVersion{ControllerEpoch: 1, Version: 2})
		return nil
	},
	"Heartbeater.SetReport": func(fsys volume.FS) error { heartbeater(fsys).SetReport(ReportSummary{Seq: 1}); return nil },
	"ReadPartitionReport": func(fsys volume.FS) error {
		_, err := ReadPartitionReport(fsys, clusterDir, 2)
		return err
	},
	"Heartbeater.SetVersion": func(fsys volume.FS) error { heartbeater(fsys).SetVersion("acls", "tok"); return nil },
	"Heartbeater.Last":       func(fsys volume.FS) error { heartbeater(fsys).Last(); return nil },
	"Heartbeater.Replaces":   func(fsys volume.FS) error { heartbeater(fsys).Replaces("old"); return nil },
	"ReadHeartbeat": func(fsys volume.FS) error {
		_, err := ReadHeartbeat(fsys, clusterDir, 1)
		return err
	},
	"StartCheck.Run": func(fsys volume.FS) error {
		clk := &fakeClock{}
		_, err := StartCheck{FS: fsys, ClusterDir: clusterDir, BrokerID: 1, Lease: lease, Now: clk.Now,
			Sleep: func(_ context.Context, d time.Duration) error { clk.Advance(d); return nil }}.Run(context.Background())
		return err
	},
	"Elector.Verify":        func(fsys volume.FS) error { _, err := elector(fsys).Verify(); return err },
	"Elector.Current":       func(fsys volume.FS) error { elector(fsys).Current(); return nil },
	"Elector.Status":        func(fsys volume.FS) error { elector(fsys).Status(); return nil },
	"NewAssignmentReader":   func(fsys volume.FS) error { NewAssignmentReader(fsys, clusterDir); return nil },
	"NewElector":            func(fsys volume.FS) error { elector(fsys); return nil },
	"AssignmentReader.Read": func(fsys volume.FS) error { _, err := NewAssignmentReader(fsys, clusterDir).Read(); return err },
	"AssignmentReader.ObserveControllerEpoch": func(fsys volume.FS) error {
		NewAssignmentReader(fsys, clusterDir).ObserveControllerEpoch(3)
		return nil
	},
	"ProducerIDs.Issued": func(fsys volume.FS) error { NewProducerIDs(fsys, clusterDir, 1).Issued(); return nil },
	"AssignmentReader.HighestControllerEpoch": func(fsys volume.FS) error {
		NewAssignmentReader(fsys, clusterDir).HighestControllerEpoch()
		return nil
	},
}

// pendingSweep are procedures that reach the volume and have no crash
// sweep yet, each with the reason; the sweep prints them as not covered.
// Move an entry to clusterProcedures (or readOnlyProcedures) when its
// sweep exists.
var pendingSweep = map[string]string{}

func heartbeater(fsys volume.FS) *Heartbeater {
	return NewHeartbeater(fsys, clusterDir, Heartbeat{BrokerID: 2, Incarnation: "x"})
}

func elector(fsys volume.FS) *Elector {
	return NewElector(ElectorConfig{FS: fsys, ClusterDir: clusterDir, BrokerID: 2, Incarnation: "b1", Observer: NewObserver(lease, (&fakeClock{}).Now)})
}

// volumeAPI lists the package's exported functions that take a volume.FS
// and the exported methods of types holding one, as "Func" or
// "Type.Method", read from the non-test sources.
func volumeAPI(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	isFS := func(e ast.Expr) bool {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		id, ok := sel.X.(*ast.Ident)
		return ok && id.Name == "volume" && sel.Sel.Name == "FS"
	}
	// holders are the struct types with a volume.FS field, directly or
	// through a field of another holder type (ElectorConfig, say).
	structs := map[string]*ast.StructType{}
	var funcs []*ast.FuncDecl
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				funcs = append(funcs, d)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						if st, ok := ts.Type.(*ast.StructType); ok {
							structs[ts.Name.Name] = st
						}
					}
				}
			}
		}
	}
	holders := map[string]bool{}
	typeName := func(e ast.Expr) string {
		if star, ok := e.(*ast.StarExpr); ok {
			e = star.X
		}
		if id, ok := e.(*ast.Ident); ok {
			return id.Name
		}
		return ""
	}
	reaches := func(e ast.Expr) bool { return isFS(e) || holders[typeName(e)] }
	for changed := true; changed; {
		changed = false
		for name, st := range structs {
			if holders[name] {
				continue
			}
			if slices.ContainsFunc(st.Fields.List, func(f *ast.Field) bool { return reaches(f.Type) }) {
				holders[name], changed = true, true
			}
		}
	}
	var out []string
	for _, fn := range funcs {
		if !fn.Name.IsExported() {
			continue
		}
		if fn.Recv != nil {
			if recv := typeName(fn.Recv.List[0].Type); ast.IsExported(recv) && holders[recv] {
				out = append(out, recv+"."+fn.Name.Name)
			}
			continue
		}
		if slices.ContainsFunc(fn.Type.Params.List, func(f *ast.Field) bool { return reaches(f.Type) }) {
			out = append(out, fn.Name.Name)
		}
	}
	sort.Strings(out)
	return out
}

// TestClusterProceduresCoverVolumeAPI: every exported function or method
// that reaches the volume is swept (clusterProcedures) or proven
// read-only (readOnlyProcedures), so a new one cannot escape the sweep.
func TestClusterProceduresCoverVolumeAPI(t *testing.T) {
	swept := map[string]bool{}
	for _, p := range clusterProcedures {
		for _, c := range p.covers {
			swept[c] = true
		}
	}
	for _, nc := range negativeControls {
		swept[nc.covers] = true
	}
	api := volumeAPI(t)
	if len(api) == 0 {
		t.Fatal("found no exported function reaching the volume: the scan is broken")
	}
	for _, name := range api {
		_, ro := readOnlyProcedures[name]
		reason, pending := pendingSweep[name]
		switch {
		case swept[name] && ro:
			t.Errorf("%s is both swept and listed read-only", name)
		case pending && (swept[name] || ro):
			t.Errorf("%s is swept or read-only: remove it from pendingSweep", name)
		case pending:
			fmt.Printf("crash sweep NOT COVERED: %s (%s)\n", name, reason)
		case !swept[name] && !ro:
			t.Errorf("%s reaches the volume but has no crash sweep: add a clusterProcedure covering it (or list it in readOnlyProcedures if it never writes)", name)
		}
	}
	for name := range swept {
		if !slices.Contains(api, name) {
			t.Errorf("clusterProcedures cover %s, which is not an exported function reaching the volume", name)
		}
	}
	for name := range pendingSweep {
		if !slices.Contains(api, name) {
			t.Errorf("pendingSweep lists %s, which is not an exported function reaching the volume", name)
		}
	}
	for name := range readOnlyProcedures {
		if !slices.Contains(api, name) {
			t.Errorf("readOnlyProcedures list %s, which is not an exported function reaching the volume", name)
		}
	}
	names := map[string]bool{}
	for _, p := range clusterProcedures {
		if names[p.name] {
			t.Errorf("procedure %s listed twice", p.name)
		}
		names[p.name] = true
	}
}

// TestReadOnlyProceduresDoNotMutate runs every read-only procedure on a
// volume with a controller, an assignment and heartbeats, and checks that
// it made no mutating operation.
func TestReadOnlyProceduresDoNotMutate(t *testing.T) {
	mem := memfs.New()
	ct := newClusterTrial()
	setupCluster(t, mem, ct)
	// A chain too: a head and a delta after the base.
	b, err := crashedBroker(mem, ct)
	if err != nil {
		t.Fatal(err)
	}
	for i, compact := range []bool{true, false} {
		if err := chainControllerRound(mem, b, chainRounds[i], ct, compact); err != nil {
			t.Fatal(err)
		}
	}
	if err := WritePartitionReport(mem, clusterDir, PartitionReport{BrokerID: 2, Incarnation: "b1", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	for name, fn := range readOnlyProcedures {
		ffs := faultfs.New(mem, nil)
		if err := fn(ffs); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if n := ffs.MutatingOps(); n != 0 {
			t.Errorf("%s made %d mutating operations: it needs a crash sweep", name, n)
		}
	}
}
