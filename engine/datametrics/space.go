package datametrics

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Space is a volume's size and free bytes, as statfs(2) reports them.
type Space struct {
	Size, Free uint64
}

var (
	volumeFreeDesc = prometheus.NewDesc("kaas_volume_free_bytes",
		"Bytes available to kaas on the volume (statfs of its directory).", []string{"volume"}, nil)
	volumeSizeDesc = prometheus.NewDesc("kaas_volume_size_bytes",
		"Total bytes of the volume (statfs of its directory).", []string{"volume"}, nil)
)

// VolumeSpace collects kaas_volume_free_bytes{volume} and
// kaas_volume_size_bytes{volume}: statfs of each named directory, read at
// scrape time but at most once per minInterval (a statfs of NFS is a round
// trip to the server).
type VolumeSpace struct {
	dirs        map[string]string // volume label -> directory
	statfs      func(dir string) (Space, error)
	now         func() time.Time
	minInterval time.Duration

	mu   sync.Mutex
	at   time.Time
	last map[string]Space
}

// NewVolumeSpace returns the collector of dirs (e.g. "data" and "control"
// to their directories). A nil statfs is the OS's; a nil now, time.Now.
func NewVolumeSpace(dirs map[string]string, minInterval time.Duration, statfs func(string) (Space, error), now func() time.Time) *VolumeSpace {
	if statfs == nil {
		statfs = osStatfs
	}
	if now == nil {
		now = time.Now
	}
	return &VolumeSpace{dirs: dirs, statfs: statfs, now: now, minInterval: minInterval}
}

func (v *VolumeSpace) Describe(ch chan<- *prometheus.Desc) {
	ch <- volumeFreeDesc
	ch <- volumeSizeDesc
}

// Collect reports the last statfs of each volume, refreshed when older than
// minInterval. A volume whose statfs fails is left out (and reported as an
// invalid metric, so the scrape says why).
func (v *VolumeSpace) Collect(ch chan<- prometheus.Metric) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	if v.last == nil || now.Sub(v.at) >= v.minInterval {
		v.at = now
		v.last = map[string]Space{}
		for name, dir := range v.dirs {
			s, err := v.statfs(dir)
			if err != nil {
				ch <- prometheus.NewInvalidMetric(volumeFreeDesc, fmt.Errorf("statfs %s volume at %s: %w", name, dir, err))
				continue
			}
			v.last[name] = s
		}
	}
	names := make([]string, 0, len(v.last))
	for n := range v.last {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := v.last[n]
		ch <- prometheus.MustNewConstMetric(volumeFreeDesc, prometheus.GaugeValue, float64(s.Free), n)
		ch <- prometheus.MustNewConstMetric(volumeSizeDesc, prometheus.GaugeValue, float64(s.Size), n)
	}
}
