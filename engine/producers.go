package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// Idempotent-producer state of one partition: per producer ID, its epoch and
// the sequence ranges of its last five batches (Kafka's in-flight limit), so
// a retried batch is answered with its original offset and a gap is refused.

const keepBatches = 5

type batchRange struct {
	FirstSeq   int32 `json:"firstSeq"`
	LastSeq    int32 `json:"lastSeq"`
	BaseOffset int64 `json:"baseOffset"`
	LastOffset int64 `json:"lastOffset"`
}

type producerEntry struct {
	Epoch   int16        `json:"epoch"`
	Batches []batchRange `json:"batches"` // oldest first, at most keepBatches
}

type producerState map[int64]*producerEntry

var (
	// ErrOutOfOrderSequence is a gap in a producer's sequence numbers.
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrInvalidProducerEpoch is a batch from an epoch older than the current one.
	ErrInvalidProducerEpoch = errors.New("producer epoch is older than the current one")
)

func lastSeq(h partlog.BatchHeader) int32 {
	s := int64(h.BaseSequence) + int64(h.LastOffsetDelta)
	if s > math.MaxInt32 {
		s -= math.MaxInt32 + 1
	}
	return int32(s)
}

func nextSeq(s int32) int32 {
	if s == math.MaxInt32 {
		return 0
	}
	return s + 1
}

// check decides what to do with a batch: append it (dup false, err nil),
// answer it as a duplicate of an earlier append, or refuse it.
func (ps producerState) check(h partlog.BatchHeader) (dup batchRange, isDup bool, err error) {
	if h.ProducerID < 0 {
		return batchRange{}, false, nil
	}
	e := ps[h.ProducerID]
	if e == nil {
		// A producer unknown here (new, or its state expired) starts anywhere.
		return batchRange{}, false, nil
	}
	switch {
	case h.ProducerEpoch < e.Epoch:
		return batchRange{}, false, fmt.Errorf("%w: producer %d epoch %d, current %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.Epoch)
	case h.ProducerEpoch > e.Epoch:
		if h.BaseSequence != 0 {
			return batchRange{}, false, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, got %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return batchRange{}, false, nil
	}
	last := lastSeq(h)
	for _, b := range e.Batches {
		if b.FirstSeq == h.BaseSequence && b.LastSeq == last {
			return b, true, nil
		}
	}
	if n := len(e.Batches); n > 0 {
		if want := nextSeq(e.Batches[n-1].LastSeq); h.BaseSequence != want {
			return batchRange{}, false, fmt.Errorf("%w: producer %d expected sequence %d, got %d", ErrOutOfOrderSequence, h.ProducerID, want, h.BaseSequence)
		}
	}
	return batchRange{}, false, nil
}

// record notes an appended batch at [base, last].
func (ps producerState) record(h partlog.BatchHeader, base, last int64) {
	if h.ProducerID < 0 {
		return
	}
	e := ps[h.ProducerID]
	if e == nil || h.ProducerEpoch != e.Epoch {
		e = &producerEntry{Epoch: h.ProducerEpoch, Batches: make([]batchRange, 0, keepBatches)}
		ps[h.ProducerID] = e
	}
	if len(e.Batches) == keepBatches {
		copy(e.Batches, e.Batches[1:])
		e.Batches = e.Batches[:keepBatches-1]
	}
	e.Batches = append(e.Batches, batchRange{FirstSeq: h.BaseSequence, LastSeq: lastSeq(h), BaseOffset: base, LastOffset: last})
}

// Snapshots: <partition dir>/<offset>.producers holds the state as of offset
// (every batch below it applied). Written atomically; the newest one at or
// below the recovered log end is used, and the log after it replayed.

const snapshotSuffix = ".producers"

type snapshotFile struct {
	Offset    int64                    `json:"offset"`
	Producers map[string]producerEntry `json:"producers"`
}

func snapshotName(offset int64) string { return fmt.Sprintf("%020d%s", offset, snapshotSuffix) }

func writeSnapshot(fsys volume.FS, dir string, ps producerState, offset int64) error {
	sf := snapshotFile{Offset: offset, Producers: make(map[string]producerEntry, len(ps))}
	for id, e := range ps {
		sf.Producers[strconv.FormatInt(id, 10)] = *e
	}
	b, err := json.Marshal(sf)
	if err != nil {
		return err
	}
	if err := volume.WriteFileAtomic(fsys, path.Join(dir, snapshotName(offset)), b); err != nil {
		return fmt.Errorf("producer snapshot at %d: %w", offset, err)
	}
	return pruneSnapshots(fsys, dir, offset)
}

// snapshots lists snapshot offsets, ascending.
func snapshots(fsys volume.FS, dir string) ([]int64, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, snapshotSuffix) || volume.IsTempName(n) {
			continue
		}
		off, err := strconv.ParseInt(strings.TrimSuffix(n, snapshotSuffix), 10, 64)
		if err == nil {
			out = append(out, off)
		}
	}
	return out, nil
}

// pruneSnapshots keeps the two newest snapshots at or below keep.
func pruneSnapshots(fsys volume.FS, dir string, keep int64) error {
	offs, err := snapshots(fsys, dir)
	if err != nil {
		return err
	}
	var older []int64
	for _, o := range offs {
		if o < keep {
			older = append(older, o)
		}
	}
	for i := 0; i+1 < len(older); i++ {
		if err := fsys.Remove(path.Join(dir, snapshotName(older[i]))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("prune producer snapshot: %w", err)
		}
	}
	return nil
}

// loadProducerState rebuilds producer state for an opened log: the newest
// snapshot at or below the log end, then a replay of only the batches after
// it. It reports how many batches it replayed.
func loadProducerState(fsys volume.FS, dir string, lg *partlog.Log) (producerState, int64, error) {
	ps := producerState{}
	end := lg.LogEndOffset()
	offs, err := snapshots(fsys, dir)
	if err != nil {
		return nil, 0, fmt.Errorf("list producer snapshots: %w", err)
	}
	from := lg.LogStartOffset()
	for i := len(offs) - 1; i >= 0; i-- {
		if offs[i] > end || offs[i] < from {
			continue // ahead of a truncated tail, or below retention
		}
		b, err := volume.ReadFile(fsys, path.Join(dir, snapshotName(offs[i])))
		if err != nil {
			continue
		}
		var sf snapshotFile
		if json.Unmarshal(b, &sf) != nil || sf.Offset != offs[i] {
			continue
		}
		for k, e := range sf.Producers {
			id, err := strconv.ParseInt(k, 10, 64)
			if err != nil {
				continue
			}
			e := e
			ps[id] = &e
		}
		from = sf.Offset
		break
	}
	var replayed int64
	err = lg.Scan(from, func(h partlog.BatchHeader) error {
		if h.BaseOffset < from || h.IsControl() {
			return nil
		}
		ps.record(h, h.BaseOffset, h.BaseOffset+int64(h.LastOffsetDelta))
		replayed++
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("replay producer state from %d: %w", from, err)
	}
	return ps, replayed, nil
}
