package partlog

import (
	"bytes"
	"testing"

	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

// TestFinishBatch: a batch built after other bytes with StartBatch and
// FinishBatch validates, carries the header it was given, and equals the
// bytes of the same batch built elsewhere.
func TestFinishBatch(t *testing.T) {
	ref := partlogtest.MakeBatch(3, 10, 1234, 7, 1, 40)
	want, err := ValidateBatch(ref)
	if err != nil {
		t.Fatal(err)
	}
	prefix := []byte("prefix")
	b := StartBatch(append([]byte(nil), prefix...), len(ref))
	if len(b) != len(prefix)+BatchHeaderSize || !bytes.Equal(b[:len(prefix)], prefix) {
		t.Fatalf("StartBatch: %d bytes %q", len(b), b)
	}
	b = append(b, ref[BatchHeaderSize:]...)
	h := want
	h.BatchLength, h.Magic, h.CRC = 0, 0, 0 // FinishBatch's to fill in
	FinishBatch(b[len(prefix):], h)
	got, err := ValidateBatch(b[len(prefix):])
	if err != nil {
		t.Fatalf("ValidateBatch(built): %v", err)
	}
	if got != want || !bytes.Equal(b[len(prefix):], ref) {
		t.Fatalf("built header %+v, want %+v", got, want)
	}
}

// TestStartBatchZeroes: StartBatch's header is zeroed, whatever the reused
// storage held.
func TestStartBatchZeroes(t *testing.T) {
	buf := bytes.Repeat([]byte{0xff}, 2*BatchHeaderSize)
	b := StartBatch(buf[:0], BatchHeaderSize)
	if !bytes.Equal(b, make([]byte, BatchHeaderSize)) {
		t.Fatalf("header %x, want zeroes", b)
	}
}
