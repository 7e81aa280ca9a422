package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	rt "github.com/kaas-dev/kaas/volume/records/recordstest"
)

// withLastDelta sets a batch's last offset delta, as the log cleaner
// keeps it when it drops records, and fixes the CRC.
func withLastDelta(b []byte, last int32) []byte {
	binary.BigEndian.PutUint32(b[OffLastOffsetDelta:], uint32(last))
	rt.FixCRC(b)
	return b
}

// sparse makes records with the given offset deltas, timestamp deltas
// equal to them, values "v<delta>".
func sparse(deltas ...int32) []rt.Record {
	out := make([]rt.Record, len(deltas))
	for i, d := range deltas {
		out[i] = rt.Record{TimestampDelta: int64(d), OffsetDelta: d, Key: []byte{'k', byte(d)}, Value: fmt.Appendf(nil, "v%d", d)}
	}
	return out
}

// marker is a commit marker record at offset delta d.
func marker(d int32) rt.Record {
	return rt.Record{OffsetDelta: d, Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 7}}
}

// storedCase is a batch as it may lie in a cleaned log, and what the
// stored and the produce validation say of it.
type storedCase struct {
	name   string
	batch  rt.Batch
	last   int32 // the header's last offset delta
	stored error // nil: accepted
	strict error
}

func storedCases(c rt.Codec) []storedCase {
	empty := func(attrs int16, codec rt.Codec) rt.Batch {
		return rt.Batch{Codec: codec, Attributes: attrs, Payload: []byte{}, NumRecords: rt.Int32(0)}
	}
	horizon := sparse(2, 5)
	horizon[0].TimestampDelta, horizon[1].TimestampDelta = -500, -100 // rebased on the horizon
	return []storedCase{
		{name: "dense", batch: rt.Batch{Codec: c, Records: sparse(0, 1, 2)}, last: 2},
		{name: "sparse deltas", batch: rt.Batch{Codec: c, Records: sparse(1, 3, 7)}, last: 9, strict: ErrInvalid},
		{name: "only the last offset", batch: rt.Batch{Codec: c, Records: sparse(4)}, last: 4, strict: ErrInvalid},
		{name: "one record, not the last offset", batch: rt.Batch{Codec: c, Records: sparse(0)}, last: 4, strict: ErrInvalid},
		{name: "empty, header only", batch: empty(0, rt.None), last: 4, strict: ErrInvalid},
		{name: "empty, header only, a codec bit", batch: empty(0, c), last: 0, strict: ErrInvalid},
		{name: "empty control batch", batch: empty(0x30, rt.None), last: 0, strict: ErrInvalid},
		{name: "empty, a stream of nothing", batch: rt.Batch{Codec: c, Records: []rt.Record{}}, last: 3, strict: ErrInvalid},
		{name: "control marker alone", batch: rt.Batch{Codec: c, Attributes: 0x30, Records: []rt.Record{marker(0)}}, last: 0},
		{name: "delete horizon", batch: rt.Batch{Codec: c, Attributes: AttrDeleteHorizon, Records: horizon, FirstTS: 5000, MaxTS: rt.Int64(4900)}, last: 6, strict: ErrInvalid},
		{name: "delete horizon, dense", batch: rt.Batch{Codec: c, Attributes: AttrDeleteHorizon, Records: sparse(0, 1), FirstTS: 5000}, last: 1},
		{name: "deltas not increasing", batch: rt.Batch{Codec: c, Records: sparse(1, 1)}, last: 3, stored: ErrInvalid, strict: ErrInvalid},
		{name: "deltas going back", batch: rt.Batch{Codec: c, Records: sparse(3, 2)}, last: 3, stored: ErrInvalid, strict: ErrInvalid},
		{name: "delta past the last", batch: rt.Batch{Codec: c, Records: sparse(1, 5)}, last: 4, stored: ErrInvalid, strict: ErrInvalid},
		{name: "more records than offsets", batch: rt.Batch{Codec: c, Records: sparse(0, 1, 2)}, last: 1, stored: ErrInvalid, strict: ErrInvalid},
		{name: "negative count", batch: rt.Batch{Codec: c, Payload: []byte{}, NumRecords: rt.Int32(-1)}, last: 0, stored: ErrInvalid, strict: ErrInvalid},
		{name: "negative last delta", batch: empty(0, rt.None), last: -1, stored: ErrInvalid, strict: ErrInvalid},
		{name: "control batch of two", batch: rt.Batch{Codec: c, Attributes: 0x30, Records: []rt.Record{marker(0), marker(1)}}, last: 1, stored: ErrInvalid, strict: ErrInvalid},
		{name: "fewer records than counted", batch: rt.Batch{Codec: c, Records: sparse(1, 3), NumRecords: rt.Int32(3)}, last: 5, stored: ErrInvalid, strict: ErrInvalid},
		{name: "more records than counted", batch: rt.Batch{Codec: c, Records: sparse(1, 3), NumRecords: rt.Int32(1)}, last: 5, stored: ErrInvalid, strict: ErrInvalid},
	}
}

