package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// TestWithFaultsSpec checks that the broker passes its spec to
// faultfs.ParseSpec (whose own tests cover the syntax): no spec leaves the
// volume alone, a bad one is refused, a good one wraps the volume.
func TestWithFaultsSpec(t *testing.T) {
	m := memfs.New()
	if fsys, err := withFaults(m, ""); err != nil || fsys != volume.FS(m) {
		t.Fatalf("empty spec: %v, %v; want the volume itself", fsys, err)
	}
	for _, spec := range []string{"Remove", "Remove:/x:EWHAT", "Remove:/x:EIO,", "Sync:/x:DELAY=soon"} {
		if _, err := withFaults(m, spec); err == nil {
			t.Errorf("%q accepted", spec)
		}
	}
	fsys, err := withFaults(m, "Remove:/x:EBUSY,Sync:*.log:DELAY=1ns,Rename:/y:STALL=1ns:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fsys.(*faultfs.FS); !ok {
		t.Fatalf("got %T, want a *faultfs.FS", fsys)
	}
	if err := fsys.Remove("/x"); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("remove: %v, want EBUSY", err)
	}
}

// TestFaultPicksMatches runs the same sequence of removes under one fault
// and checks which of them were faulted, and how.
func TestFaultPicksMatches(t *testing.T) {
	const n = 6
	cases := []struct {
		spec string
		// want[i] describes remove i of /d/0 .. /d/5 (and one of /e/x
		// after each, which must never be faulted): "ok", "EBUSY" (failed,
		// not applied), "EBUSY+applied", "kill before", "kill after".
		want [n]string
	}{
		{"Remove:/d/*:EBUSY", [n]string{"EBUSY", "EBUSY", "EBUSY", "EBUSY", "EBUSY", "EBUSY"}},
		{"Remove:/d/*:EBUSY:2", [n]string{"EBUSY", "EBUSY", "ok", "ok", "ok", "ok"}},
		{"Remove:/d/*:EBUSY:2:after", [n]string{"EBUSY+applied", "EBUSY+applied", "ok", "ok", "ok", "ok"}},
		{"Remove:/d/*:EBUSY:1@3", [n]string{"ok", "ok", "EBUSY", "ok", "ok", "ok"}},
		{"Remove:/d/*:EBUSY:2@4", [n]string{"ok", "ok", "ok", "EBUSY", "EBUSY", "ok"}},
		{"Remove:/d/*:EBUSY:0@5", [n]string{"ok", "ok", "ok", "ok", "EBUSY", "EBUSY"}},
		{"Remove:/d/*:KILL", [n]string{"kill before", "kill before", "kill before", "kill before", "kill before", "kill before"}},
		{"Remove:/d/*:KILL:1", [n]string{"kill before", "ok", "ok", "ok", "ok", "ok"}},
		{"Remove:/d/*:KILL:1@2", [n]string{"ok", "kill before", "ok", "ok", "ok", "ok"}},
		{"Remove:/d/*:KILL:1@2:before", [n]string{"ok", "kill before", "ok", "ok", "ok", "ok"}},
		{"Remove:/d/*:KILL:1@6:after", [n]string{"ok", "ok", "ok", "ok", "ok", "kill after"}},
		// Two faults count their matches independently.
		{"Remove:/d/*:KILL:1@2:after,Remove:/d/*:EIO:1@4", [n]string{"ok", "kill after", "ok", "EIO", "ok", "ok"}},
		{"Remove:/nothing:KILL", [n]string{"ok", "ok", "ok", "ok", "ok", "ok"}},
		// Armed by the 3rd remove under /e (which follows /d/2): counting
		// starts at /d/3.
		{"Remove:/e/*:3>Remove:/d/*:EBUSY:1", [n]string{"ok", "ok", "ok", "EBUSY", "ok", "ok"}},
		{"Remove:/e/*:3>Remove:/d/*:EBUSY:1@2", [n]string{"ok", "ok", "ok", "ok", "EBUSY", "ok"}},
		// An arming op that is also a match is not counted as one.
		{"Remove:/d/1>Remove:/d/*:KILL:1:after", [n]string{"ok", "ok", "kill after", "ok", "ok", "ok"}},
		// Arming steps in turn: /e/1 is seen, then the 2nd /d/* after it
		// (/d/3), and the fault counts from /d/4.
		{"Remove:/e/1>Remove:/d/*:2>Remove:/d/*:EBUSY:1", [n]string{"ok", "ok", "ok", "ok", "EBUSY", "ok"}},
		// Steps out of order never arm: /d/0 comes before /e/3.
		{"Remove:/e/3>Remove:/d/0>Remove:/d/*:EBUSY", [n]string{"ok", "ok", "ok", "ok", "ok", "ok"}},
	}
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			m := memfs.New()
			for _, d := range []string{"/d", "/e"} {
				if err := m.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for i := range n {
				for _, p := range []string{fmt.Sprintf("/d/%d", i), fmt.Sprintf("/e/%d", i)} {
					if err := volume.WriteFileAtomic(m, p, []byte("x")); err != nil {
						t.Fatal(err)
					}
				}
			}
			// The kill records when it was called and whether the op had
			// been applied by then. In the test it returns, and the op
			// then runs (or ran) normally.
			var killed []string
			fsys, err := withFaultsKill(m, tc.spec, func(op faultfs.Op, when string) {
				_, serr := m.Stat(op.Path)
				killed = append(killed, fmt.Sprintf("kill %s applied=%v", when, errors.Is(serr, fs.ErrNotExist)))
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				p := fmt.Sprintf("/d/%d", i)
				killed = nil
				err := fsys.Remove(p)
				_, serr := m.Stat(p)
				applied := errors.Is(serr, fs.ErrNotExist)
				var got string
				switch {
				case len(killed) > 1:
					t.Fatalf("remove %d: killed %d times", i, len(killed))
				case len(killed) == 1 && err == nil && applied:
					got = killed[0]
				case len(killed) == 1:
					got = fmt.Sprintf("%s, then err=%v applied=%v", killed[0], err, applied)
				case err == nil && applied:
					got = "ok"
				case errors.Is(err, syscall.EBUSY) && !applied:
					got = "EBUSY"
				case errors.Is(err, syscall.EBUSY) && applied:
					got = "EBUSY+applied"
				case errors.Is(err, syscall.EIO) && !applied:
					got = "EIO"
				default:
					got = fmt.Sprintf("err=%v applied=%v", err, applied)
				}
				want := tc.want[i]
				switch want {
				case "kill before":
					want = "kill before applied=false"
				case "kill after":
					want = "kill after applied=true"
				}
				if got != want {
					t.Errorf("remove %d: %s, want %s", i, got, want)
				}
				// Other paths are never faulted and do not count.
				killed = nil
				if err := fsys.Remove(fmt.Sprintf("/e/%d", i)); err != nil || len(killed) != 0 {
					t.Errorf("remove /e/%d: %v, killed %v", i, err, killed)
				}
			}
		})
	}
}

