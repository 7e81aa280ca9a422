package records

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	rt "github.com/kaas-dev/kaas/volume/records/recordstest"
)

// fixtures are every batch this package's tests hold: real clients'
// batches, the poison ones, the stored (cleaned) shapes of every codec, and
// the FuzzValidate corpus under testdata.
func fixtures(t *testing.T) map[string][]byte {
	t.Helper()
	out := validBatches(t)
	for _, p := range rt.Poison(testLimit) {
		out["poison/"+p.Name] = p.Batch
	}
	for _, c := range rt.Codecs {
		for _, tc := range storedCases(c) {
			out["stored/"+c.String()+"/"+tc.name] = withLastDelta(tc.batch.Bytes(), tc.last)
		}
	}
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzValidate", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the FuzzValidate corpus: %d files, %v", len(files), err)
	}
	for _, name := range files {
		args := corpusArgs(t, name)
		payload, count := args[0].([]byte), int32(args[2].(int64))
		// As FuzzValidate wraps its input.
		bt := rt.Batch{Payload: payload, NumRecords: &count, CodecID: rt.Int16(int16(args[1].(int64) & 7)), Attributes: int16(args[3].(int64)) & 0x38}
		out["corpus/"+filepath.Base(name)] = bt.Bytes()
	}
	return out
}

// corpusArgs parses a "go test fuzz v1" file: []byte values as []byte,
// every number and character as int64.
func corpusArgs(t *testing.T, name string) []any {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if lines[0] != "go test fuzz v1" {
		t.Fatalf("%s: header %q", name, lines[0])
	}
	var out []any
	for _, line := range lines[1:] {
		e, err := parser.ParseExpr(line)
		call, ok := e.(*ast.CallExpr)
		if err != nil || !ok || len(call.Args) != 1 {
			t.Fatalf("%s: %q: %v", name, line, err)
		}
		arg, neg := call.Args[0], false
		if u, ok := arg.(*ast.UnaryExpr); ok && u.Op == token.SUB {
			arg, neg = u.X, true
		}
		lit, ok := arg.(*ast.BasicLit)
		if !ok {
			t.Fatalf("%s: %q: not a literal", name, line)
		}
		switch lit.Kind {
		case token.STRING:
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatalf("%s: %q: %v", name, line, err)
			}
			out = append(out, []byte(s))
		case token.CHAR:
			r, _, _, err := strconv.UnquoteChar(lit.Value[1:len(lit.Value)-1], '\'')
			if err != nil {
				t.Fatalf("%s: %q: %v", name, line, err)
			}
			out = append(out, int64(r))
		default:
			n, err := strconv.ParseInt(lit.Value, 0, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", name, line, err)
			}
			if neg {
				n = -n
			}
			out = append(out, n)
		}
	}
	if len(out) != 4 {
		t.Fatalf("%s: %d values, want FuzzValidate's 4", name, len(out))
	}
	return out
}

