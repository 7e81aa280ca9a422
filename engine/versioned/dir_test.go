package versioned

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/crashtest"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

const testPath = "cluster/things"

func put(name, data string) Change { return Change{Name: name, Data: []byte(data)} }
func remove(name string) Change    { return Change{Name: name} }

// contents is what a load shows, by name.
func contents(t testing.TB, d Dir) (string, map[string]string) {
	t.Helper()
	tok, entries, err := d.Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	out := map[string]string{}
	for _, e := range entries {
		out[e.Name] = string(e.Data)
	}
	return tok, out
}

// TestApply: changes land whole, every Apply makes a new token, removing
// a missing entry is no error, and names that are not entries are
// refused before anything is written.
func TestApply(t *testing.T) {
	d := Dir{FS: memfs.New(), Path: testPath}
	if tok, got := contents(t, d); tok != "" || len(got) != 0 {
		t.Fatalf("empty dir: %q %v", tok, got)
	}
	tokens := map[string]bool{}
	steps := []struct {
		changes []Change
		want    map[string]string
	}{
		{[]Change{put("a.json", "1"), put("b.json", "2")}, map[string]string{"a.json": "1", "b.json": "2"}},
		{[]Change{put("a.json", "3"), remove("b.json")}, map[string]string{"a.json": "3"}},
		{[]Change{remove("b.json")}, map[string]string{"a.json": "3"}},
		{nil, map[string]string{"a.json": "3"}},
		{[]Change{remove("a.json")}, map[string]string{}},
	}
	for i, s := range steps {
		tok, err := d.Apply(s.changes)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if tok == "" || tokens[tok] {
			t.Fatalf("step %d: token %q is not new", i, tok)
		}
		tokens[tok] = true
		gotTok, got := contents(t, d)
		if gotTok != tok || !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d: %q %v, want %q %v", i, gotTok, got, tok, s.want)
		}
	}
	for _, bad := range []string{"version", "x.txt", "a/b.json", ".json"} {
		before, _ := d.Token()
		if _, err := d.Apply([]Change{put("ok.json", "1"), put(bad, "1")}); err == nil {
			t.Fatalf("%q accepted as an entry name", bad)
		}
		if after, _ := d.Token(); after != before {
			t.Fatalf("a refused change replaced the token")
		}
	}
}

// TestReaderPoll: a reader reloads on its first poll, when the token
// changes and at every FullEvery-th poll, and otherwise reads only the
// token.
func TestReaderPoll(t *testing.T) {
	mem := memfs.New()
	d := Dir{FS: mem, Path: testPath}
	if _, err := d.Apply([]Change{put("a.json", "1")}); err != nil {
		t.Fatal(err)
	}
	r := Reader{Dir: d, FullEvery: 4}
	type poll struct {
		change     []Change // applied before the poll
		sneak      []Change // written without a new token before the poll
		wantReload bool
		wantNames  int
	}
	polls := []poll{
		{wantReload: true, wantNames: 1}, // 1: first
		{wantReload: false},              // 2
		{change: []Change{put("b.json", "2")}, wantReload: true, wantNames: 2}, // 3: token changed
		{sneak: []Change{put("c.json", "3")}, wantReload: true, wantNames: 3},  // 4: full reload
		{wantReload: false}, // 5
	}
	for i, p := range polls {
		if p.change != nil {
			if _, err := d.Apply(p.change); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range p.sneak {
			if err := volume.WriteFileAtomic(mem, testPath+"/"+c.Name, c.Data); err != nil {
				t.Fatal(err)
			}
		}
		entries, reload, err := r.Poll()
		if err != nil {
			t.Fatalf("poll %d: %v", i+1, err)
		}
		if reload != p.wantReload || (reload && len(entries) != p.wantNames) || (!reload && entries != nil) {
			t.Fatalf("poll %d: reload %v with %d entries, want %v with %d", i+1, reload, len(entries), p.wantReload, p.wantNames)
		}
		if tok, _ := d.Token(); r.Token() != tok {
			t.Fatalf("poll %d: reader holds token %q, dir %q", i+1, r.Token(), tok)
		}
	}
}

// TestApplyCrash: a crash at any volume operation of a change (a
// replacement, an addition and a removal at once) leaves every entry
// whole, old or new, and a listing that loads; a reader that loaded
// before the crash sees what the crash left by its next full reload; and
// the client's retry of the change lands it and replaces the token.
func TestApplyCrash(t *testing.T) {
	before := []Change{put("a.json", "a-old"), put("b.json", "b-old")}
	change := []Change{put("a.json", "a-new"), put("c.json", "c-new"), remove("b.json")}
	allowed := map[string][]string{"a.json": {"a-old", "a-new"}, "b.json": {"b-old"}, "c.json": {"c-new"}}
	want := map[string]string{"a.json": "a-new", "c.json": "c-new"}

	for _, sub := range crashtest.Substrates() {
		setup := func(t *testing.T) (crashtest.World, *Reader) {
			w := sub.Fresh()
			d := Dir{FS: w.Host("a"), Path: testPath}
			if _, err := d.Apply(before); err != nil {
				t.Fatal(err)
			}
			r := &Reader{Dir: Dir{FS: w.Host("b"), Path: testPath}, FullEvery: 3}
			if _, _, err := r.Poll(); err != nil {
				t.Fatal(err)
			}
			return w, r
		}
		w0, _ := setup(t)
		count := faultfs.New(w0.Host("a"), nil)
		if _, err := (Dir{FS: count, Path: testPath}).Apply(change); err != nil {
			t.Fatal(err)
		}
		n := count.MutatingOps()
		if n == 0 {
			t.Fatal("no mutating operations")
		}
		for i := 0; i < n; i++ {
			for _, after := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/op%d-after=%v", sub.Name, i, after), func(t *testing.T) {
					w, _ := setup(t)
					ffs := faultfs.New(w.Host("a"), faultfs.CrashAtMutating(i, after))
					if _, err := (Dir{FS: ffs, Path: testPath}).Apply(change); err == nil {
						t.Fatal("the change reported success although the volume crashed")
					}
					w = w.Crash()
					d := Dir{FS: w.Host("b"), Path: testPath}
					_, got := contents(t, d)
					for name, data := range got {
						if !contains(allowed[name], data) {
							t.Fatalf("after the crash %s holds %q", name, data)
						}
					}
					// A reader with no new token still reaches what the crash left
					// by its full reload.
					r := &Reader{Dir: d, FullEvery: 3}
					var last []Entry
					for p := 0; p < 3; p++ {
						entries, reload, err := r.Poll()
						if err != nil {
							t.Fatal(err)
						}
						if reload {
							last = entries
						}
					}
					if len(last) != len(got) {
						t.Fatalf("full reload read %d entries, the volume holds %d", len(last), len(got))
					}
					oldTok := r.Token()
					if _, err := (Dir{FS: w.Host("a"), Path: testPath}).Apply(change); err != nil {
						t.Fatalf("retry: %v", err)
					}
					if _, reload, err := r.Poll(); err != nil || !reload {
						t.Fatalf("the retry's token was not seen: %v %v", reload, err)
					}
					if tok, got := contents(t, d); tok == oldTok || !reflect.DeepEqual(got, want) {
						t.Fatalf("after the retry: %q %v", tok, got)
					}
				})
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
