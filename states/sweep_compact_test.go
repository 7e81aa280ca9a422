package states_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/records"
	rt "github.com/kaas-dev/kaas/volume/records/recordstest"
)

func init() {
	sweepScenarios[states.SegmentCompact.Kind] = []sweepScenario{
		compactScenario("pass", setupCompacted),
		compactScenario("zombie", setupCompactZombie),
	}
}

const (
	// compactSegmentBytes rolls the setup's log every few batches, and
	// compactGroupBytes puts two or three segments in a group, so a pass
	// swaps several groups.
	compactSegmentBytes = 400
	compactGroupBytes   = 1000
	compactSetupEpoch   = 1
	compactRetention    = 24 * time.Hour
)

// compactTrial is the segment-compact workload's state: what the setup
// acknowledged, the latest record of each key (value nil: a tombstone),
// and the logs the workload's processes opened.
type compactTrial struct {
	latest map[string]compactRec
	end    int64 // the setup's log end: the whole of it is cleanable
	logs   []*partlog.Log
	// zombie is the previous owner's pass, its first group written and
	// pinned but not swapped (zombie scenario), until it tries the swap.
	zombie *zombiePass
}

type zombiePass struct {
	log *partlog.Log
	set *partlog.SegmentSet
	out *partlog.CleanedWriter
}

type compactRec struct {
	off int64
	val []byte
}

func (c *compactTrial) closeAll() {
	if c == nil {
		return
	}
	for _, lg := range c.logs {
		_ = lg.Close()
	}
	c.logs = nil
	if c.zombie != nil {
		c.zombie.set.Release()
		_ = c.zombie.log.Close()
		c.zombie = nil
	}
}

func compactDir() string { return states.PartitionDir(sweepData, sweepTopic, 0) }

func compactLogConfig(epoch int32, previous []int32) partlog.Config {
	return partlog.Config{Epoch: epoch, SegmentBytes: compactSegmentBytes, IndexIntervalBytes: 150,
		SegmentAge: 1000 * time.Hour, CheckpointInterval: partlog.DefaultCheckpointInterval,
		PreviousEpochs: previous, Now: sweepNow, Logger: logr.Discard()}
}

// openAboveFence opens the partition's log one epoch above its fence, as
// a new owner does (Open claims the fence), reading the previous
// writer's manifest by name.
func openAboveFence(fsys volume.FS) (*partlog.Log, error) {
	found, err := partlog.ReadFence(fsys, compactDir())
	if err != nil {
		return nil, fmt.Errorf("read fence: %w", err)
	}
	var previous []int32
	if found >= 0 {
		previous = []int32{found}
	}
	epoch := max(found, 0) + 1
	lg, err := partlog.Open(fsys, compactDir(), compactLogConfig(epoch, previous))
	if err != nil {
		return nil, fmt.Errorf("open %s at epoch %d: %w", compactDir(), epoch, err)
	}
	return lg, nil
}

// setupCompacted leaves a closed partition log of several sealed
// segments, every batch acknowledged: keys k0..k5 written over and over,
// some in gzip batches, and k5's latest record a tombstone.
func setupCompacted(t *testing.T, fsys volume.FS, tr *trial) {
	t.Helper()
	if err := fillCompacted(t, fsys, tr).Close(); err != nil {
		t.Fatal(err)
	}
}

