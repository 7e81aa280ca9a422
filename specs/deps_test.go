package specs

// Dependency direction of kaas's layers, checked with `go list -deps`:
//
//	volume/...  ->  (no other kaas package)
//	states      ->  volume/...
//	engine      ->  engine/... (its own subtree), states, volume/...
//	wire        ->  wire/... (its own subtree), engine, states, volume/...
//
// and nothing in those layers may depend (outside _test files) on the test
// filesystems volume/memfs and volume/faultfs. Only kaas-operator's
// Kubernetes side (cmd/kaas-operator, its api and controller packages) and
// the specs may depend on Kubernetes (k8s.io, sigs.k8s.io): not the layers,
// not the other commands, not the operator's k8s-free topicstate.
// Dependencies are transitive: a package cannot reach a forbidden package
// through another one either.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const kaasModule = "github.com/kaas-dev/kaas"

// within reports whether pkg is dir or below it (both module-relative).
func within(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// layerRule says which kaas packages a layer may depend on.
type layerRule struct {
	layer   string   // module-relative directory; the rule covers it and below
	allowed []string // module-relative directories (each with its subtree) or exact packages
}

var layerRules = []layerRule{
	{"volume", []string{"volume"}},
	{"states", []string{"volume"}},
	{"engine", []string{"engine", "states", "volume"}},
	{"wire", []string{"wire", "engine", "states", "volume"}},
}

// testOnlyPackages may be used by _test files only.
var testOnlyPackages = []string{"volume/memfs", "volume/faultfs", "volume/crashtest"}

var forbiddenPrefixes = []string{"k8s.io/", "sigs.k8s.io/"}

// kubernetesAllowed reports whether a kaas package (module-relative) may
// depend on Kubernetes libraries.
func kubernetesAllowed(rel string) bool {
	return rel == "cmd/kaas-operator" || within(rel, "cmd/kaas-operator/api") ||
		within(rel, "cmd/kaas-operator/controller") || within(rel, "specs")
}

// checkDependencies checks a dependency graph: for each kaas package (full
// import path), every package it depends on (full import paths,
// transitive, non-test). It returns one line per violation, sorted.
func checkDependencies(deps map[string][]string) []string {
	var out []string
	for pkg, ds := range deps {
		rel, ok := strings.CutPrefix(pkg, kaasModule+"/")
		if !ok {
			continue
		}
		if !kubernetesAllowed(rel) {
			for _, d := range ds {
				if slices.ContainsFunc(forbiddenPrefixes, func(p string) bool { return strings.HasPrefix(d, p) }) {
					out = append(out, fmt.Sprintf("%s depends on %s: no Kubernetes outside kaas-operator", rel, d))
				}
			}
		}
		var rule *layerRule
		for i := range layerRules {
			if within(rel, layerRules[i].layer) {
				rule = &layerRules[i]
			}
		}
		if rule == nil {
			continue // cmd, specs: any kaas package
		}
		for _, d := range ds {
			drel, ok := strings.CutPrefix(d, kaasModule+"/")
			if !ok {
				if d == kaasModule {
					out = append(out, fmt.Sprintf("%s depends on the module root package", rel))
				}
				continue
			}
			for _, tp := range testOnlyPackages {
				// The test filesystems may build on each other.
				if within(drel, tp) && !slices.ContainsFunc(testOnlyPackages, func(t string) bool { return within(rel, t) }) {
					out = append(out, fmt.Sprintf("%s depends on %s, which only _test files may use", rel, drel))
				}
			}
			if !slices.ContainsFunc(rule.allowed, func(a string) bool { return within(drel, a) }) {
				out = append(out, fmt.Sprintf("%s depends on %s: %s may only depend on %v", rel, drel, rule.layer, rule.allowed))
			}
		}
	}
	sort.Strings(out)
	return out
}

type listedPackage struct {
	ImportPath string
	Deps       []string
	Error      *struct{ Err string }
}

// listDependencies runs `go list -deps -json` on the layers and returns
// each kaas package's (transitive, non-test) dependencies.
func listDependencies(t *testing.T) map[string][]string {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	args := []string{"list", "-deps", "-json=ImportPath,Deps,Error"}
	for _, r := range layerRules {
		args = append(args, "./"+r.layer+"/...")
	}
	args = append(args, "./cmd/...")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	deps := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		if p.ImportPath == kaasModule || strings.HasPrefix(p.ImportPath, kaasModule+"/") {
			deps[p.ImportPath] = p.Deps
		}
	}
	return deps
}

