package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/probe"
)

// Modes of --check-volume.
const (
	checkRefuse = "refuse"
	checkWarn   = "warn"
	checkOff    = "off"
)

// volumeCheckBudget bounds the whole start-up check.
const volumeCheckBudget = 30 * time.Second

// volumeCheckOptions is the start-up volume check: the probe of the data
// (and cluster) directory, then the cross-host close-to-open handshake
// with a live peer (engine/cluster/probe.go).
type volumeCheckOptions struct {
	mode string
	fsys volume.FS // nil: the OS; tests set it
}

func (v *volumeCheckOptions) register(fs *flag.FlagSet) {
	v.mode = checkRefuse
	fs.Func("check-volume", "check the volume's promises (atomic rename, exclusive create, close-to-open, directory fsync) before serving: refuse (exit if one fails), warn (log and go on) or off (KAAS_CHECK_VOLUME; default refuse)", func(s string) error {
		v.mode = s
		return v.validate()
	})
}

func (v *volumeCheckOptions) validate() error {
	switch v.mode {
	case checkRefuse, checkWarn, checkOff:
		return nil
	}
	return fmt.Errorf("--check-volume must be refuse, warn or off, not %q", v.mode)
}

// within reports whether dir is p or below it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(p, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// volumeChecks are the start-up check's outcomes by volume label ("data",
// "control"; kaas_volume_check_passed); nil when the check is off.
type volumeChecks map[string]bool

// check runs the start-up volume check on the data directory, the cluster
// directory when it is elsewhere, and across hosts. In refuse mode a
// failure is returned; in warn mode it is logged, and the outcomes say
// which volume failed.
func (v *volumeCheckOptions) check(ctx context.Context, log logr.Logger, data, clusterDir string, id int32, lease time.Duration) (volumeChecks, error) {
	if err := v.validate(); err != nil {
		return nil, err
	}
	if v.mode == checkOff {
		log.Info("volume check is off (--check-volume=off)")
		return nil, nil
	}
	fsys := v.fsys
	if fsys == nil {
		fsys = volume.OS()
	}
	ctx, cancel := context.WithTimeout(ctx, volumeCheckBudget)
	defer cancel()
	fail := func(err error) error {
		if v.mode == checkWarn {
			log.Error(err, "volume check failed; starting anyway (--check-volume=warn)")
			return nil
		}
		return fmt.Errorf("refusing to start (--check-volume=refuse; warn or off overrides): %w", err)
	}
	// The control volume is the data volume unless the cluster directory
	// lies outside it.
	passed := volumeChecks{"data": true, "control": true}
	labels := map[string][]string{data: {"data", "control"}}
	dirs := []string{data}
	if clusterDir == "" {
		clusterDir = filepath.Join(data, "__cluster")
	} else if !within(clusterDir, data) {
		dirs = append(dirs, clusterDir)
		labels[data], labels[clusterDir] = []string{"data"}, []string{"control"}
	}
	for _, d := range dirs {
		res := probe.Run(ctx, probe.Config{Dir: d, FS: fsys})
		if err := res.Err(); err != nil {
			for _, l := range labels[d] {
				passed[l] = false
			}
			if ferr := fail(err); ferr != nil {
				return passed, ferr
			}
			continue
		}
		var notes []string
		for _, c := range res.Checks {
			if c.Message != "" {
				notes = append(notes, c.Name+": "+c.Message)
			}
		}
		log.Info("volume check passed", "dir", d, "took", res.Duration.Round(time.Millisecond).String(), "notes", notes)
	}
	start := time.Now()
	res, err := cluster.CheckCrossHost(ctx, cluster.CrossHostConfig{FS: fsys, ClusterDir: clusterDir, BrokerID: id, Lease: lease}, 0)
	took := time.Since(start).Round(time.Millisecond).String()
	switch {
	case res.Err != nil:
		// The handshake runs in the cluster directory.
		for _, l := range labels[dirs[len(dirs)-1]] {
			passed[l] = false
		}
		return passed, fail(res.Err)
	case err != nil && errors.Is(err, context.Canceled):
		return passed, fmt.Errorf("volume check interrupted: %w", err)
	case res.Skipped:
		log.Info("cross-host close-to-open check skipped", "reason", res.Reason, "took", took)
	default:
		log.Info("cross-host close-to-open check passed", "peers", res.Peers, "took", took)
	}
	return passed, nil
}
