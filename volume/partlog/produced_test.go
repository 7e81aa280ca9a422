package partlog

import (
	"errors"
	"testing"

	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
	"github.com/kaas-dev/kaas/volume/records"
)

func TestCheckProduced(t *testing.T) {
	good := partlogtest.MakeBatch(3, 10, 1234, 7, 1, 40)
	c, err := CheckProduced(good)
	if err != nil {
		t.Fatalf("CheckProduced(good): %v", err)
	}
	if want, _ := ValidateBatch(good); c.Header() != want || &c.Bytes()[0] != &good[0] {
		t.Fatalf("checked %+v, want %+v over the same bytes", c.Header(), want)
	}
	join := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	magic1 := join(good)
	magic1[offMagic] = 1
	badCRC := join(good)
	badCRC[offCRC] ^= 1
	for _, tc := range []struct {
		name  string
		recs  []byte
		fault RecordSetFault // 0: ErrCorruptBatch
	}{
		{"empty", nil, NoBatch},
		{"shorter than a length", good[:11], NoBatch},
		{"magic 1", magic1, OtherMagic},
		{"length past the end", good[:len(good)-1], 0},
		{"header cut", good[:offMagic+1], 0},
		{"two batches", join(good, good), SeveralBatches},
		{"a batch and junk", join(good, []byte{1, 2, 3}), 0},
		{"a batch and a cut batch", join(good, good[:len(good)-1]), 0},
		{"bad crc", badCRC, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckProduced(tc.recs)
			var rse *RecordSetError
			switch {
			case tc.fault == 0 && !errors.Is(err, ErrCorruptBatch):
				t.Fatalf("CheckProduced = %v, want ErrCorruptBatch", err)
			case tc.fault != 0 && (!errors.As(err, &rse) || rse.Fault != tc.fault):
				t.Fatalf("CheckProduced = %v, want fault %d", err, tc.fault)
			case tc.fault == OtherMagic && rse.Magic != 1:
				t.Fatalf("magic %d, want 1", rse.Magic)
			}
		})
	}
}

// TestCheckRecords: the records of a checked batch go through
// volume/records; a batch whose header and CRC are fine but whose records
// are not is refused there.
func TestCheckRecords(t *testing.T) {
	good := partlogtest.MakeBatch(3, 10, 1234, 7, 1, 40)
	c, err := CheckProduced(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckRecords(1 << 20); err != nil {
		t.Fatalf("CheckRecords(good): %v", err)
	}
	bad := append([]byte(nil), good...)
	bad[BatchHeaderSize] = 0 // the first record's length: 0
	FinishBatch(bad, c.Header())
	c, err = CheckProduced(bad)
	if err != nil {
		t.Fatalf("CheckProduced(bad records): %v", err)
	}
	if err := c.CheckRecords(1 << 20); !errors.Is(err, records.ErrInvalid) {
		t.Fatalf("CheckRecords(bad records) = %v, want records.ErrInvalid", err)
	}
}
