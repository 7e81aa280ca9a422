package volume_test

import (
	"path"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// TestFitName: a name that fits is kept as it is (so names written before
// the bounded form existed are read unchanged); a longer one is cut to
// exactly NameMax, keeps its extension and a recognisable prefix, and two
// long stems that share that prefix get different names.
func TestFitName(t *testing.T) {
	long := strings.Repeat("t", 249)
	other := long[:248] + "u"
	cases := []struct {
		stem, ext string
		plain     bool
	}{
		{"orders", ".json", true},
		{strings.Repeat("t", 250), ".json", true}, // exactly NameMax
		{strings.Repeat("t", 251), ".json", false},
		{long + "%2F99999", ".json", false},
		{long, "~00000000-0000-4000-8000-0000000000b2", false},
	}
	for _, tc := range cases {
		got := volume.FitName(tc.stem, tc.ext)
		switch {
		case tc.plain && got != tc.stem+tc.ext:
			t.Errorf("FitName(%d bytes, %q) = %q, want the plain name", len(tc.stem), tc.ext, got)
		case !tc.plain && (len(got) != volume.NameMax || !strings.HasSuffix(got, tc.ext) || !strings.HasPrefix(got, tc.stem[:100])):
			t.Errorf("FitName(%d bytes, %q) = %q (%d bytes): want NameMax bytes, the prefix and the extension", len(tc.stem), tc.ext, got, len(got))
		}
	}
	if a, b := volume.FitName(long, ".json.x"), volume.FitName(other, ".json.x"); a == b {
		t.Fatalf("two long stems share the bounded name %q", a)
	}
	if a, b := volume.FitName(long, ".x"), volume.FitName(strings.Clone(long), ".x"); a != b {
		t.Fatalf("FitName is not deterministic: %q, then %q", a, b)
	}
}

// TestTempNamesFit: WriteFileAtomic replaces a target of any length that
// fits NameMax (memfs refuses longer components, as Linux does), and its
// temp names, plain or shortened, are recognised by IsTempName and by
// IsTempNameOf for their own target only.
func TestTempNamesFit(t *testing.T) {
	for _, n := range []int{6, 200, 233, 234, 250, volume.NameMax} {
		base := strings.Repeat("b", n-len(".json")) + ".json"
		var seen string
		inj := func(op faultfs.Op) faultfs.Action {
			if op.Kind == faultfs.OpCreateExclusive && seen == "" {
				seen = path.Base(op.Path)
			}
			return faultfs.Proceed
		}
		mem := memfs.New()
		if err := mem.MkdirAll("/d", 0); err != nil {
			t.Fatal(err)
		}
		if err := volume.WriteFileAtomic(faultfs.New(mem, inj), "/d/"+base, []byte("x")); err != nil {
			t.Fatalf("write a %d-byte target: %v", len(base), err)
		}
		if len(seen) > volume.NameMax {
			t.Fatalf("temp name of a %d-byte target is %d bytes", len(base), len(seen))
		}
		if !volume.IsTempName(seen) || !volume.IsTempNameOf(seen, base) {
			t.Fatalf("temp name %q of %q not recognised", seen, base)
		}
		if volume.IsTempNameOf(seen, base+"x") || volume.IsTempNameOf(seen, "c"+base[1:]) {
			t.Fatalf("temp name %q taken for another target's", seen)
		}
		if n <= volume.NameMax-22 && seen != "."+base+".tmp-"+seen[len(seen)-16:] {
			t.Fatalf("temp name %q of a short target changed form", seen)
		}
	}
	// Today's names of short targets are still recognised.
	if !volume.IsTempNameOf(".assignment.json.tmp-0123456789abcdef", "assignment.json") {
		t.Fatal("a plain temp name not recognised")
	}
	for _, bad := range []string{".assignment.json.tmp-0123456789abcde", ".assignment.json.tmp-0123456789abcdeF", "assignment.json.tmp-0123456789abcdef"} {
		if volume.IsTempNameOf(bad, "assignment.json") {
			t.Errorf("IsTempNameOf(%q) accepted", bad)
		}
	}
}
