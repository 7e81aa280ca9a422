package wire

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// pieceCase builds a frame of encoded bytes with file ranges from an OS
// file (sendfile on TCP) and a memfs file (always copied) spliced in, and
// the bytes the peer must receive.
func pieceCase(t *testing.T, bigRef int) (buf []byte, cuts []fileCut, want []byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, uint64(bigRef)))
	osf, err := volume.OS().Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = osf.Close() })
	mfs := memfs.New()
	mf, err := mfs.Create("seg")
	if err != nil {
		t.Fatal(err)
	}
	data := randBytes(rng, bigRef+5000)
	for _, f := range []volume.File{osf, mf} {
		if _, err := f.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
	}
	buf = []byte{0, 0, 0, 0}
	var body []byte
	ranges := []struct {
		f        volume.File
		pos, len int
	}{{osf, 7, bigRef}, {mf, 100, 3000}, {osf, 1, 1}, {mf, 0, bigRef}, {osf, 4000, 1000}}
	for i, r := range ranges {
		head := randBytes(rng, 1+i*3)
		buf = append(buf, head...)
		body = append(body, head...)
		cuts = append(cuts, fileCut{at: len(buf), ref: partlog.Ref{File: r.f, Pos: int64(r.pos), Len: r.len}})
		body = append(body, data[r.pos:r.pos+r.len]...)
	}
	tail := []byte("tail")
	buf = append(buf, tail...)
	body = append(body, tail...)
	want = binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return buf, cuts, append(want, body...)
}

func testWritePieces(t *testing.T, client, server net.Conn, bigRef int) {
	buf, cuts, want := pieceCase(t, bigRef)
	c := &conn{s: &Server{cfg: Config{IdleTimeout: ioTimeout}}, nc: server}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(want))
		_ = client.SetReadDeadline(time.Now().Add(ioTimeout))
		// Small reads, so the writer fills the socket buffer and waits.
		n := 0
		for n < len(b) {
			m, err := client.Read(b[n:min(len(b), n+4096)])
			n += m
			if err != nil {
				break
			}
		}
		got <- b[:n]
	}()
	if err := c.writePieces(buf, cuts); err != nil {
		t.Fatalf("writePieces: %v", err)
	}
	if g := <-got; !bytes.Equal(g, want) {
		t.Fatalf("peer got %d bytes, want %d (equal prefix %d)", len(g), len(want), commonPrefix(g, want))
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func TestWritePiecesTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, big := range []int{10, 8 << 20} {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		testWritePieces(t, client, server, big)
		_ = client.Close()
		_ = server.Close()
	}
}

// TestWritePiecesPipe: a connection without a socket copies every range.
func TestWritePiecesPipe(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	testWritePieces(t, client, server, 100000)
}

// TestWritePiecesPeerGone: a peer that closes mid-frame makes the write
// fail (the caller then closes the connection) rather than hang.
func TestWritePiecesPeerGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	buf, cuts, _ := pieceCase(t, 16<<20)
	c := &conn{s: &Server{cfg: Config{IdleTimeout: ioTimeout}}, nc: server}
	go func() {
		_, _ = io.ReadFull(client, make([]byte, 1<<20))
		_ = client.Close()
	}()
	if err := c.writePieces(buf, cuts); err == nil {
		t.Fatal("writePieces to a closed peer succeeded")
	}
}
