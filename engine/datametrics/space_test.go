package datametrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestVolumeSpaceCachedBetweenScrapes(t *testing.T) {
	now := time.Unix(1000, 0)
	calls := 0
	free := uint64(100)
	statfs := func(dir string) (Space, error) {
		calls++
		if dir == "/ctl" {
			return Space{Size: 2000, Free: 1500}, nil
		}
		return Space{Size: 1000, Free: free}, nil
	}
	v := NewVolumeSpace(map[string]string{"data": "/data", "control": "/ctl"}, 5*time.Second, statfs, func() time.Time { return now })
	expect := func(dataFree string) string {
		return `
# HELP kaas_volume_free_bytes Bytes available to kaas on the volume (statfs of its directory).
# TYPE kaas_volume_free_bytes gauge
kaas_volume_free_bytes{volume="control"} 1500
kaas_volume_free_bytes{volume="data"} ` + dataFree + `
# HELP kaas_volume_size_bytes Total bytes of the volume (statfs of its directory).
# TYPE kaas_volume_size_bytes gauge
kaas_volume_size_bytes{volume="control"} 2000
kaas_volume_size_bytes{volume="data"} 1000
`
	}
	steps := []struct {
		advance   time.Duration
		wantFree  string
		wantCalls int
	}{
		{0, "100", 2},
		{4 * time.Second, "100", 2}, // within the interval: no statfs
		{time.Second, "40", 4},      // due again
	}
	for i, st := range steps {
		now = now.Add(st.advance)
		if i == 2 {
			free = 40
		}
		if err := testutil.CollectAndCompare(v, strings.NewReader(expect(st.wantFree))); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if calls != st.wantCalls {
			t.Fatalf("step %d: %d statfs calls, want %d", i, calls, st.wantCalls)
		}
	}
}

func TestOSStatfs(t *testing.T) {
	s, err := osStatfs(t.TempDir())
	if err != nil || s.Size == 0 || s.Free > s.Size {
		t.Fatalf("statfs = %+v, %v", s, err)
	}
}