// walkIter walks batch with it, returning its records (copied) and the
// error the walk ended with.
func walkIter(it *Iter, batch []byte, limit int) ([]Record, error) {
	if err := it.Reset(batch, limit); err != nil {
		if it.Next() || !errors.Is(it.Err(), err) {
			return nil, fmt.Errorf("a walk after Reset's error %v did not end with it: %v", err, it.Err())
		}
		return nil, err
	}
	var out []Record
	for it.Next() {
		r := *it.Record()
		r.Key, r.Value, r.Raw = clone(r.Key), clone(r.Value), clone(r.Raw)
		out = append(out, r)
	}
	return out, it.Err()
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// TestIterMatchesValidate: on every fixture, Iter accepts what
// ValidateStored accepts (so all Validate accepts), with errors of the
// same kinds, and yields the
// records EachStored reports; their raw bytes make up the records section
// and decode in franz-go to the same fields; a rewound walk yields them
// again.
func TestIterMatchesValidate(t *testing.T) {
	v, it := new(Validator), new(Iter)
	kinds := []error{ErrCorrupt, ErrInvalid, ErrTooLarge}
	valid := 0
	for name, b := range fixtures(t) {
		verr := v.ValidateStored(b, testLimit)
		recs, ierr := walkIter(it, b, testLimit)
		if (verr == nil) != (ierr == nil) {
			t.Errorf("%s: ValidateStored: %v; Iter: %v", name, verr, ierr)
			continue
		}
		if ierr != nil && v.Validate(b, testLimit) == nil {
			t.Errorf("%s: Iter refuses a batch Validate accepts: %v", name, ierr)
		}
		if ierr != nil {
			// Iter decompresses first: a batch wrong in two ways may be
			// refused for the other one.
			if !errors.Is(ierr, kinds[0]) && !errors.Is(ierr, kinds[1]) && !errors.Is(ierr, kinds[2]) {
				t.Errorf("%s: Iter: an error of no kind: %v", name, ierr)
			}
			continue
		}
		valid++
		var want []string
		err := v.EachStored(b, testLimit, func(d int32, ts int64) bool { want = append(want, fmt.Sprint(d, ts)); return true })
		if err != nil {
			t.Fatalf("%s: EachStored: %v", name, err)
		}
		var got []string
		var section []byte
		for i, r := range recs {
			got = append(got, fmt.Sprint(r.OffsetDelta, r.Timestamp))
			section = append(section, r.Raw...)
			if err := sameAsFranz(r); err != nil || r.Index != int32(i) {
				t.Errorf("%s: record %d (index %d): %v", name, i, r.Index, err)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: Iter yields %v, EachStored %v", name, got, want)
		}
		var raw []byte // a header-only batch has no section, whatever its codec
		if len(b) > BatchHeaderSize {
			if raw, err = v.AppendRaw(nil, b, testLimit); err != nil {
				t.Fatalf("%s: AppendRaw: %v", name, err)
			}
		}
		if !bytes.Equal(section, raw) {
			t.Errorf("%s: the records' raw bytes (%d) are not the section (%d)", name, len(section), len(raw))
		}
		it.Rewind()
		n := 0
		for ; it.Next(); n++ {
			if r := it.Record(); n >= len(recs) || !bytes.Equal(r.Raw, recs[n].Raw) {
				t.Fatalf("%s: rewound walk: record %d differs", name, n)
			}
		}
		if n != len(recs) || it.Err() != nil {
			t.Errorf("%s: rewound walk: %d records, %v", name, n, it.Err())
		}
	}
	if valid < 50 {
		t.Fatalf("only %d fixtures are valid", valid)
	}
}

// sameAsFranz checks r's fields against franz-go's decoding of r.Raw.
func sameAsFranz(r Record) error {
	var k kmsg.Record
	if err := k.ReadFrom(r.Raw); err != nil {
		return fmt.Errorf("franz-go: %w", err)
	}
	same := func(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
	if k.OffsetDelta != r.OffsetDelta || k.TimestampDelta64 != r.TimestampDelta || !same(k.Key, r.Key) || !same(k.Value, r.Value) {
		return fmt.Errorf("Iter %d %d %q %q, franz-go %d %d %q %q", r.OffsetDelta, r.TimestampDelta, r.Key, r.Value,
			k.OffsetDelta, k.TimestampDelta64, k.Key, k.Value)
	}
	return nil
}

// TestIterControl: a transaction marker is reported as one, with its key.
func TestIterControl(t *testing.T) {
	it := AcquireIter()
	defer it.Release()
	for _, c := range rt.Codecs {
		b := rt.Batch{Codec: c, Attributes: 0x30, Records: []rt.Record{marker(0)}}.Bytes()
		recs, err := walkIter(it, b, testLimit)
		if err != nil || len(recs) != 1 || !recs[0].Control || !bytes.Equal(recs[0].Key, []byte{0, 0, 0, 1}) {
			t.Errorf("%s: %+v, %v", c, recs, err)
		}
	}
}

// TestIterAllocs: a warm Iter walks a batch with no allocation, for every
// codec and for sparse and empty batches.
func TestIterAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items")
	}
	it := new(Iter)
	for _, c := range rt.Codecs {
		for _, b := range [][]byte{
			rt.Batch{Codec: c, Records: rt.Text(100, 1024)}.Bytes(),
			withLastDelta(rt.Batch{Codec: c, Records: sparse(1, 4, 9, 30)}.Bytes(), 40),
			withLastDelta(rt.Batch{Codec: c, Records: []rt.Record{}}.Bytes(), 3),
		} {
			walk := func() {
				if err := it.Reset(b, testLimit); err != nil {
					t.Fatal(err)
				}
				for it.Next() {
				}
				if it.Err() != nil {
					t.Fatal(it.Err())
				}
			}
			walk()
			if n := testing.AllocsPerRun(20, walk); n != 0 {
				t.Errorf("%s: %.1f allocations per batch", c, n)
			}
		}
	}
}
