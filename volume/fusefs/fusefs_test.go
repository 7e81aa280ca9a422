package fusefs_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/fusefs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// requireFUSE skips the test unless it can mount: root and /dev/fuse.
func requireFUSE(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("fusefs tests mount FUSE file systems and need root")
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		tb.Skipf("fusefs tests need a usable /dev/fuse: %v", err)
	}
	_ = f.Close()
}

// mount serves root of fsys on a new temporary directory and unmounts it
// when the test ends, even if it failed with files still open.
func mount(tb testing.TB, fsys volume.FS, root string) string {
	tb.Helper()
	requireFUSE(tb)
	return mountAt(tb, tb.TempDir(), fsys, root)
}

// mountAt is mount on a given directory.
func mountAt(tb testing.TB, dir string, fsys volume.FS, root string) string {
	tb.Helper()
	srv, err := fusefs.Mount(dir, fsys, root, fusefs.Options{})
	if err != nil {
		tb.Fatalf("mount: %v", err)
	}
	tb.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			tb.Errorf("unmount %s: %v", dir, err)
			return
		}
		done := make(chan struct{})
		go func() { srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			// Lazily detached with a file still open: the server
			// ends when this process does.
			tb.Logf("fusefs server for %s still busy after unmount", dir)
		}
	})
	return dir
}

func mustWrite(t *testing.T, name string, data []byte, sync bool) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync: %v", err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func mustRead(t *testing.T, name string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %q, want %q", name, got, want)
	}
}

