package engine

import (
	"path/filepath"
	"slices"

	"github.com/kaas-dev/kaas/volume"
)

// LogDir is the data volume as DescribeLogDirs describes it: every broker
// has this one log directory (Kafka's log.dirs, here the shared volume),
// holding the partitions it serves.
type LogDir struct {
	// Path is the data directory, absolute as Kafka names a log dir.
	Path string
	// Space is the volume's size; -1 and -1 when it cannot be read.
	Space volume.Space
	// Partitions are the partitions this broker serves, sorted by topic
	// then partition.
	Partitions []LogSize
}

// LogSize is one served partition's size on the volume.
type LogSize struct {
	Topic     string
	Partition int32
	// Bytes is the sum of its segment files, as its log tracks them (no
	// directory walk).
	Bytes int64
}

// DataLogDir describes the data volume with the partitions this broker
// serves: of every topic when topics is nil, else of the named topics
// only (unknown ones are left out, a name given twice counts once). A partition counts when this broker
// serves it at its assigned epoch, so that, summed over brokers, none is
// counted twice while it moves. It reads the volume's size (statfs), which
// may be slow on a shared volume.
func (e *Engine) DataLogDir(topics []string) LogDir {
	d := LogDir{Path: e.cfg.DataDir, Space: volume.Space{Total: -1, Usable: -1}}
	if abs, err := filepath.Abs(e.cfg.DataDir); err == nil {
		d.Path = abs
	}
	if s, err := volume.SpaceOf(e.fsys, e.cfg.DataDir); err == nil {
		d.Space = s
	}
	var routed []routedTopic
	if topics == nil {
		routed = e.routes.all()
	} else {
		names := slices.Compact(slices.Sorted(slices.Values(topics)))
		for _, name := range names {
			if t, ok := e.routes.topic(name); ok {
				routed = append(routed, t)
			}
		}
	}
	for _, t := range routed {
		if t.spec.Deleted {
			continue
		}
		for i, p := range t.parts {
			if p == nil {
				continue
			}
			if o, mine, _ := e.ownerOf(t.spec.ID, int32(i)); !mine || o.LeaderEpoch != p.Epoch() {
				continue
			}
			d.Partitions = append(d.Partitions, LogSize{Topic: t.spec.Name, Partition: int32(i), Bytes: p.Log().Size()})
		}
	}
	return d
}
