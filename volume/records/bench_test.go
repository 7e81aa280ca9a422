package records

import (
	"testing"

	rt "github.com/kaas-dev/kaas/volume/records/recordstest"
)

// BenchmarkValidate: a realistic batch (100 keyed records of 1 KiB
// compressible text) per codec; bytes/s counts the uncompressed records.
func BenchmarkValidate(b *testing.B) {
	recs := rt.Text(100, 1024)
	raw := len(rt.EncodeRecords(recs))
	for _, c := range rt.Codecs {
		batch := rt.Batch{Codec: c, Records: recs}.Bytes()
		b.Run(c.String(), func(b *testing.B) {
			v := new(Validator)
			b.SetBytes(int64(raw))
			b.ReportAllocs()
			for b.Loop() {
				if err := v.Validate(batch, 100<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