// TestKillAtAssignmentWriteSteps kills (with a recording kill) at each step
// of the second of three volume.WriteFileAtomic calls on one name, the way
// the cluster specs target the controller's assignment writes, and checks
// that exactly that step of exactly that write was hit, before or after it
// was applied.
func TestKillAtAssignmentWriteSteps(t *testing.T) {
	const dir, name = "/c", "/c/assignment.json"
	tmps := "/c/.assignment.json.tmp-*"
	// Each step is picked by its path and the 2nd match, except the
	// directory sync, which shares its path with the syncs of other files
	// in the directory: it is armed by the 2nd rename instead.
	steps := []struct {
		op, spec string
		kind     faultfs.OpKind
	}{
		{"CreateExclusive", "CreateExclusive:" + tmps + ":KILL:1@2", faultfs.OpCreateExclusive},
		{"Write", "Write:" + tmps + ":KILL:1@2", faultfs.OpWrite},
		{"Sync", "Sync:" + tmps + ":KILL:1@2", faultfs.OpSync},
		{"Close", "Close:" + tmps + ":KILL:1@2", faultfs.OpClose},
		{"Rename", "Rename:" + name + ":KILL:1@2", faultfs.OpRename},
		{"SyncDir", "Rename:" + name + ":2>SyncDir:" + dir + ":KILL:1", faultfs.OpSyncDir},
	}
	for _, st := range steps {
		for _, when := range []string{"before", "after"} {
			t.Run(st.op+"/"+when, func(t *testing.T) {
				m := memfs.New()
				if err := m.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				var hits []faultfs.Op
				var hitWhen []string
				write := 0
				var hitWrite []int
				fsys, err := withFaultsKill(m, st.spec+":"+when, func(op faultfs.Op, w string) {
					hits, hitWhen, hitWrite = append(hits, op), append(hitWhen, w), append(hitWrite, write)
				})
				if err != nil {
					t.Fatal(err)
				}
				for write = 1; write <= 3; write++ {
					if err := volume.WriteFileAtomic(fsys, name, []byte(fmt.Sprintf(`{"n":%d}`, write))); err != nil {
						t.Fatalf("write %d: %v", write, err)
					}
					// Other files in the same directory: more syncs of it.
					if err := volume.MkdirAllSync(fsys, fmt.Sprintf("%s/sub%d", dir, write)); err != nil {
						t.Fatal(err)
					}
					if err := volume.WriteFileAtomic(fsys, dir+"/other.json", []byte("{}")); err != nil {
						t.Fatal(err)
					}
				}
				if len(hits) != 1 || hits[0].Kind != st.kind || hitWhen[0] != when || hitWrite[0] != 2 {
					t.Fatalf("kills %v %v in writes %v, want one %s %s in write 2", hits, hitWhen, hitWrite, when, st.kind)
				}
			})
		}
	}
}