// exercise runs the file operations a broker performs through the mount
// at mnt; backing reads a file of the FS below by its path relative to
// the mounted root.
func exercise(t *testing.T, mnt string, backing func(rel string) ([]byte, error)) {
	p := func(rel string) string { return filepath.Join(mnt, rel) }

	if err := os.Mkdir(p("topic-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p("topic-0"), 0o755); !errors.Is(err, iofs.ErrExist) {
		t.Fatalf("mkdir existing: %v, want EEXIST", err)
	}

	// Create, write, fsync, close; visible below.
	mustWrite(t, p("topic-0/00.log"), []byte("hello"), true)
	mustRead(t, p("topic-0/00.log"), []byte("hello"))
	if got, err := backing("topic-0/00.log"); err != nil || string(got) != "hello" {
		t.Fatalf("backing after write: %q, %v", got, err)
	}

	// Appends at offsets through a read-write handle.
	f, err := os.OpenFile(p("topic-0/00.log"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(" world"), 5); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 11)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if string(buf) != "hello world" {
		t.Fatalf("ReadAt: %q", buf)
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		t.Fatalf("fdatasync: %v", err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 11 {
		t.Fatalf("fstat: %v, %v", fi, err)
	}
	// Truncate through the handle.
	if err := f.Truncate(8); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	mustRead(t, p("topic-0/00.log"), []byte("hello wo"))
	// Truncate by path, and O_TRUNC.
	if err := os.Truncate(p("topic-0/00.log"), 5); err != nil {
		t.Fatal(err)
	}
	mustRead(t, p("topic-0/00.log"), []byte("hello"))
	if err := os.WriteFile(p("topic-0/00.log"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRead(t, p("topic-0/00.log"), []byte("hi"))

	// chmod and utimes are accepted and ignored.
	if err := os.Chmod(p("topic-0/00.log"), 0o600); err != nil {
		t.Fatalf("chmod: %v", err)
	}
	now := time.Now()
	if err := os.Chtimes(p("topic-0/00.log"), now, now); err != nil {
		t.Fatalf("chtimes: %v", err)
	}

	// Exclusive create.
	f, err = os.OpenFile(p("topic-0/lock"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = os.OpenFile(p("topic-0/lock"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if !errors.Is(err, iofs.ErrExist) || !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("second exclusive create: %v, want EEXIST", err)
	}

	// Rename replacing an existing file, then fsync of the directory.
	mustWrite(t, p("topic-0/manifest"), []byte("v1"), true)
	mustRead(t, p("topic-0/manifest"), []byte("v1"))
	mustWrite(t, p("topic-0/manifest.tmp"), []byte("version 2"), true)
	if err := os.Rename(p("topic-0/manifest.tmp"), p("topic-0/manifest")); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(p("topic-0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync dir: %v", err)
	}
	_ = d.Close()
	mustRead(t, p("topic-0/manifest"), []byte("version 2"))
	if _, err := os.Stat(p("topic-0/manifest.tmp")); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("stat renamed-away name: %v", err)
	}
	if got, err := backing("topic-0/manifest"); err != nil || string(got) != "version 2" {
		t.Fatalf("backing after rename: %q, %v", got, err)
	}

	// Readdir.
	ents, err := os.ReadDir(p("topic-0"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"00.log", "lock", "manifest"}; !slices.Equal(names, want) {
		t.Fatalf("readdir: %v, want %v", names, want)
	}

	// Directory rename moves its children.
	if err := os.Rename(p("topic-0"), p("topic-1")); err != nil {
		t.Fatal(err)
	}
	mustRead(t, p("topic-1/manifest"), []byte("version 2"))

	// Errors.
	if _, err := os.Open(p("nope")); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("open missing: %v", err)
	}
	if err := os.Remove(p("topic-1")); !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("rmdir non-empty: %v", err)
	}
	err = unix.Renameat2(unix.AT_FDCWD, p("topic-1/lock"), unix.AT_FDCWD, p("topic-1/lock2"), unix.RENAME_NOREPLACE)
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("RENAME_NOREPLACE: %v, want EINVAL", err)
	}

	// Unlink and rmdir.
	for _, name := range []string{"00.log", "lock", "manifest"} {
		if err := os.Remove(p("topic-1/" + name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(p("topic-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p("topic-1")); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("stat removed dir: %v", err)
	}
	if _, err := backing("topic-1/manifest"); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("backing after remove: %v", err)
	}

	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil || st.Blocks == 0 {
		t.Fatalf("statfs: %+v, %v", st, err)
	}
}

func TestOSBacking(t *testing.T) {
	backing := t.TempDir()
	mnt := mount(t, volume.OS(), backing)
	exercise(t, mnt, func(rel string) ([]byte, error) {
		return os.ReadFile(filepath.Join(backing, rel))
	})
}

func TestMemFSBacking(t *testing.T) {
	m := memfs.New()
	if err := m.MkdirAll("/vol", 0); err != nil {
		t.Fatal(err)
	}
	mnt := mount(t, m, "/vol")
	exercise(t, mnt, func(rel string) ([]byte, error) {
		f, err := m.Open("/vol/" + rel)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }()
		return io.ReadAll(f)
	})
}

// Two mounts of one backing FS are two hosts: each sees the other's
// closed files, renames and removes.
func TestTwoMounts(t *testing.T) {
	backing := t.TempDir()
	a := mount(t, volume.OS(), backing)
	b := mount(t, volume.OS(), backing)

	// B looks the name up first, so its negative answer must not be
	// cached.
	if _, err := os.Stat(filepath.Join(b, "seg")); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("stat before create: %v", err)
	}
	mustWrite(t, filepath.Join(a, "seg"), []byte("one"), false)
	mustRead(t, filepath.Join(b, "seg"), []byte("one"))

	// Same-size overwrite: B must not serve its cached pages.
	mustWrite(t, filepath.Join(a, "seg.tmp"), []byte("two"), false)
	if err := os.Rename(filepath.Join(a, "seg.tmp"), filepath.Join(a, "seg")); err != nil {
		t.Fatal(err)
	}
	mustRead(t, filepath.Join(b, "seg"), []byte("two"))

	// Append on A, B reopens and sees the new size.
	f, err := os.OpenFile(filepath.Join(a, "seg"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("+three"), 3); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	mustRead(t, filepath.Join(b, "seg"), []byte("two+three"))

	if err := os.Remove(filepath.Join(b, "seg")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a, "seg")); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("A stats file B removed: %v", err)
	}
	// A new directory made on B is usable from A.
	if err := os.Mkdir(filepath.Join(b, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(a, "d", "x"), []byte("x"), true)
	ents, err := os.ReadDir(filepath.Join(b, "d"))
	if err != nil || len(ents) != 1 || ents[0].Name() != "x" {
		t.Fatalf("B lists A's new file: %v, %v", ents, err)
	}
}

// Many goroutines (so many FUSE threads) create, write, rename, list and
// remove files at once, on two mounts.
func TestConcurrent(t *testing.T) {
	backing := t.TempDir()
	mnts := []string{mount(t, volume.OS(), backing), mount(t, volume.OS(), backing)}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Go(func() {
			mnt := mnts[g%2]
			dir := filepath.Join(mnt, fmt.Sprintf("p%d", g))
			if err := os.Mkdir(dir, 0o755); err != nil {
				errs <- err
				return
			}
			for i := range 20 {
				tmp := filepath.Join(dir, "tmp")
				data := []byte(fmt.Sprintf("g%d-i%d", g, i))
				if err := os.WriteFile(tmp, data, 0o644); err != nil {
					errs <- err
					return
				}
				final := filepath.Join(mnts[(g+1)%2], fmt.Sprintf("p%d", g), fmt.Sprintf("f%d", i%3))
				if err := os.Rename(tmp, filepath.Join(dir, filepath.Base(final))); err != nil {
					errs <- err
					return
				}
				got, err := os.ReadFile(final) // through the other mount
				if err != nil || !bytes.Equal(got, data) {
					errs <- fmt.Errorf("%s: %q, %v; want %q", final, got, err, data)
					return
				}
				if _, err := os.ReadDir(dir); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Readers on one mount never see a mix of two versions of a file that
// another mount replaces by rename, even when two of them share the
// kernel's cache of the file: a name replaced between lookup and open
// must not be opened under the old inode.
func TestRenameReplaceFromOtherMount(t *testing.T) {
	backing := t.TempDir()
	a := mount(t, volume.OS(), backing)
	b := mount(t, volume.OS(), backing)
	const size = 64 << 10
	version := func(v int) []byte { return bytes.Repeat([]byte{byte(v)}, size) }
	mustWrite(t, filepath.Join(a, "replace"), version(0), true)

	stop := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				data, err := readSmall(filepath.Join(b, "replace"))
				if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ESTALE) {
					continue // tolerated while the name is replaced
				}
				if err != nil {
					errs <- err
					return
				}
				if len(data) != size || !bytes.Equal(data, version(int(data[0]))) {
					errs <- fmt.Errorf("torn read: %d bytes, first %d, last %d", len(data), data[0], data[len(data)-1])
					return
				}
			}
		})
	}
	for v := 1; v <= 100; v++ {
		tmp := filepath.Join(a, "tmp")
		mustWrite(t, tmp, version(v), true)
		if err := os.Rename(tmp, filepath.Join(a, "replace")); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// readSmall reads a file 512 bytes at a time, so that the kernel's cache
// of it is consulted many times while it is open.
func readSmall(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []byte
	buf := make([]byte, 512)
	for {
		n, err := f.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// kaas's Fetch sends segment bytes with sendfile(2): it must work from a
// file on the mount.
func TestSendfileToTCP(t *testing.T) {
	backing := t.TempDir()
	mnt := mount(t, volume.OS(), backing)
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(i * 7)
	}
	mustWrite(t, filepath.Join(mnt, "seg"), data, true)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer func() { _ = c.Close() }()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(mnt, "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()

	// First sendfile(2) by hand, so that a silent fallback to read+write
	// inside io.Copy cannot hide a failure.
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	const head = 4096
	var n int
	var serr error
	if err := raw.Write(func(fd uintptr) bool {
		var off int64
		n, serr = syscall.Sendfile(int(fd), int(f.Fd()), &off, head)
		return serr != syscall.EAGAIN
	}); err != nil {
		t.Fatal(err)
	}
	if serr != nil || n != head {
		t.Fatalf("sendfile from the mount: n=%d, %v", n, serr)
	}
	if _, err := f.Seek(head, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(conn.(*net.TCPConn), f); err != nil {
		t.Fatalf("io.Copy to TCP: %v", err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("received %d bytes, differ from the %d sent", len(b), len(data))
	}
}

// Errors of the FS below reach the caller as errnos: an errno in the chain
// as itself, anything else as EIO; a failed close as close's error.
func TestErrorMapping(t *testing.T) {
	backing := t.TempDir()
	inj := func(op faultfs.Op) faultfs.Action {
		switch {
		case op.Matches(faultfs.OpWriteAt, "nospace"):
			return faultfs.FailBefore(syscall.ENOSPC)
		case op.Matches(faultfs.OpSync, "eio"):
			return faultfs.FailBefore(errors.New("disk on fire"))
		case op.Matches(faultfs.OpClose, "badclose"):
			return faultfs.FailAfter(syscall.EDQUOT)
		}
		return faultfs.Proceed
	}
	mnt := mount(t, faultfs.New(volume.OS(), inj), backing)

	f, err := os.Create(filepath.Join(mnt, "nospace"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write: %v, want ENOSPC", err)
	}
	_ = f.Close()

	f, err = os.Create(filepath.Join(mnt, "eio"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync: %v, want EIO", err)
	}
	_ = f.Close()

	f, err = os.Create(filepath.Join(mnt, "badclose"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("close: %v, want EDQUOT", err)
	}
}

// A descriptor duplicated before close keeps working: the handle reopens
// the file that close flushed.
func TestDupAfterClose(t *testing.T) {
	backing := t.TempDir()
	mnt := mount(t, volume.OS(), backing)
	f, err := os.Create(filepath.Join(mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	fd2, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	g := os.NewFile(uintptr(fd2), "dup")
	if _, err := f.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	mustRead(t, filepath.Join(backing, "f"), []byte("abc"))
	if _, err := g.WriteAt([]byte("def"), 3); err != nil {
		t.Fatalf("write through dup after close: %v", err)
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	mustRead(t, filepath.Join(backing, "f"), []byte("abcdef"))
}

// staleChildEnv makes the test binary a child that mounts the directory
// named by the variable and waits to be killed.
const staleChildEnv = "FUSEFS_TEST_STALE_MOUNT"

// A mount whose server was killed answers ENOTCONN; UnmountStale clears it
// so that a restarted server can mount there again.
func TestUnmountStale(t *testing.T) {
	if dir := os.Getenv(staleChildEnv); dir != "" {
		if _, err := fusefs.Mount(dir, volume.OS(), os.TempDir(), fusefs.Options{}); err != nil {
			fmt.Println("mount failed:", err)
			os.Exit(1)
		}
		fmt.Println("mounted")
		select {}
	}
	requireFUSE(t)
	dir := t.TempDir()
	if err := fusefs.UnmountStale(dir); err != nil {
		t.Fatalf("not mounted: %v", err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestUnmountStale$")
	cmd.Env = append(os.Environ(), staleChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = fusefs.UnmountStale(dir)
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "mounted\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := os.Stat(dir); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("stat of the dead mount: %v, want ENOTCONN", err)
	}

	if err := fusefs.UnmountStale(dir); err != nil {
		t.Fatalf("UnmountStale: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("stat after UnmountStale: %v", err)
	}
	// And the directory can be mounted again.
	mustWrite(t, filepath.Join(mountAt(t, dir, volume.OS(), t.TempDir()), "x"), []byte("x"), false)
}

// BenchmarkSeqWrite64MiB writes 64 MiB in 1 MiB writes, fsyncs and closes,
// once through a mount of volume.OS() and once on the backing directory.
func BenchmarkSeqWrite64MiB(b *testing.B) {
	chunk := bytes.Repeat([]byte{0xab}, 1<<20)
	run := func(b *testing.B, dir string) {
		b.SetBytes(64 << 20)
		for i := 0; b.Loop(); i++ {
			name := filepath.Join(dir, fmt.Sprintf("seg-%d", i))
			f, err := os.Create(name)
			if err != nil {
				b.Fatal(err)
			}
			for range 64 {
				if _, err := f.Write(chunk); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			_ = os.Remove(name)
			b.StartTimer()
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, b.TempDir()) })
	b.Run("fuse", func(b *testing.B) {
		backing := b.TempDir()
		run(b, mount(b, volume.OS(), backing))
	})
}

// BenchmarkAppendFdatasync4KiB appends 4 KiB and fdatasyncs, the way a
// producer's batch reaches a segment, through a mount and directly.
func BenchmarkAppendFdatasync4KiB(b *testing.B) {
	chunk := bytes.Repeat([]byte{0xcd}, 4<<10)
	run := func(b *testing.B, dir string) {
		f, err := os.Create(filepath.Join(dir, "seg"))
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		b.SetBytes(int64(len(chunk)))
		for b.Loop() {
			if _, err := f.Write(chunk); err != nil {
				b.Fatal(err)
			}
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, b.TempDir()) })
	b.Run("fuse", func(b *testing.B) {
		backing := b.TempDir()
		run(b, mount(b, volume.OS(), backing))
	})
}
