package partlog

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/volume"
)

// TestSendfileCleaned: a Ref into a cleaned segment, or past its trailing
// gap, is a range of a file descriptor, and sendfile(2) sends exactly the
// bytes Read returns, as a zero-copy fetch does.
func TestSendfileCleaned(t *testing.T) {
	dir := t.TempDir()
	l := openCleaned(t, volume.OS(), dir)
	defer l.Close()
	out, err := os.Create(filepath.Join(t.TempDir(), "sent"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	for _, off := range []int64{0, 7, 16, 25, 36} {
		want, err := l.Read(off, 1<<20, nil)
		if err != nil || len(want) == 0 {
			t.Fatalf("Read(%d): %d bytes, %v", off, len(want), err)
		}
		ref, err := l.ReadRef(off, 1<<20)
		if err != nil {
			t.Fatalf("ReadRef(%d): %v", off, err)
		}
		fd, ok := ref.File.(volume.Fder)
		if !ok {
			t.Fatalf("ReadRef(%d): a %T, no file descriptor", off, ref.File)
		}
		if err := out.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if _, err := out.Seek(0, 0); err != nil {
			t.Fatal(err)
		}
		pos := ref.Pos
		for sent := 0; sent < ref.Len; {
			n, err := syscall.Sendfile(int(out.Fd()), int(fd.Fd()), &pos, ref.Len-sent)
			if err != nil || n == 0 {
				t.Fatalf("sendfile at %d: %d, %v", pos, n, err)
			}
			sent += n
		}
		ref.Release()
		got, err := os.ReadFile(out.Name())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("offset %d: sendfile sent %d bytes, Read returns %d, and they differ", off, len(got), len(want))
		}
	}
}
