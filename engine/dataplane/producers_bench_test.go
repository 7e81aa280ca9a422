package dataplane

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

// setSeq rewrites a batch's base sequence and its CRC.
func setSeq(b []byte, seq int32) {
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
}

// BenchmarkPartitionAppend measures Partition.Append (no Sync) of 16-record
// batches on the OS filesystem: from no producer ID, from 1,000 idempotent
// producers round-robin, and from 1,000 producers each in a transaction.
// The write system call dominates; allocs/op is the figure to watch.
//
//	go test -run XXX -bench PartitionAppend ./engine/
func BenchmarkPartitionAppend(b *testing.B) {
	for _, kind := range []string{"plain", "idempotent", "transactional"} {
		b.Run(kind, func(b *testing.B) {
			dir := b.TempDir()
			lg, err := partlog.Open(volume.OS(), dir, partlog.Config{Epoch: 1, SegmentBytes: 1 << 30, Logger: logr.Discard()})
			if err != nil {
				b.Fatal(err)
			}
			p := &Partition{Topic: "b", fsys: volume.OS(), dir: dir, log: lg, producers: newProducerState(), logger: logr.Discard()}
			defer p.Close()
			const n = 16
			nProd := 1000
			if kind == "plain" {
				nProd = 1
			}
			bufs := make([][]byte, nProd)
			for i := range bufs {
				o := partlogtest.Options{NumRecords: n, ValueSize: 64, Timestamp: 1, ProducerID: int64(i), BaseSequence: 0}
				switch kind {
				case "plain":
					o.ProducerID, o.ProducerEpoch, o.BaseSequence = -1, -1, -1
				case "transactional":
					o.Attributes = attrTransactional
					p.Verified(int64(i), 0)
				}
				bufs[i] = partlogtest.Make(o)
			}
			b.SetBytes(int64(len(bufs[0])))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				buf := bufs[i%len(bufs)]
				if kind != "plain" {
					setSeq(buf, int32(i/len(bufs)*n))
				}
				if _, _, err := p.Append(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProducerStateCheck measures the producer-state work of one
// append alone (check, then record), 1,000 producers round-robin.
func BenchmarkProducerStateCheck(b *testing.B) {
	const nProd, n = 1000, 16
	bufs := make([][]byte, nProd)
	for i := range bufs {
		bufs[i] = partlogtest.MakeBatch(n, 64, 1, int64(i), 0, 0)
	}
	ps := newProducerState()
	var off int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf := bufs[i%nProd]
		binary.BigEndian.PutUint32(buf[53:], uint32(i/nProd*n))
		h, err := partlog.ParseBatchHeader(buf)
		if err != nil {
			b.Fatal(err)
		}
		if _, dup, err := ps.check(h); err != nil || dup {
			b.Fatal(err, dup)
		}
		ps.record(h, off, off+n-1)
		off += n
	}
}

// BenchmarkProducerSnapshotCodec measures encoding (under the partition
// mutex) and decoding of a snapshot of 1,000 producers with five batches
// each.
func BenchmarkProducerSnapshotCodec(b *testing.B) {
	ps := newProducerState()
	for pid := int64(0); pid < 1000; pid++ {
		e := newProducerEntry(3)
		for j := int64(0); j < keepBatches; j++ {
			base := pid*1000 + j*16
			e.Batches = append(e.Batches, batchRange{FirstSeq: int32(j * 16), LastSeq: int32(j*16 + 15), BaseOffset: base, LastOffset: base + 15})
		}
		e.LastTimestamp = 1700000000000
		ps.m[100000+pid] = e
	}
	data := ps.encodeSnapshot(1<<30, 1)
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = ps.encodeSnapshot(1<<30, 1)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, _, _, err := decodeSnapshot(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkProducerStateRebuild measures what a new owner does before it
// serves a partition: open the log (fence, recover the tail) and rebuild
// producer state. The log, built once on the real filesystem in a temp dir
// (outside the timer), is 1 GiB + 32 MiB of batches of 1-16 KiB (2-32
// records of 500 bytes) from 1,000 idempotent producers round-robin,
// written through Partition.Append, so producer snapshots were taken every
// 64 MiB as in production; its owner then died without the snapshot at
// close, leaving a 32 MiB tail after the newest snapshot (half the
// interval: the mean for a crash at a random point). "snapshot" opens from
// the newest snapshot plus that tail, "log-only" with the snapshots
// deleted (a full replay). The segments are in the page cache: on a
// network volume, the replay's reads cost more.
//
//	go test -run XXX -bench ProducerStateRebuild -benchtime 3x ./engine/
func BenchmarkProducerStateRebuild(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1 GiB log")
	}
	const (
		nProducers = 1000
		total      = 1<<30 + 32<<20
	)
	fsys := volume.OS()
	dir := b.TempDir()
	lg, err := partlog.Open(fsys, dir, partlog.Config{Epoch: 1, Logger: logr.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	p := &Partition{Topic: "b", fsys: fsys, dir: dir, log: lg, producers: newProducerState(), logger: logr.Discard()}
	rng := rand.New(rand.NewPCG(1, 2))
	type prod struct {
		batch []byte
		n     int32
		seq   int32
	}
	prods := make([]prod, nProducers)
	for i := range prods {
		n := 2 + rng.IntN(31)
		prods[i] = prod{batch: partlogtest.MakeBatch(n, 500, 1700000000000, int64(1000+i), 0, 0), n: int32(n)}
	}
	var written, batches int64
	ctx := context.Background()
	for i := 0; written < total; i++ {
		pr := &prods[i%nProducers]
		setSeq(pr.batch, pr.seq)
		last, _, err := p.Append(pr.batch)
		if err != nil {
			b.Fatal(err)
		}
		pr.seq += pr.n
		written += int64(len(pr.batch))
		batches++
		if batches%256 == 0 {
			if err := p.Sync(ctx, last); err != nil { // also writes a due snapshot
				b.Fatal(err)
			}
		}
	}
	if err := p.Sync(ctx, lg.LogEndOffset()-1); err != nil {
		b.Fatal(err)
	}
	want := p.Producers()
	if err := lg.Close(); err != nil { // the owner dies: no snapshot at close
		b.Fatal(err)
	}
	b.Logf("log: %d MiB, %d batches, %d producers", written>>20, batches, nProducers)

	epoch := int32(1)
	open := func(b *testing.B) {
		b.ReportAllocs()
		var replayed int64
		for i := 0; i < b.N; i++ {
			epoch++
			lg, err := partlog.Open(fsys, dir, partlog.Config{Epoch: epoch, Logger: logr.Discard()})
			if err != nil {
				b.Fatal(err)
			}
			ps, n, err := loadProducerState(fsys, dir, lg, DefaultMaxProducersPerPartition, nil)
			if err != nil {
				b.Fatal(err)
			}
			replayed = n
			b.StopTimer()
			q := &Partition{log: lg, producers: ps}
			if got := q.Producers(); len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] {
				b.Fatalf("rebuilt state differs: %d producers, first %+v, want %d, %+v", len(got), got[0], len(want), want[0])
			}
			if err := lg.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(replayed), "batches-replayed")
	}
	b.Run("snapshot", func(b *testing.B) {
		offs, err := SnapshotOffsets(fsys, dir)
		if err != nil || len(offs) == 0 {
			b.Fatalf("no snapshot to open from: %v", err)
		}
		open(b)
	})
	b.Run("log-only", func(b *testing.B) {
		names, err := filepath.Glob(filepath.Join(dir, "*"+snapshotSuffix))
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range names {
			if err := os.Remove(n); err != nil {
				b.Fatal(err)
			}
		}
		open(b)
	})
}

// BenchmarkLastStableOffset is the fetch path's read of the last stable
// offset and of the aborted transactions of a range, with none aborted.
func BenchmarkLastStableOffset(b *testing.B) {
	dir := b.TempDir()
	lg, err := partlog.Open(volume.OS(), dir, partlog.Config{Epoch: 1, Logger: logr.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	p := &Partition{Topic: "b", fsys: volume.OS(), dir: dir, log: lg, producers: newProducerState(), logger: logr.Discard()}
	defer p.Close()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		lso := p.LastStableOffset()
		benchSink += lso + int64(len(p.AbortedTransactions(0, lso, nil)))
	}
}

var benchSink int64

// BenchmarkProducerStateAppendPath is the producer-state work of
// Partition.Append for an idempotent batch as Append does it (one lookup,
// the sequence and transaction checks, the record), 1,000 producers
// round-robin.
func BenchmarkProducerStateAppendPath(b *testing.B) {
	const nProd, n = 1000, 16
	bufs := make([][]byte, nProd)
	for i := range bufs {
		bufs[i] = partlogtest.MakeBatch(n, 64, 1, int64(i), 0, 0)
	}
	ps := newProducerState()
	var off int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf := bufs[i%nProd]
		binary.BigEndian.PutUint32(buf[53:], uint32(i/nProd*n))
		h, err := partlog.ParseBatchHeader(buf)
		if err != nil {
			b.Fatal(err)
		}
		e := ps.m[h.ProducerID]
		if _, dup, err := checkEntry(e, h); err != nil || dup {
			b.Fatal(err, dup)
		}
		if err := checkTxn(e, h); err != nil {
			b.Fatal(err)
		}
		ps.recordEntry(e, h, off, off+n-1)
		off += n
	}
}
