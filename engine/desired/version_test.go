package desired

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/crashtest"
	"github.com/kaas-dev/kaas/volume/faultfs"
)

// Every change to a spec moves the version; a crash at any step of one
// leaves the token moved only if the change is durable, so a reader that
// lists when the token moves never misses a change (and one that missed
// the bump catches it at its next full listing).
func TestVersionFollowsEveryChangeCrash(t *testing.T) {
	spec := TopicSpec{Name: "t", ID: "id-1", Partitions: 1, Generation: 1}
	changes := []struct {
		name   string
		change func(fsys volume.FS) error
		done   func(got *TopicSpec) bool
	}{
		{"create", func(f volume.FS) error { return CreateTopicSpec(f, testCluster, spec) }, func(g *TopicSpec) bool { return g != nil }},
		{"write", func(f volume.FS) error { s := spec; s.Partitions = 3; return WriteTopicSpec(f, testCluster, s) },
			func(g *TopicSpec) bool { return g != nil && g.Partitions == 3 }},
		{"remove", func(f volume.FS) error { return RemoveTopicSpec(f, testCluster, spec.Name, spec.ID) }, func(g *TopicSpec) bool { return g == nil }},
	}
	for _, ch := range changes {
		for _, sub := range crashtest.Substrates() {
			setup := func(t *testing.T) (crashtest.World, string) {
				w := sub.Fresh()
				if err := volume.MkdirAllSync(w.Host("a"), path.Join(testCluster, SpecsDir)); err != nil {
					t.Fatal(err)
				}
				if ch.name != "create" {
					if err := CreateTopicSpec(w.Host("a"), testCluster, spec); err != nil {
						t.Fatal(err)
					}
				}
				tok, err := ReadVersion(w.Host("a"), testCluster)
				if err != nil {
					t.Fatal(err)
				}
				return w, tok
			}
			w0, before := setup(t)
			count := faultfs.New(w0.Host("a"), nil)
			if err := ch.change(count); err != nil {
				t.Fatal(err)
			}
			if tok, _ := ReadVersion(w0.Host("a"), testCluster); tok == before {
				t.Fatalf("%s: the version did not move", ch.name)
			}
			for i := 0; i < count.MutatingOps(); i++ {
				for _, after := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/%s/op%d-after=%v", ch.name, sub.Name, i, after), func(t *testing.T) {
						w, before := setup(t)
						if err := ch.change(faultfs.New(w.Host("a"), faultfs.CrashAtMutating(i, after))); err == nil {
							t.Fatal("the change reported success although the volume crashed")
						}
						w = w.Crash()
						tok, err := ReadVersion(w.Host("b"), testCluster)
						if err != nil {
							t.Fatal(err)
						}
						var got *TopicSpec
						if s, err := ReadTopicSpec(w.Host("b"), testCluster, spec.Name); err == nil {
							got = &s
						} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrTornSpec) {
							t.Fatal(err)
						}
						if tok != before && !ch.done(got) {
							t.Fatalf("the version moved but the change is not there: %+v", got)
						}
					})
				}
			}
		}
	}
}