func TestDependencyDirection(t *testing.T) {
	deps := listDependencies(t)
	// Guard against a vacuous pass (wrong directory, renamed module).
	for _, want := range []string{"volume", "volume/partlog", "states", "engine", "wire", "cmd/kaas-operator/topicstate"} {
		if _, ok := deps[kaasModule+"/"+want]; !ok {
			t.Fatalf("go list did not report %s/%s; got %d kaas packages", kaasModule, want, len(deps))
		}
	}
	if !slices.Contains(deps[kaasModule+"/wire"], kaasModule+"/engine") {
		t.Fatalf("wire's dependencies do not include engine: go list output is not what this test expects")
	}
	for _, v := range checkDependencies(deps) {
		t.Error(v)
	}
}

// TestDependencyCheckerCatches shows the checker fails on each kind of
// forbidden import, using synthetic graphs.
func TestDependencyCheckerCatches(t *testing.T) {
	k := func(rel string) string { return kaasModule + "/" + rel }
	ok := map[string][]string{
		k("volume"):                       {"errors", "io/fs"},
		k("volume/partlog"):               {k("volume"), "github.com/go-logr/logr"},
		k("volume/memfs"):                 {k("volume")},
		k("volume/faultfs"):               {k("volume"), k("volume/memfs")},
		k("states"):                       {k("volume"), "github.com/looplab/fsm"},
		k("engine"):                       {k("states"), k("volume"), k("volume/partlog"), k("engine/cluster")},
		k("engine/cluster"):               {k("volume"), "github.com/go-logr/logr"},
		k("wire"):                         {k("engine"), k("states"), k("volume"), k("volume/partlog"), "github.com/twmb/franz-go/pkg/kmsg"},
		k("cmd/kaas-broker"):              {k("wire"), k("engine"), k("volume/memfs")},
		k("cmd/kaas-operator"):            {k("cmd/kaas-operator/controller"), k("engine"), "sigs.k8s.io/controller-runtime"},
		k("cmd/kaas-operator/controller"): {k("cmd/kaas-operator/topicstate"), "k8s.io/client-go/tools/events"},
		k("cmd/kaas-operator/topicstate"): {k("engine"), k("volume")},
		k("specs"):                        {k("volume/faultfs"), "sigs.k8s.io/yaml"},
	}
	if v := checkDependencies(ok); len(v) != 0 {
		t.Fatalf("the allowed graph was refused: %v", v)
	}
	tests := []struct {
		name string
		pkg  string
		dep  string
		want string // substring of the violation
	}{
		{"volume imports states", "volume", k("states"), "volume depends on states"},
		{"volume subpackage imports engine", "volume/partlog", k("engine"), "volume/partlog depends on engine"},
		{"states imports engine", "states", k("engine"), "states depends on engine"},
		{"states imports wire", "states", k("wire"), "states depends on wire"},
		{"engine imports wire", "engine", k("wire"), "engine depends on wire"},
		{"engine/cluster imports wire", "engine/cluster", k("wire"), "engine/cluster depends on wire"},
		{"engine/cluster imports memfs", "engine/cluster", k("volume/memfs"), "only _test files"},
		{"engine imports cmd", "engine", k("cmd/kaasctl"), "engine depends on cmd/kaasctl"},
		{"wire imports cmd", "wire", k("cmd/kaas-broker"), "wire depends on cmd/kaas-broker"},
		{"wire imports specs", "wire", k("specs"), "wire depends on specs"},
		{"engine imports memfs", "engine", k("volume/memfs"), "only _test files"},
		{"partlog imports faultfs", "volume/partlog", k("volume/faultfs"), "only _test files"},
		{"wire imports faultfs", "wire", k("volume/faultfs"), "only _test files"},
		{"states imports client-go", "states", "k8s.io/client-go/kubernetes", "no Kubernetes"},
		{"engine imports controller-runtime", "engine", "sigs.k8s.io/controller-runtime", "no Kubernetes"},
		{"volume imports apimachinery", "volume", "k8s.io/apimachinery/pkg/types", "no Kubernetes"},
		{"kaasctl imports client-go", "cmd/kaasctl", "k8s.io/client-go/kubernetes", "no Kubernetes"},
		{"the broker imports apimachinery", "cmd/kaas-broker", "k8s.io/apimachinery/pkg/types", "no Kubernetes"},
		{"topicstate imports apimachinery", "cmd/kaas-operator/topicstate", "k8s.io/apimachinery/pkg/api/meta", "no Kubernetes"},
		{"engine imports the module root", "engine", kaasModule, "module root"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := map[string][]string{}
			for p, ds := range ok {
				g[p] = slices.Clone(ds)
			}
			g[k(tc.pkg)] = append(g[k(tc.pkg)], tc.dep)
			v := checkDependencies(g)
			if len(v) == 0 {
				t.Fatalf("adding %s -> %s was not caught", tc.pkg, tc.dep)
			}
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Fatalf("violations %v do not mention %q", v, tc.want)
			}
		})
	}
}
