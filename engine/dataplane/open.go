package dataplane

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// OpenOptions is what Open needs besides the partition's directory.
type OpenOptions struct {
	Topic   string
	Index   int32
	TopicID string
	// Log configures the log; LogOptions are passed to partlog.Open.
	Log        partlog.Config
	LogOptions []partlog.Option
	// Rules are the topic's produce rules (SetProduceRules); nil:
	// NoProduceRules.
	Rules *ProduceRules
	// MaxProducers bounds the producer state (0: unbounded);
	// ExpireProducers forgets producers idle this long when a snapshot is
	// taken (0: never), by the clock Now.
	MaxProducers    int
	ExpireProducers time.Duration
	Now             func() time.Time
	// OnFailure is told when the log refuses writes for good; OnClosed
	// once, when Close has closed the log's handles.
	OnFailure func(*Partition)
	OnClosed  func()
	Logger    logr.Logger
}

// Recovery says what an Open found: how long the log took to open and how
// many batches were replayed into the producer state after its snapshot.
type Recovery struct {
	LogOpen         time.Duration
	ReplayedBatches int64
}

// Open opens a partition's log under the leader epoch its fence holds for
// this broker and rebuilds the producer state from the newest usable
// snapshot plus the log after it: partition-open's recover step.
func Open(fsys volume.FS, dir string, o OpenOptions) (*Partition, Recovery, error) {
	var rc Recovery
	start := time.Now()
	lg, err := partlog.Open(fsys, dir, o.Log, o.LogOptions...)
	if err != nil {
		return nil, rc, fmt.Errorf("open log: %w", err)
	}
	rc.LogOpen = time.Since(start)
	ps, replayed, err := loadProducerState(fsys, dir, lg, o.MaxProducers, lg.OpenListing())
	if err != nil {
		_ = lg.Close()
		return nil, rc, err
	}
	rc.ReplayedBatches = replayed
	p := &Partition{Topic: o.Topic, Index: o.Index, TopicID: o.TopicID, fsys: fsys, dir: dir, log: lg,
		producers: ps, onFailure: o.OnFailure, onClosed: o.OnClosed,
		expireProducers: o.ExpireProducers, now: o.Now, logger: o.Logger}
	if o.Rules != nil {
		p.SetProduceRules(*o.Rules)
	}
	p.mu.Lock()
	p.expireProducersLocked()
	p.mu.Unlock()
	return p, rc, nil
}
