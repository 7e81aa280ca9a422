package states_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

// Producer IDs tag who wrote a batch in the takeover scenario.
const (
	pidAcked    = 100 // previous owner, acknowledged
	pidTail     = 200 // previous owner, never synced
	pidZombie   = 300 // previous owner, after the new owner sealed its tail
	pidNewOwner = 400 // new owner, after serving
	oldEpoch    = 3
)

func takeoverBatch(pid int64, seq int32) []byte {
	return partlogtest.Make(partlogtest.Options{
		NumRecords: 2, ValueSize: 24, Timestamp: sweepNow().UnixMilli(),
		ProducerID: pid, BaseSequence: seq,
	})
}

// appendBatch appends a batch of pid to lg and notes what was written
// where; the batch is stamped in place by Append.
func appendBatch(tr *trial, lg *partlog.Log, pid int64, seq int32) (int64, []byte, error) {
	b := takeoverBatch(pid, seq)
	res, err := lg.Append(b)
	if err != nil {
		return 0, nil, err
	}
	tr.wrote[res.BaseOffset] = append(tr.wrote[res.BaseOffset], bytes.Clone(b))
	return res.BaseOffset, b, nil
}

// setupPreviousOwner leaves the partition as a previous owner at oldEpoch
// does while still running: its record says serving, two batches are
// acknowledged (fsynced, fence re-checked), one more is written but not
// synced, and half of another is torn at the end of the segment.
func setupPreviousOwner(t *testing.T, fsys volume.FS, tr *trial) {
	t.Helper()
	dir := states.PartitionDir(sweepData, sweepTopic, 0)
	if err := volume.MkdirAllSync(fsys, dir); err != nil {
		t.Fatal(err)
	}
	if err := states.EnsureStamp(fsys, sweepData, sweepTopic, sweepTopicID); err != nil {
		t.Fatal(err)
	}
	prev := int32(oldEpoch - 1)
	rec := &states.Record{Kind: states.PartitionOpen.Kind, Object: states.PartitionObject(sweepTopic, 0),
		Desired: states.PartitionOpen.End, State: states.PartitionOpen.End, Since: sweepNow(),
		Owner: hostSetup, TopicID: sweepTopicID, Epoch: oldEpoch, FencedFrom: &prev}
	if err := states.Save(fsys, sweepCluster, rec); err != nil {
		t.Fatal(err)
	}
	lg, err := partlog.Open(fsys, dir, partlog.Config{Epoch: oldEpoch, Now: sweepNow})
	if err != nil {
		t.Fatal(err)
	}
	tr.zombie, tr.oldEpoch = lg, oldEpoch
	var acked [][2]any
	for seq := int32(0); seq < 2; seq++ {
		base, b, err := appendBatch(tr, lg, pidAcked, seq*2)
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, [2]any{base, b})
	}
	if err := lg.Sync(context.Background(), math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	for _, a := range acked {
		tr.ack(a[0].(int64), a[1].([]byte))
	}
	tr.lastAcked = takeoverAck{base: acked[1][0].(int64), pid: pidAcked, seq: 2}
	base, _, err := appendBatch(tr, lg, pidTail, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A torn write: the first half of the next batch, never synced.
	seg := activeSegment(t, fsys, dir)
	f, err := fsys.OpenReadWrite(seg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	torn := takeoverBatch(pidTail, 2)
	if _, err := f.WriteAt(torn[:len(torn)/2], st.Size()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if lg.HighWatermark() != base {
		t.Fatalf("high watermark %d, want %d: the tail must stay unacknowledged", lg.HighWatermark(), base)
	}
}

// takeoverAck names an acknowledged batch: its offset, producer and first
// sequence.
type takeoverAck struct {
	base int64
	pid  int64
	seq  int32
}

// ack records an acknowledged batch. An offset acknowledged before with
// other bytes means that earlier acknowledgement was lost.
func (tr *trial) ack(base int64, b []byte) {
	if old, ok := tr.acked[base]; ok && !bytes.Equal(old, b) {
		h, _ := partlog.ParseBatchHeader(old)
		tr.problems = append(tr.problems, fmt.Sprintf("acknowledged batch at offset %d (producer %d) lost: the offset was acknowledged again for another batch", base, h.ProducerID))
		return
	}
	tr.acked[base] = bytes.Clone(b)
}

// activeSegment returns the segment file with the highest base offset.
func activeSegment(t *testing.T, fsys volume.FS, dir string) string {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	last := ""
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") && !strings.HasPrefix(e.Name(), ".") {
			last = e.Name() // names sort by base offset
		}
	}
	if last == "" {
		t.Fatalf("no segment in %s", dir)
	}
	return path.Join(dir, last)
}

// readBatchAt reads the batch whose base offset is off.
func readBatchAt(lg *partlog.Log, off int64) ([]byte, error) {
	b, err := lg.Read(off, 1<<20, nil)
	if err != nil {
		return nil, fmt.Errorf("read at %d: %w", off, err)
	}
	h, err := partlog.ParseBatchHeader(b)
	if err != nil {
		return nil, fmt.Errorf("read at %d: %w", off, err)
	}
	if h.BaseOffset != off {
		return nil, fmt.Errorf("read at %d found the batch at %d", off, h.BaseOffset)
	}
	return bytes.Clone(b[:h.Size()]), nil
}

// produceBatch produces a batch of pid at seq through the partition as a
// client does (append, then wait until durable), notes what was written
// where, and returns the offset the produce answered with the batch stored
// there: a retry of a batch an earlier drive wrote is answered as that
// duplicate, by the producer state recovery rebuilt.
func produceBatch(ctx context.Context, tr *trial, p *dataplane.Partition, pid int64, seq int32) (int64, []byte, error) {
	b := takeoverBatch(pid, seq)
	end := p.Log().LogEndOffset()
	last, res, err := p.Append(b)
	if err != nil {
		return 0, nil, err
	}
	if res.BaseOffset >= end { // appended, and stamped in place
		tr.wrote[res.BaseOffset] = append(tr.wrote[res.BaseOffset], bytes.Clone(b))
	}
	if err := p.Sync(ctx, last); err != nil {
		return 0, nil, err
	}
	stored, err := readBatchAt(p.Log(), res.BaseOffset)
	if err != nil {
		return 0, nil, err
	}
	if h, _ := partlog.ParseBatchHeader(stored); h.ProducerID != pid || h.BaseSequence != seq {
		return 0, nil, fmt.Errorf("produce of producer %d at sequence %d answered offset %d, which holds producer %d's batch at sequence %d",
			pid, seq, res.BaseOffset, h.ProducerID, h.BaseSequence)
	}
	return res.BaseOffset, stored, nil
}

// resendLastAcked re-sends the previous owner's last acknowledged batch, as
// its producer retries it against the new leader: the producer state the
// recover step rebuilt (from a snapshot and the log after it) must answer
// it as the duplicate it is, at its offset, and not append it again.
func resendLastAcked(ctx context.Context, tr *trial, p *dataplane.Partition) error {
	a := tr.lastAcked
	base, _, err := produceBatch(ctx, tr, p, a.pid, a.seq)
	if err != nil {
		return fmt.Errorf("re-send of producer %d's acknowledged batch: %w", a.pid, err)
	}
	if base != a.base {
		return fmt.Errorf("re-send of producer %d's batch acknowledged at offset %d was appended again at %d: the producer state was not recovered", a.pid, a.base, base)
	}
	return nil
}

// readAllBatches reads every batch below the high watermark, by base
// offset, and checks that offsets follow each other.
func readAllBatches(lg *partlog.Log) (map[int64][]byte, error) {
	out := map[int64][]byte{}
	for off := lg.LogStartOffset(); off < lg.HighWatermark(); {
		b, err := lg.Read(off, 1<<20, nil)
		if err != nil {
			return nil, fmt.Errorf("read at %d: %w", off, err)
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("read at %d below the high watermark %d returned nothing", off, lg.HighWatermark())
		}
		for len(b) > 0 {
			h, err := partlog.ParseBatchHeader(b)
			if err != nil {
				return nil, fmt.Errorf("read at %d: %w", off, err)
			}
			if h.BaseOffset != off {
				return nil, fmt.Errorf("batch at offset %d where %d was expected", h.BaseOffset, off)
			}
			out[off] = bytes.Clone(b[:h.Size()])
			b, off = b[h.Size():], h.NextOffset()
		}
	}
	return out, nil
}

// takeoverScenario is partition-open as the takeover machine: a new owner
// opens a partition that a previous owner at oldEpoch still holds, with an
// unsynced and torn tail. The previous owner keeps writing after the new
// owner recovered (a zombie), and the new owner acknowledges one batch of
// its own once serving. The crash kills every host; the restarted owner
// gets a new leader epoch, as the engine's controller gives a new
// incarnation.
func takeoverScenario() sweepScenario {
	return sweepScenario{
		variant: "takeover",
		object:  states.PartitionObject(sweepTopic, 0),
		setup:   setupPreviousOwner,
		bind: func(fsys volume.FS, rec *states.Record, tr *trial) *run {
			r := &run{}
			r.acts = states.PartitionOpenActions(fsys, sweepData, sweepTopic, sweepTopicID, 0, rec, takeoverHost{fsys, r, tr})
			return r
		},
		check: checkTakeover,
	}
}

// takeoverHost is the partition-open host of the takeover scenario: the
// real fence step; recover is the engine's (dataplane.Open at the fenced
// epoch), after which the previous owner, still running, tries to write
// (a zombie); serve checks that a retry of the previous owner's last
// acknowledged batch is answered as a duplicate, acknowledges one batch of
// the new owner's producer, reads the log back and closes the partition
// (which snapshots the producer state).
type takeoverHost struct {
	fsys volume.FS
	r    *run
	tr   *trial
}

func (h takeoverHost) Fence(ctx context.Context, rec *states.Record) error {
	return claimAboveFence(h.fsys, states.PartitionFence(sweepData, sweepTopic, 0), rec)
}

func (h takeoverHost) Recover(ctx context.Context, rec *states.Record) error {
	dir := states.PartitionDir(sweepData, sweepTopic, 0)
	fence, err := partlog.ReadFence(h.fsys, dir)
	if err != nil {
		return err
	}
	if fence != rec.Epoch || fence <= h.tr.oldEpoch {
		return fmt.Errorf("recover at epoch %d with the fence at %d", rec.Epoch, fence)
	}
	p, err := recoverPartition(h.fsys, rec)
	if err != nil {
		return err
	}
	h.tr.parts = append(h.tr.parts, p)
	h.r.part = p
	if z := h.tr.zombie; z != nil {
		// The previous owner has not noticed yet: its write lands
		// past the sealed end and must not be acknowledged.
		if _, _, err := appendBatch(h.tr, z, pidZombie, 0); err == nil {
			if err := z.Sync(ctx, math.MaxInt64); err == nil {
				h.tr.problems = append(h.tr.problems, "the previous owner acknowledged a write after the takeover's fence")
			} else if !errors.Is(err, partlog.ErrFenced) {
				h.tr.problems = append(h.tr.problems, fmt.Sprintf("previous owner's sync after the fence: %v, want ErrFenced", err))
			}
		}
	}
	h.r.recovered, h.r.epoch = true, rec.Epoch
	return nil
}

func (h takeoverHost) Serve(ctx context.Context, rec *states.Record) error {
	p := h.r.part
	if p == nil {
		return errors.New("serve without a recovered partition")
	}
	if err := resendLastAcked(ctx, h.tr, p); err != nil {
		return err
	}
	// The new owner's producer sends its next batch: a retry of one an
	// earlier drive wrote but did not acknowledge, if any.
	base, stored, err := produceBatch(ctx, h.tr, p, pidNewOwner, 2*h.tr.newOwnerAcked)
	if err != nil {
		return err
	}
	h.tr.ack(base, stored)
	h.tr.newOwnerAcked++
	if h.r.readable, err = readAllBatches(p.Log()); err != nil {
		return err
	}
	if err := p.Close(); err != nil {
		return err
	}
	h.r.served = true
	return nil
}

func checkTakeover(t *testing.T, fsys volume.FS, rec *states.Record, r *run, tr *trial) {
	t.Helper()
	checkServing(t, fsys, rec, r)
	if r.epoch <= tr.oldEpoch {
		t.Fatalf("serving at epoch %d, not above the previous owner's %d", r.epoch, tr.oldEpoch)
	}
	for base, want := range tr.acked {
		if got := r.readable[base]; !bytes.Equal(got, want) {
			h, _ := partlog.ParseBatchHeader(want)
			t.Fatalf("acknowledged batch at offset %d (producer %d) lost or changed: read %d bytes, want %d", base, h.ProducerID, len(got), len(want))
		}
	}
	for base, got := range r.readable {
		h, err := partlog.ParseBatchHeader(got)
		if err != nil {
			t.Fatalf("batch at %d: %v", base, err)
		}
		if h.ProducerID == pidZombie {
			t.Fatalf("the previous owner's write after the takeover is readable at offset %d", base)
		}
		written := false
		for _, w := range tr.wrote[base] {
			written = written || bytes.Equal(w, got)
		}
		if !written {
			t.Fatalf("batch at offset %d (producer %d) is not one written there", base, h.ProducerID)
		}
	}
}