// fillCompacted is setupCompacted's log, left open.
func fillCompacted(t *testing.T, fsys volume.FS, tr *trial) *partlog.Log {
	t.Helper()
	if err := volume.MkdirAllSync(fsys, compactDir()); err != nil {
		t.Fatal(err)
	}
	lg, err := partlog.Open(fsys, compactDir(), compactLogConfig(compactSetupEpoch, nil))
	if err != nil {
		t.Fatal(err)
	}
	ct := &compactTrial{latest: map[string]compactRec{}}
	tr.compact = ct
	ts := sweepNow().UnixMilli()
	for i := range 15 {
		keys := []string{fmt.Sprintf("k%d", i%6), fmt.Sprintf("k%d", (i*5+1)%6), fmt.Sprintf("k%d", i%3)}
		if i == 14 {
			keys = []string{"k5"}
		}
		recs := make([]rt.Record, len(keys))
		for j, k := range keys {
			recs[j] = rt.Record{OffsetDelta: int32(j), TimestampDelta: int64(j), Key: []byte(k), Value: fmt.Appendf(nil, "%s@%d", k, i)}
			if i == 14 {
				recs[j].Value = nil
			}
		}
		codec := []rt.Codec{rt.None, rt.Gzip}[i%2]
		res, err := lg.Append(rt.Batch{Codec: codec, Records: recs, FirstTS: ts}.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if err := lg.Sync(context.Background(), res.LastOffset); err != nil {
			t.Fatal(err)
		}
		for j, r := range recs {
			ct.latest[string(r.Key)] = compactRec{off: res.BaseOffset + int64(j), val: r.Value}
		}
		ct.end = res.LastOffset + 1
	}
	if _, ok := ct.latest["k5"]; !ok || ct.latest["k5"].val != nil {
		t.Fatalf("setup: k5's latest record is not a tombstone: %+v", ct.latest["k5"])
	}
	return lg
}

// setupCompactZombie leaves the previous owner (epoch 1, on the setup
// host) mid-pass: its record at mapped, its first group's cleaned segment
// written and durable but not swapped, the log still open. The new owner
// resumes the record at pending; once its open has claimed the fence,
// the zombie tries its swap, which must fail and change nothing.
func setupCompactZombie(t *testing.T, fsys volume.FS, tr *trial) {
	t.Helper()
	lg := fillCompacted(t, fsys, tr)
	def := states.SegmentCompact
	rec := def.NewRecord(states.PartitionObject(sweepTopic, 0), sweepTopicID, hostSetup, sweepNow())
	h := &compactHost{fsys: fsys, ct: tr.compact, log: lg}
	ctx := context.Background()
	if err := h.Plan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := h.Map(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.State, rec.Epoch = "mapped", lg.Epoch()
	if err := states.Save(fsys, sweepCluster, rec); err != nil {
		t.Fatal(err)
	}
	if err := lg.BeginClean(); err != nil {
		t.Fatal(err)
	}
	f := h.filter()
	defer f.Close()
	groups := h.plan.Groups(compactGroupBytes, h.mapEnd)
	if len(groups) < 2 {
		t.Fatalf("zombie's plan has %d groups, want several", len(groups))
	}
	set, out, err := dataplane.WriteCleaned(ctx, lg, f, groups[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	tr.compact.zombie = &zombiePass{log: lg, set: set, out: out}
}

// zombieSwap lets the previous owner, if any, try its swap now that the
// fence names a newer epoch; any outcome but ErrFenced is a problem.
func (c *compactTrial) zombieSwap(tr *trial) {
	z := c.zombie
	if z == nil {
		return
	}
	c.zombie = nil
	err := z.log.SwapCleaned(z.set, z.out, -1)
	z.set.Release()
	_ = z.log.Close()
	if !errors.Is(err, partlog.ErrFenced) {
		tr.problems = append(tr.problems, fmt.Sprintf("zombie's swap after the new owner's open: %v, want ErrFenced", err))
	}
}

func compactScenario(variant string, setup func(*testing.T, volume.FS, *trial)) sweepScenario {
	return sweepScenario{
		variant: variant,
		object:  states.PartitionObject(sweepTopic, 0),
		setup:   setup,
		bind: func(fsys volume.FS, rec *states.Record, tr *trial) *run {
			h := &compactHost{fsys: fsys, tr: tr, ct: tr.compact, save: saver(fsys)}
			return &run{acts: states.SegmentCompactActions(rec, h)}
		},
		check: checkCompacted,
	}
}

// compactHost is the segment-compact host of the sweep: one process that
// opens the log above the fence on its first step and cleans it as the
// engine's cleaner does, through partlog's clean API and dataplane's
// offset map and filter (keep the latest record of each key, tombstones
// until their horizon).
type compactHost struct {
	fsys volume.FS
	tr   *trial
	ct   *compactTrial
	save func(*states.Record) error

	log    *partlog.Log
	plan   partlog.CleanablePlan
	m      *dataplane.OffsetMap
	mapEnd int64
}

// open opens the log once per process (a record resumed at cleaned
// reaches retire with nothing open).
func (h *compactHost) open(rec *states.Record) (*partlog.Log, error) {
	if h.log != nil {
		return h.log, h.log.Err()
	}
	lg, err := openAboveFence(h.fsys)
	if err != nil {
		return nil, err
	}
	h.ct.logs = append(h.ct.logs, lg)
	h.log, rec.Epoch = lg, lg.Epoch()
	h.ct.zombieSwap(h.tr)
	return lg, nil
}

// sweep runs the unlisted-file sweep: EndClean sweeps, and an empty pass
// changes nothing else.
func sweep(lg *partlog.Log) error {
	if err := lg.BeginClean(); err != nil {
		return fmt.Errorf("sweep unlisted files: %w", err)
	}
	lg.EndClean()
	return lg.Err()
}

func (h *compactHost) Plan(ctx context.Context, rec *states.Record) error {
	lg, err := h.open(rec)
	if err != nil {
		return err
	}
	if _, err := lg.RollIfQuiet(0); err != nil {
		return fmt.Errorf("roll quiet tail: %w", err)
	}
	if err := sweep(lg); err != nil {
		return err
	}
	h.plan, h.m = lg.CleanablePlan(sweepNow(), 0, math.MaxInt64), nil
	rec.Compact = &states.CompactProgress{From: h.plan.FirstDirty, End: h.plan.FirstUncleanable,
		GroupsPlanned: len(h.plan.Groups(compactGroupBytes, h.plan.FirstUncleanable))}
	return nil
}

func (h *compactHost) Map(ctx context.Context, rec *states.Record) error {
	m, err := dataplane.NewOffsetMap(1 << 16)
	if err != nil {
		return err
	}
	h.m, h.mapEnd = m, h.plan.FirstDirty
	if h.plan.FirstDirty < h.plan.FirstUncleanable {
		set, err := h.log.PinSealed(h.plan.FirstDirty, h.plan.FirstUncleanable)
		if err != nil {
			return fmt.Errorf("pin dirty range: %w", err)
		}
		var batches [][]byte
		err = set.Walk(ctx, nil, func(b []byte) error { batches = append(batches, bytes.Clone(b)); return nil })
		set.Release()
		if err != nil {
			return fmt.Errorf("read dirty range: %w", err)
		}
		res, err := dataplane.BuildOffsetMap(m, &sliceIter{batches: batches, i: -1}, h.plan.FirstDirty, h.plan.FirstUncleanable, nil, 1<<26)
		if err != nil {
			return fmt.Errorf("build offset map: %w", err)
		}
		h.mapEnd = res.End
	}
	rec.Compact.MapEnd = h.mapEnd
	return nil
}

func (h *compactHost) Clean(ctx context.Context, rec *states.Record) error {
	if h.m == nil {
		return errors.New("clean without a map: the pass resumes at pending")
	}
	lg := h.log
	if err := lg.BeginClean(); err != nil {
		return err
	}
	defer lg.EndClean()
	f := h.filter()
	defer f.Close()
	groups := h.plan.Groups(compactGroupBytes, h.mapEnd)
	rec.Compact.GroupsPlanned = len(groups)
	for i, g := range groups {
		cleanerOffset := int64(-1)
		if i == len(groups)-1 {
			cleanerOffset = h.mapEnd
		}
		gen, err := cleanGroup(ctx, lg, f, g, cleanerOffset)
		if err != nil {
			return fmt.Errorf("group %d of %d at %d: %w", i+1, len(groups), g[0].Base, err)
		}
		p, st := rec.Compact, f.Stats()
		p.GroupsSwapped++
		p.Gens = append(p.Gens, gen)
		p.BytesRead, p.BytesWritten = st.BytesRead, st.BytesWritten
		p.BytesReclaimed = st.BytesRead - st.BytesWritten
		p.Superseded, p.Tombstones, p.Aborted, p.Markers = st.Superseded, st.Tombstones, st.Aborted, st.Markers
		// Progress, not a step: the same state with the new counts.
		if err := h.save(rec); err != nil {
			return fmt.Errorf("save progress: %w", err)
		}
	}
	return nil
}

// filter is the pass's filter over its map: no transactions, no live
// producers, tombstones kept for compactRetention.
func (h *compactHost) filter() *dataplane.Filter {
	return dataplane.NewFilter(dataplane.FilterConfig{MapEnd: h.mapEnd, End: h.plan.FirstUncleanable,
		Now: sweepNow().UnixMilli(), DeleteRetentionMs: compactRetention.Milliseconds(), DecodeLimit: 1 << 26}, h.m, nil, nil)
}

// cleanGroup writes g's cleaned segment through f and swaps it in; it
// returns the output's generation.
func cleanGroup(ctx context.Context, lg *partlog.Log, f *dataplane.Filter, g []partlog.SegmentInfo, cleanerOffset int64) (int64, error) {
	set, w, err := dataplane.WriteCleaned(ctx, lg, f, g, nil)
	if err != nil {
		return 0, err
	}
	defer set.Release()
	if err := lg.SwapCleaned(set, w, cleanerOffset); err != nil {
		return 0, err
	}
	for _, s := range lg.Segments() {
		if s.Base == g[0].Base {
			return s.Gen, nil
		}
	}
	return 0, fmt.Errorf("cleaned segment at %d not in the log after its swap", g[0].Base)
}

func (h *compactHost) Retire(ctx context.Context, rec *states.Record) error {
	lg, err := h.open(rec)
	if err != nil {
		return err
	}
	// The pass released its pins: the inputs are freed; what is left of
	// them, or of an earlier process, is unlisted.
	return sweep(lg)
}

// sliceIter is a dataplane.BatchIter over batches read beforehand.
type sliceIter struct {
	batches [][]byte
	i       int
}

func (s *sliceIter) Next() bool { s.i++; return s.i < len(s.batches) }
func (s *sliceIter) Batch() (int64, []byte) {
	b := s.batches[s.i]
	return int64(binary.BigEndian.Uint64(b)), b
}
func (s *sliceIter) Err() error { return nil }

// cleanedName matches the files of a cleaned segment.
var cleanedName = regexp.MustCompile(`^[0-9]{20}-e[0-9]+\.c[0-9]+\.`)

// checkCompacted checks segment-compact's end state on the volume: every
// segment of the setup's range is a cleaned one the manifest names, no
// cleaned file is left outside the manifest, and the log holds exactly
// each key's latest acknowledged record at its offset (the tombstone
// within its horizon).
func checkCompacted(t *testing.T, fsys volume.FS, rec *states.Record, _ *run, tr *trial) {
	t.Helper()
	if rec.State != states.SegmentCompact.End {
		t.Fatalf("record state %q, want %s", rec.State, states.SegmentCompact.End)
	}
	if p := rec.Compact; p == nil || p.GroupsPlanned == 0 || p.GroupsSwapped != p.GroupsPlanned || len(p.Gens) != p.GroupsSwapped {
		t.Fatalf("record's progress %+v: want every planned group swapped", p)
	}
	ents, err := fsys.ReadDir(compactDir())
	if err != nil {
		t.Fatal(err)
	}
	// Listed before Open, whose sweep would hide what the pass left.
	var cleanedFiles []string
	for _, e := range ents {
		switch {
		case cleanedName.MatchString(e.Name()):
			cleanedFiles = append(cleanedFiles, e.Name())
		case strings.HasPrefix(e.Name(), ".nfs"):
			t.Errorf("%s left after every process closed its log", e.Name())
		}
	}
	lg, err := openAboveFence(fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	named := map[string]bool{}
	for _, s := range lg.Segments() {
		stem := fmt.Sprintf("%020d-e%d.c%d", s.Base, s.Epoch, s.Gen)
		named[stem+".log"], named[stem+".index"], named[stem+".timeindex"] = true, true, true
		if s.EndOffset <= tr.compact.end && s.EndOffset > s.Base && s.Gen == 0 {
			t.Errorf("segment [%d, %d) of epoch %d is not cleaned", s.Base, s.EndOffset, s.Epoch)
		}
	}
	if len(cleanedFiles) == 0 {
		t.Error("no cleaned file in the partition directory")
	}
	for _, n := range cleanedFiles {
		if !named[n] {
			t.Errorf("cleaned file %s is not in the manifest", n)
		}
	}
	got := map[string][]compactRec{}
	it := records.AcquireIter()
	defer it.Release()
	for off := lg.LogStartOffset(); off < lg.HighWatermark(); {
		b, err := lg.Read(off, 1, nil)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(b) == 0 {
			break
		}
		if err := it.Reset(b, 1<<20); err != nil {
			t.Fatalf("decode batch read at %d: %v", off, err)
		}
		base := it.Header().BaseOffset
		for it.Next() {
			r := it.Record()
			got[string(r.Key)] = append(got[string(r.Key)], compactRec{off: base + int64(r.OffsetDelta), val: bytes.Clone(r.Value)})
		}
		if err := it.Err(); err != nil {
			t.Fatalf("decode batch read at %d: %v", off, err)
		}
		off = it.Header().LastOffset() + 1
	}
	for k, want := range tr.compact.latest {
		recs := got[k]
		if len(recs) != 1 || recs[0].off != want.off || !bytes.Equal(recs[0].val, want.val) || (recs[0].val == nil) != (want.val == nil) {
			t.Errorf("key %s: records %v, want only %d=%q", k, recs, want.off, want.val)
		}
	}
	if len(got) != len(tr.compact.latest) {
		t.Errorf("%d keys in the log, %d written", len(got), len(tr.compact.latest))
	}
}