// TestKillSelf runs this test binary again with a KILL fault on a real
// directory and checks that the process died of SIGKILL at the right
// operation, having announced it, with the operation applied or not.
func TestKillSelf(t *testing.T) {
	if dir := os.Getenv("KAAS_TEST_KILL_SELF_DIR"); dir != "" {
		fsys, err := withFaults(volume.OS(), os.Getenv("KAAS_TEST_KILL_SELF_FAULT"))
		if err != nil {
			fmt.Println(err)
			os.Exit(3)
		}
		for i := range 3 {
			if err := volume.WriteFileAtomic(fsys, filepath.Join(dir, "a.json"), []byte(strconv.Itoa(i))); err != nil {
				fmt.Println(err)
				os.Exit(3)
			}
		}
		os.Exit(0) // not killed
	}
	for _, tc := range []struct {
		when string
		want string // a.json afterwards
	}{{"before", "0"}, {"after", "1"}} {
		t.Run(tc.when, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestKillSelf$")
			cmd.Env = append(os.Environ(), "KAAS_TEST_KILL_SELF_DIR="+dir,
				"KAAS_TEST_KILL_SELF_FAULT=Rename:"+filepath.Join(dir, "a.json")+":KILL:1@2:"+tc.when)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("exit %v, want death by SIGKILL; output:\n%s", err, out)
			}
			if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("exit %v, want death by SIGKILL; output:\n%s", err, out)
			}
			if want := "kaas-broker: injected fault: KILL " + tc.when + " #"; !strings.Contains(string(out), want) {
				t.Fatalf("output %q does not announce %q", out, want)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "a.json")); err != nil || string(b) != tc.want {
				t.Fatalf("a.json = %q, %v; want %q", b, err, tc.want)
			}
		})
	}
}
