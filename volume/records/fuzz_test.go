package records

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	rt "github.com/kaas-dev/kaas/volume/records/recordstest"
)

// franzDecodes decodes batch the way a franz-go consumer does
// (rt.FranzDecode).
func franzDecodes(batch []byte) error { return rt.FranzDecode(batch, false) }

// franzDecodesStored is franzDecodes of a stored batch, which the log
// cleaner may have left sparse or empty.
func franzDecodesStored(batch []byte) error { return rt.FranzDecode(batch, true) }

// fuzzLimit is the decompression bound of the fuzz target.
const fuzzLimit = 1 << 20

// FuzzValidate: Validate never panics, and whatever it accepts a franz-go
// consumer decodes in full. The input is a records section (compressed or
// not), a codec id and a record count, wrapped in a valid header.
func FuzzValidate(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s.payload, s.codec, s.count, s.attrs)
	}
	v := new(Validator)
	f.Fuzz(func(t *testing.T, payload []byte, codec uint8, count int32, attrs uint8) {
		bt := rt.Batch{Payload: payload, NumRecords: &count, CodecID: rt.Int16(int16(codec & 7)), Attributes: int16(attrs) & 0x38}
		batch := bt.Bytes()
		err := v.Validate(batch, fuzzLimit)
		if err == nil {
			if ferr := franzDecodes(batch); ferr != nil {
				t.Fatalf("accepted, but franz-go cannot decode it: %v", ferr)
			}
			return
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("an error of no kind: %v", err)
		}
	})
}

type fuzzSeed struct {
	payload []byte
	codec   uint8
	count   int32
	attrs   uint8
}

// fuzzSeeds are valid and poison records sections of every codec (the
// same as the files under testdata/fuzz/FuzzValidate).
func fuzzSeeds() []fuzzSeed {
	var out []fuzzSeed
	add := func(b []byte) {
		out = append(out, fuzzSeed{payload: b[61:], codec: b[22] & 7, count: int32(binary.BigEndian.Uint32(b[57:])), attrs: b[22] & 0x38})
	}
	for _, c := range rt.Codecs {
		add(rt.Batch{Codec: c, Records: rt.Values("a", "bb", "")}.Bytes())
		recs := rt.Text(5, 40)
		recs[0].Headers = []kmsg.Header{{Key: "k", Value: []byte("v")}}
		add(rt.Batch{Codec: c, Records: recs}.Bytes())
		add(rt.Batch{Codec: c, Attributes: 0x30, Records: []rt.Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 7}}}}.Bytes())
	}
	for _, p := range rt.Poison(4 << 10) {
		if len(p.Batch) < 4<<10 {
			add(p.Batch)
		}
	}
	return out
}

var writeSeeds = flag.Bool("write-seeds", false, "write fuzzSeeds as testdata/fuzz/FuzzValidate files")

// TestWriteFuzzSeeds writes the seeds as corpus files when asked
// (go test -run TestWriteFuzzSeeds -write-seeds), so the committed corpus
// holds them even where f.Add's are not run.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*writeSeeds {
		t.Skip("-write-seeds not given")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzValidate")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range fuzzSeeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbyte(%q)\nint32(%d)\nbyte(%q)\n", s.payload, s.codec, s.count, s.attrs)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%03d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
