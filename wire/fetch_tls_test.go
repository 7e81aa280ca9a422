package wire

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/wire/tlsfiles/tlstest"
)

// tlsPair returns the two ends of a TLS connection over loopback TCP: the
// broker's (server) and the client's, handshake done.
func tlsPair(t testing.TB) (server, client *tls.Conn) {
	t.Helper()
	ca := tlstest.NewCA(t, "root")
	cp, kp := ca.Issue(t, pkix.Name{CommonName: "broker"}, false)
	pair, err := tls.X509KeyPair(cp, kp)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sraw, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	server = tls.Server(sraw, &tls.Config{Certificates: []tls.Certificate{pair}})
	client = tls.Client(raw, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
	errc := make(chan error, 1)
	go func() { errc <- server.Handshake() }()
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close(); _ = client.Close() })
	return server, client
}

// TestWritePiecesTLS: over TLS every range is copied, and the peer gets the
// frame exactly.
func TestWritePiecesTLS(t *testing.T) {
	for _, big := range []int{10, 8 << 20} {
		server, client := tlsPair(t)
		testWritePieces(t, client, server, big)
	}
}

// fetchFrame is a Fetch answer's shape: parts partitions of size bytes
// each, from one segment file, with a few dozen encoded bytes before each.
func fetchFrame(b *testing.B, parts, size int) (buf []byte, cuts []fileCut) {
	f, err := volume.OS().Create(filepath.Join(b.TempDir(), "seg"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	if _, err := f.WriteAt(randBytes(rng, parts*size), 0); err != nil {
		b.Fatal(err)
	}
	buf = []byte{0, 0, 0, 0}
	for i := range parts {
		buf = append(buf, randBytes(rng, 40)...)
		cuts = append(cuts, fileCut{at: len(buf), ref: partlog.Ref{File: f, Pos: int64(i * size), Len: size}})
	}
	return append(buf, 0), cuts
}

// writeEachPiece is how a TLS Fetch answer was written before writeCopied:
// the ranges read into one buffer, then every piece its own Write.
func writeEachPiece(nc net.Conn, buf []byte, cuts []fileCut) error {
	total := len(buf) - 4
	for _, ct := range cuts {
		total += ct.ref.Len
	}
	binary.BigEndian.PutUint32(buf, uint32(total))
	mp := respBufPool.Get().(*[]byte)
	defer respBufPool.Put(mp)
	*mp = slices.Grow((*mp)[:0], total)
	mat := (*mp)[:0]
	pend := net.Buffers{}
	prev := 0
	for _, ct := range cuts {
		pend = append(pend, buf[prev:ct.at])
		prev = ct.at
		at := len(mat)
		mat = mat[:at+ct.ref.Len]
		if err := readFullAt(ct.ref.File, mat[at:], ct.ref.Pos); err != nil {
			return err
		}
		pend = append(pend, mat[at:])
	}
	pend = append(pend, buf[prev:])
	_, err := pend.WriteTo(nc)
	return err
}

// BenchmarkWritePiecesTLS writes Fetch answers over a loopback TLS
// connection piece by piece (as before) and as one buffer (writeCopied),
// for few large partitions and for many small ones.
//
//	go test ./wire -run '^$' -bench WritePiecesTLS -benchtime 2s -count 5
func BenchmarkWritePiecesTLS(b *testing.B) {
	for _, shape := range []struct {
		name        string
		parts, size int
	}{{"16x1MiB", 16, 1 << 20}, {"256x16KiB", 256, 16 << 10}, {"1000x1KiB", 1000, 1 << 10}} {
		for _, how := range []string{"each-piece", "one-buffer"} {
			b.Run(shape.name+"/"+how, func(b *testing.B) {
				buf, cuts := fetchFrame(b, shape.parts, shape.size)
				server, client := tlsPair(b)
				c := &conn{s: &Server{cfg: Config{IdleTimeout: ioTimeout}}, nc: server}
				frame := int64(len(buf))
				for _, ct := range cuts {
					frame += int64(ct.ref.Len)
				}
				read := make(chan error, 1)
				go func() {
					_, err := io.CopyN(io.Discard, client, frame*int64(b.N))
					read <- err
				}()
				b.SetBytes(frame)
				b.ResetTimer()
				for range b.N {
					var err error
					if how == "each-piece" {
						err = writeEachPiece(server, slices.Clone(buf), cuts)
					} else {
						err = c.writePieces(slices.Clone(buf), cuts)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if err := <-read; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
