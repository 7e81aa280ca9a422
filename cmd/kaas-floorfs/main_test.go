package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/fusefs"
)

const fuseSuperMagic = 0x65735546

func requireFUSE(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kaas-floorfs tests mount FUSE file systems and need root")
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("kaas-floorfs tests need a usable /dev/fuse: %v", err)
	}
	_ = f.Close()
}

func isFUSE(t *testing.T, dir string) bool {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	return st.Type == fuseSuperMagic
}

// floorProc is run() serving in the test process.
type floorProc struct {
	backing string
	mounts  []string
	control string // http://127.0.0.1:PORT
	stop    func() error
}

// startFloor runs kaas-floorfs with n mounts in temporary directories (or
// the given ones) and stops it, unmounting everything, when the test ends.
func startFloor(t *testing.T, n int, mounts []string, extra ...string) *floorProc {
	t.Helper()
	requireFUSE(t)
	p := &floorProc{backing: t.TempDir(), mounts: mounts}
	for range n - len(mounts) {
		p.mounts = append(p.mounts, t.TempDir())
	}
	args := []string{"--backing", p.backing, "--control", "127.0.0.1:0"}
	for _, m := range p.mounts {
		args = append(args, "--mount", m)
	}
	args = append(args, extra...)

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, args, pw)
		_ = pw.CloseWithError(io.EOF)
		done <- err
	}()
	var stopped bool
	var runErr error
	p.stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = errors.New("run did not return 30s after cancel")
			}
		}
		return runErr
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("kaas-floorfs: %v", err)
		}
	})

	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("kaas-floorfs exited before ready: %v", p.stop())
			}
			if addr, ok := strings.CutPrefix(l, "kaas-floorfs: control "); ok {
				p.control = addr
			}
			if l == "kaas-floorfs: ready" {
				go func() { // drain
					for range lines {
					}
				}()
				if p.control == "" {
					t.Fatal("no control address printed before ready")
				}
				return p
			}
		case <-deadline:
			t.Fatal("kaas-floorfs not ready after 30s")
		}
	}
}

func (p *floorProc) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, p.control+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func (p *floorProc) status(t *testing.T) status {
	t.Helper()
	code, body := p.do(t, http.MethodGet, "/status", "")
	if code != http.StatusOK {
		t.Fatalf("GET /status: %d %s", code, body)
	}
	var st status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("status JSON: %v: %s", err, body)
	}
	return st
}

func writeFile(t *testing.T, name, data string, sync bool) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestControl(t *testing.T) {
	p := startFloor(t, 2, nil)
	m1, m2 := p.mounts[0], p.mounts[1]

	// Two hosts share the volume: a file closed on one is read on the other.
	writeFile(t, filepath.Join(m1, "seg"), "from host1", false)
	if b, err := os.ReadFile(filepath.Join(m2, "seg")); err != nil || string(b) != "from host1" {
		t.Fatalf("host2 reads %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(p.backing, "seg")); err != nil || string(b) != "from host1" {
		t.Fatalf("backing has %q, %v", b, err)
	}

	st := p.status(t)
	if len(st.Mounts) != 2 || st.Mounts[0].Host != "host1" || st.Mounts[1].Dir != m2 {
		t.Fatalf("status: %+v", st)
	}
	if st.Mounts[0].FuseOps["create"] == 0 || st.Mounts[0].VolumeOps == 0 {
		t.Fatalf("status counts no ops of host1: %+v", st.Mounts[0])
	}

	// Faults change at run time.
	if code, body := p.do(t, http.MethodPost, "/faults?mount=1", "Sync:*.log:EIO:1"); code != http.StatusOK {
		t.Fatalf("POST /faults: %d %s", code, body)
	}
	if got := p.status(t).Mounts[0].Faults; got != "Sync:*.log:EIO:1" {
		t.Fatalf("status faults %q", got)
	}
	f, err := os.Create(filepath.Join(m1, "00.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.WriteString("x"); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("first fsync: %v, want EIO", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("second fsync (fault count 1): %v", err)
	}
	// Host 2 has no faults.
	writeFile(t, filepath.Join(m2, "01.log"), "y", true)

	if code, body := p.do(t, http.MethodPost, "/faults?mount=1", "Sync:*.log:EIO"); code != http.StatusOK {
		t.Fatalf("POST /faults: %d %s", code, body)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync under new faults: %v, want EIO", err)
	}
	if code, body := p.do(t, http.MethodDelete, "/faults?mount=1", ""); code != http.StatusOK {
		t.Fatalf("DELETE /faults: %d %s", code, body)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync after DELETE /faults: %v", err)
	}

	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{http.MethodPost, "/faults?mount=3", "Sync:*:EIO", http.StatusNotFound},
		{http.MethodPost, "/faults?mount=1", "Nope:*:EIO", http.StatusBadRequest},
		{http.MethodPost, "/crash?mount=0", "", http.StatusNotFound},
		{http.MethodGet, "/crash?mount=1", "", http.StatusMethodNotAllowed},
	} {
		if code, body := p.do(t, c.method, c.path, c.body); code != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, code, body, c.want)
		}
	}
	if code, body := p.do(t, http.MethodPost, "/crash?mount=1", ""); code != http.StatusNotImplemented && code != http.StatusOK {
		t.Errorf("POST /crash: %d %s", code, body)
	}
	_ = f.Close()

	// Shutdown unmounts both mount points.
	if err := p.stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, m := range p.mounts {
		if isFUSE(t, m) {
			t.Errorf("%s still mounted after shutdown", m)
		}
	}
}

