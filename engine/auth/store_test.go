package auth

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

const testCluster = "data/__cluster"

// TestCredentialStore: save, load, list and delete, for names that need
// escaping and one too long for a file name.
func TestCredentialStore(t *testing.T) {
	fsys := memfs.New()
	long := strings.Repeat("u", 300)
	var saved []Credential
	for _, user := range []string{"alice", "a/b,c=d", long} {
		for _, m := range Mechanisms {
			c, err := m.FromPassword(user, "pw", DefaultIterations)
			if err != nil {
				t.Fatal(err)
			}
			if err := SaveCredential(fsys, testCluster, c); err != nil {
				t.Fatal(err)
			}
			saved = append(saved, c)
			got, ok, err := LoadCredential(fsys, testCluster, user, m)
			if err != nil || !ok || !reflect.DeepEqual(got, c) {
				t.Fatalf("load %s %s: %+v, %v, %v", user[:min(len(user), 10)], m.Name, got, ok, err)
			}
		}
	}
	list, err := ListCredentials(fsys, testCluster)
	if err != nil || len(list) != len(saved) {
		t.Fatalf("list: %d, %v; want %d", len(list), err, len(saved))
	}
	if _, ok, err := LoadCredential(fsys, testCluster, "nobody", ScramSHA256); ok || err != nil {
		t.Fatalf("unknown user: %v, %v", ok, err)
	}
	if existed, err := DeleteCredential(fsys, testCluster, "alice", ScramSHA256); !existed || err != nil {
		t.Fatalf("delete: %v, %v", existed, err)
	}
	if existed, err := DeleteCredential(fsys, testCluster, "alice", ScramSHA256); existed || err != nil {
		t.Fatalf("delete again: %v, %v", existed, err)
	}
	if _, ok, _ := LoadCredential(fsys, testCluster, "alice", ScramSHA256); ok {
		t.Fatal("deleted credential still loads")
	}
	if _, ok, _ := LoadCredential(fsys, testCluster, "alice", ScramSHA512); !ok {
		t.Fatal("the other mechanism's credential went with it")
	}
	bad := saved[0]
	bad.Iterations = 10
	if err := SaveCredential(fsys, testCluster, bad); err == nil {
		t.Fatal("a credential of 10 iterations was saved")
	}
}

// TestCredentialStoreCrash: a crash at any volume operation of replacing a
// credential leaves the old one or the new one, whole, and never a file
// that a listing trips on.
func TestCredentialStoreCrash(t *testing.T) {
	old, _ := ScramSHA512.FromPassword("alice", "old", DefaultIterations)
	next, _ := ScramSHA512.FromPassword("alice", "new", DefaultIterations)
	setup := func() *memfs.FS {
		mem := memfs.New()
		if err := SaveCredential(mem, testCluster, old); err != nil {
			t.Fatal(err)
		}
		return mem
	}
	clean := faultfs.New(setup(), nil)
	if err := SaveCredential(clean, testCluster, next); err != nil {
		t.Fatal(err)
	}
	n := clean.MutatingOps()
	if n == 0 {
		t.Fatal("no mutating operations")
	}
	for i := 0; i < n; i++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("op%d-after=%v", i, after), func(t *testing.T) {
				mem := setup()
				ffs := faultfs.New(mem, faultfs.CrashAtMutating(i, after))
				if err := SaveCredential(ffs, testCluster, next); err == nil {
					t.Fatal("the save reported success although the volume crashed")
				}
				fsys := mem.CrashClone()
				got, ok, err := LoadCredential(fsys, testCluster, "alice", ScramSHA512)
				if err != nil || !ok || (!reflect.DeepEqual(got, old) && !reflect.DeepEqual(got, next)) {
					t.Fatalf("after the crash: %+v, %v, %v; want the old or the new credential", got, ok, err)
				}
				if list, err := ListCredentials(fsys, testCluster); err != nil || len(list) != 1 {
					t.Fatalf("listing after the crash: %d, %v", len(list), err)
				}
			})
		}
	}
}
