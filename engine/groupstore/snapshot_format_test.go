package groupstore

import (
	"bytes"
	"errors"
	"testing"
)

func TestSnapshotNames(t *testing.T) {
	cases := []struct {
		name   string
		ok     bool
		offset int64
		epoch  int32
	}{
		{SnapshotName(0, 0), true, 0, 0},
		{SnapshotName(1234, 7), true, 1234, 7},
		{"00000000000000001234-e7.snapshot", true, 1234, 7},
		{"1234-e7.snapshot", false, 0, 0},
		{"00000000000000001234-e07.snapshot", false, 0, 0},
		{"00000000000000001234-e7.log", false, 0, 0},
		{".00000000000000001234-e7.snapshot.tmp-0123456789abcdef", false, 0, 0},
		{"00000000000000001234.snapshot", false, 0, 0},
	}
	for _, tc := range cases {
		off, epoch, ok := parseSnapshotName(tc.name)
		if ok != tc.ok || off != tc.offset || epoch != tc.epoch {
			t.Errorf("parse %q = %d, %d, %v; want %d, %d, %v", tc.name, off, epoch, ok, tc.offset, tc.epoch, tc.ok)
		}
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	recs := []Record{put("a", "1"), {Key: []byte("empty"), Value: []byte{}}, put("b", "2"), tomb("a"), put("c", "3")}
	b := EncodeSnapshot(3, 10, 2, recs)
	got := model{}
	offs := map[string]int64{}
	h, err := decodeSnapshot(b, func(k, v []byte, off int64) {
		if v == nil {
			t.Errorf("value of %q decoded as nil", k)
		}
		got[string(k)] = string(v)
		offs[string(k)] = off
	})
	if err != nil {
		t.Fatal(err)
	}
	want := model{}
	want.apply(recs...)
	if h.Offset != 10 || h.Epoch != 2 || h.Shard != 3 || int(h.Count) != len(want) {
		t.Fatalf("header %+v", h)
	}
	if len(got) != len(want) || got["b"] != "2" || got["c"] != "3" || got["empty"] != "" {
		t.Fatalf("decoded %v, want %v", got, want)
	}
	if !(offs["empty"] < offs["b"] && offs["b"] < offs["c"] && offs["c"] < 10) {
		t.Fatalf("offsets %v do not keep the log order below the snapshot offset", offs)
	}
}

// TestSnapshotTornOrCorrupt: every truncation and every single-bit flip of
// a snapshot is rejected as a whole.
func TestSnapshotTornOrCorrupt(t *testing.T) {
	b := EncodeSnapshot(3, 100, 1, []Record{put("group-a", "meta"), put("offset-a-0", "42")})
	nop := func([]byte, []byte, int64) {}
	for n := 0; n < len(b); n++ {
		if _, err := decodeSnapshot(b[:n], nop); !errors.Is(err, errBadSnapshot) {
			t.Fatalf("torn at %d of %d bytes: %v", n, len(b), err)
		}
	}
	if _, err := decodeSnapshot(append(bytes.Clone(b), 0), nop); !errors.Is(err, errBadSnapshot) {
		t.Fatalf("trailing byte: %v", err)
	}
	for i := range b {
		for bit := 0; bit < 8; bit++ {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			if _, err := decodeSnapshot(c, nop); err == nil {
				t.Fatalf("bit %d of byte %d flipped: accepted", bit, i)
			}
		}
	}
}