// Faults given on the command line apply from the start.
func TestFaultsFlag(t *testing.T) {
	dir := t.TempDir()
	p := startFloor(t, 2, []string{dir}, "--faults", dir+"=CreateExclusive:lock:EEXIST")
	if _, err := os.OpenFile(filepath.Join(p.mounts[0], "lock"), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("exclusive create under fault: %v, want EEXIST", err)
	}
	if _, err := os.Stat(filepath.Join(p.backing, "lock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("faulted create reached the backing: %v", err)
	}
	f, err := os.OpenFile(filepath.Join(p.mounts[1], "lock"), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("exclusive create on mount 2: %v", err)
	}
	_ = f.Close()
}

// A mount left at a mount point (by a kaas-floorfs that was killed, say)
// is unmounted when kaas-floorfs starts.
func TestLeftoverMount(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	old, err := fusefs.Mount(dir, volume.OS(), t.TempDir(), fusefs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Unmount() })
	p := startFloor(t, 1, []string{dir})
	old.Wait() // the leftover was unmounted
	writeFile(t, filepath.Join(dir, "x"), "new", true)
	if b, err := os.ReadFile(filepath.Join(p.backing, "x")); err != nil || string(b) != "new" {
		t.Fatalf("write through the new mount reached %q, %v", b, err)
	}
}

func TestFlagErrors(t *testing.T) {
	b, x := t.TempDir(), t.TempDir()
	for _, args := range [][]string{
		{"--mount", x},
		{"--backing", b},
		{"--backing", b, "--mount", x, "extra"},
		{"--backing", b, "--mount", x, "--control", "0.0.0.0:7070"},
		{"--backing", b, "--mount", x, "--faults", "3=Sync:*:EIO"},
		{"--backing", b, "--mount", x, "--faults", "Sync:*:EIO"},
		{"--backing", b, "--mount", x, "--faults", "1=Bogus:*:EIO"},
	} {
		err := run(context.Background(), args, io.Discard)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

// A power-cut host loses what it wrote but did not flush; what it synced
// or closed stays, and other hosts keep working.
func TestCrash(t *testing.T) {
	p := startFloor(t, 2, nil)
	m1, m2 := p.mounts[0], p.mounts[1]

	writeFile(t, filepath.Join(m1, "closed"), "closed data", false)
	synced, err := os.Create(filepath.Join(m1, "synced"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = synced.Close() }()
	if _, err := synced.WriteString("synced data"); err != nil {
		t.Fatal(err)
	}
	if err := synced.Sync(); err != nil {
		t.Fatal(err)
	}
	unsynced, err := os.Create(filepath.Join(m1, "unsynced"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unsynced.Close() }()
	if _, err := unsynced.WriteString("lost data"); err != nil {
		t.Fatal(err)
	}
	if d := p.status(t).Mounts[0].DirtyBytes; d < int64(len("lost data")) {
		t.Errorf("dirty bytes of host1 before the crash: %d", d)
	}

	if code, body := p.do(t, http.MethodPost, "/crash?mount=1", ""); code != http.StatusOK {
		t.Fatalf("POST /crash: %d %s", code, body)
	}
	if _, err := unsynced.WriteString("more"); err == nil {
		t.Error("write through a file open across the crash succeeded")
	}
	if d := p.status(t).Mounts[0].DirtyBytes; d != 0 {
		t.Errorf("dirty bytes of host1 after the crash: %d", d)
	}

	for name, want := range map[string]string{"closed": "closed data", "synced": "synced data"} {
		if b, err := os.ReadFile(filepath.Join(m2, name)); err != nil || string(b) != want {
			t.Errorf("host2 reads %s: %q, %v; want %q", name, b, err, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(m2, "unsynced")); err == nil && len(b) > 0 {
		t.Errorf("host2 reads the unsynced file: %q; want it empty or gone", b)
	}
	if b, err := os.ReadFile(filepath.Join(p.backing, "unsynced")); err == nil && len(b) > 0 {
		t.Errorf("backing has the unsynced data: %q", b)
	}
}
