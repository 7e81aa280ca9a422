package states_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/states"
)

// TestEveryDefinitionIsAMachine: every Definition literal in the package's
// sources is listed in states.Machines (and so swept), so a new machine
// cannot be left out of the registry.
func TestEveryDefinitionIsAMachine(t *testing.T) {
	listed := map[string]bool{}
	for _, def := range states.Machines {
		listed[def.Kind] = true
	}
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if id, ok := lit.Type.(*ast.Ident); !ok || id.Name != "Definition" {
				return true
			}
			found++
			kind := ""
			for _, el := range lit.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if k, _ := kv.Key.(*ast.Ident); k == nil || k.Name != "Kind" {
					continue
				}
				if bl, ok := kv.Value.(*ast.BasicLit); ok {
					kind, _ = strconv.Unquote(bl.Value)
				}
			}
			if !listed[kind] {
				t.Errorf("%s: Definition %q is not in states.Machines, so no crash sweep covers it", fset.Position(lit.Pos()), kind)
			}
			return false
		})
	}
	if found < len(states.Machines) {
		t.Fatalf("found %d Definition literals for %d machines: the scan is broken", found, len(states.Machines))
	}
}