// TestValidateStored: the stored mode accepts what a cleaned log holds and
// refuses what no log may hold; the produce mode stays as strict as before.
func TestValidateStored(t *testing.T) {
	v := Acquire()
	defer v.Release()
	for _, c := range rt.Codecs {
		for _, tc := range storedCases(c) {
			b := withLastDelta(tc.batch.Bytes(), tc.last)
			for _, mode := range []struct {
				name     string
				validate func([]byte, int) error
				want     error
			}{{"stored", v.ValidateStored, tc.stored}, {"produce", v.Validate, tc.strict}} {
				err := mode.validate(b, testLimit)
				if !errors.Is(err, mode.want) { // errors.Is(err, nil): err is nil
					t.Errorf("%s/%s, %s mode: %v, want %v", c, tc.name, mode.name, err, mode.want)
				}
			}
			if tc.stored == nil {
				if err := franzDecodesStored(b); err != nil {
					t.Errorf("%s/%s: franz-go cannot decode a batch the stored mode accepts: %v", c, tc.name, err)
				}
			}
		}
	}
}

// TestValidateStoredFixtures: every batch real clients write is a valid
// stored batch too, and a warm Validator checks one with no allocation.
func TestValidateStoredFixtures(t *testing.T) {
	v := new(Validator)
	for name, b := range validBatches(t) {
		if err := v.ValidateStored(b, testLimit); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if raceEnabled {
		return // the race detector's sync.Pool drops items
	}
	for _, c := range rt.Codecs {
		b := withLastDelta(rt.Batch{Codec: c, Records: sparse(1, 4, 9, 30)}.Bytes(), 40)
		if n := testing.AllocsPerRun(20, func() { _ = v.ValidateStored(b, testLimit) }); n != 0 {
			t.Errorf("%s: %.1f allocations per stored batch", c, n)
		}
	}
}

// TestEachStored: records are reported at their real offset deltas and
// timestamps, a delete horizon's rebased deltas included.
func TestEachStored(t *testing.T) {
	v := Acquire()
	defer v.Release()
	recs := sparse(2, 5, 9)
	recs[0].TimestampDelta, recs[1].TimestampDelta, recs[2].TimestampDelta = -300, -200, 50
	for _, c := range rt.Codecs {
		b := withLastDelta(rt.Batch{Codec: c, Attributes: AttrDeleteHorizon, Records: recs, FirstTS: 10_000, MaxTS: rt.Int64(10_050)}.Bytes(), 11)
		type rec struct {
			delta int32
			ts    int64
		}
		var got []rec
		if err := v.EachStored(b, testLimit, func(d int32, ts int64) bool { got = append(got, rec{d, ts}); return true }); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		want := []rec{{2, 9700}, {5, 9800}, {9, 10_050}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: records %v, want %v", c, got, want)
		}
	}
}

// TestFirstAtOrAfterStored: ListOffsets by timestamp answers a cleaned
// batch's real record, never its base offset by default.
func TestFirstAtOrAfterStored(t *testing.T) {
	v := Acquire()
	defer v.Release()
	tests := []struct {
		name  string
		batch []byte
		ts    int64
		delta int32
		at    int64
		ok    bool
	}{
		{"sparse, first", withLastDelta(rt.Batch{Records: sparse(3, 6), FirstTS: 1000}.Bytes(), 8), 0, 3, 1003, true},
		{"sparse, second", withLastDelta(rt.Batch{Records: sparse(3, 6), FirstTS: 1000}.Bytes(), 8), 1004, 6, 1006, true},
		{"sparse, none", withLastDelta(rt.Batch{Records: sparse(3, 6), FirstTS: 1000}.Bytes(), 8), 1007, 0, 0, false},
		{"one record, not at the base", withLastDelta(rt.Batch{Records: sparse(4), FirstTS: 1000}.Bytes(), 4), 0, 4, 1004, true},
		{"empty", withLastDelta(rt.Batch{Payload: []byte{}, NumRecords: rt.Int32(0), MaxTS: rt.Int64(2000)}.Bytes(), 4), 0, 0, 0, false},
		{"log append time, sparse", withLastDelta(rt.Batch{Attributes: AttrLogAppendTime, Records: sparse(2, 3), MaxTS: rt.Int64(7000)}.Bytes(), 5), 6000, 2, 7000, true},
		{"log append time, empty", withLastDelta(rt.Batch{Attributes: AttrLogAppendTime, Payload: []byte{}, NumRecords: rt.Int32(0), MaxTS: rt.Int64(7000)}.Bytes(), 5), 6000, 0, 0, false},
	}
	for _, tc := range tests {
		d, at, ok, err := v.FirstAtOrAfter(tc.batch, tc.ts, testLimit)
		if err != nil || ok != tc.ok || (ok && (d != tc.delta || at != tc.at)) {
			t.Errorf("%s: FirstAtOrAfter(%d) = %d, %d, %v, %v; want %d, %d, %v", tc.name, tc.ts, d, at, ok, err, tc.delta, tc.at, tc.ok)
		}
	}
}

// FuzzValidateStored: the stored mode never panics, what it accepts a
// franz-go consumer decodes in full, and it accepts every batch the
// produce mode accepts. The input is a records section, a codec id, a
// record count and a last offset delta, wrapped in a valid header.
func FuzzValidateStored(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s.payload, s.codec, s.count, s.count-1, s.attrs)
	}
	for _, c := range rt.Codecs {
		for _, tc := range storedCases(c) {
			b := withLastDelta(tc.batch.Bytes(), tc.last)
			f.Add(b[BatchHeaderSize:], b[22]&7, int32(binary.BigEndian.Uint32(b[OffNumRecords:])), tc.last, b[22]&0x78)
		}
	}
	v := new(Validator)
	f.Fuzz(func(t *testing.T, payload []byte, codec uint8, count, last int32, attrs uint8) {
		bt := rt.Batch{Payload: payload, NumRecords: &count, CodecID: rt.Int16(int16(codec & 7)), Attributes: int16(attrs) & 0x78}
		batch := withLastDelta(bt.Bytes(), last)
		err := v.ValidateStored(batch, fuzzLimit)
		if err == nil {
			if ferr := franzDecodesStored(batch); ferr != nil {
				t.Fatalf("accepted, but franz-go cannot decode it: %v", ferr)
			}
		} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("an error of no kind: %v", err)
		}
		if serr := v.Validate(batch, fuzzLimit); serr == nil && err != nil {
			t.Fatalf("the produce mode accepts what the stored mode refuses: %v", err)
		}
	})
}
