package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// histogram is a small HDR-style log-linear latency histogram over
// non-negative int64 values (nanoseconds here).
//
// Values below 2*histSub are recorded exactly. Above that, each power of two
// is split into histSub linear sub-buckets, so a reported quantile is within
// 1/histSub (< 0.8%) of the true value. Memory is fixed (~58 KiB) no matter
// how many values are recorded, and Record is lock-free (a few atomic adds),
// so it can be called from concurrent promise callbacks with low overhead.
type histogram struct {
	counts [histBuckets]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64
	min    atomic.Int64 // valid only when n > 0
	max    atomic.Int64
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits // 128 sub-buckets per power of two
	// Largest shift is 63-(histSubBits+1) = 55 for values < 2^63, giving
	// a largest index of 55*histSub + 2*histSub - 1.
	histBuckets = (63-(histSubBits+1))*histSub + 2*histSub
)

func newHistogram() *histogram {
	h := new(histogram)
	h.min.Store(math.MaxInt64)
	return h
}

// bucketOf maps a value to its bucket index.
func bucketOf(v int64) int {
	if v < 0 {
		v = 0
	}
	u := uint64(v)
	if u < 2*histSub {
		return int(u)
	}
	shift := bits.Len64(u) - (histSubBits + 1)
	return shift*histSub + int(u>>uint(shift))
}

// bucketRange returns the inclusive lowest and highest values that map to
// bucket idx.
func bucketRange(idx int) (lo, hi int64) {
	if idx < 2*histSub {
		return int64(idx), int64(idx)
	}
	shift := idx/histSub - 1
	m := int64(idx - shift*histSub)
	lo = m << uint(shift)
	return lo, lo + (int64(1) << uint(shift)) - 1
}

// Record adds one value.
func (h *histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(uint64(v))
	for {
		cur := h.max.Load()
		if v <= cur || h.max.CompareAndSwap(cur, v) {
			break
		}
	}
	for {
		cur := h.min.Load()
		if v >= cur || h.min.CompareAndSwap(cur, v) {
			break
		}
	}
}

// RecordDuration adds one duration.
func (h *histogram) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// Merge adds all of o's values into h. o must not be concurrently recorded to.
func (h *histogram) Merge(o *histogram) {
	n := o.n.Load()
	if n == 0 {
		return
	}
	for i := range o.counts {
		if c := o.counts[i].Load(); c > 0 {
			h.counts[i].Add(c)
		}
	}
	h.n.Add(n)
	h.sum.Add(o.sum.Load())
	if m := o.max.Load(); m > h.max.Load() {
		h.max.Store(m)
	}
	if m := o.min.Load(); m < h.min.Load() {
		h.min.Store(m)
	}
}

// Count returns the number of recorded values.
func (h *histogram) Count() uint64 { return h.n.Load() }

// Max returns the exact largest recorded value, or 0 if empty.
func (h *histogram) Max() int64 {
	if h.n.Load() == 0 {
		return 0
	}
	return h.max.Load()
}

// Min returns the exact smallest recorded value, or 0 if empty.
func (h *histogram) Min() int64 {
	if h.n.Load() == 0 {
		return 0
	}
	return h.min.Load()
}

// Mean returns the exact mean, or 0 if empty.
func (h *histogram) Mean() float64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return float64(h.sum.Load()) / float64(n)
}

// Quantile returns the value at percentile p (0 < p <= 100) using the
// nearest-rank method: the smallest recorded value v such that at least p% of
// values are <= v. The result is the highest value equivalent to v's bucket,
// clamped to the exact [min, max]; it is exact for values < 2*histSub. An empty
// histogram returns 0.
func (h *histogram) Quantile(p float64) int64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	if p >= 100 {
		return h.Max()
	}
	// The epsilon keeps float rounding (99.9*1000/100 = 999.0000000001) from
	// bumping the rank.
	rank := uint64(math.Ceil(p*float64(n)/100 - 1e-9))
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	var cum uint64
	for i := range h.counts {
		cum += h.counts[i].Load()
		if cum >= rank {
			_, hi := bucketRange(i)
			return min(max(hi, h.Min()), h.Max())
		}
	}
	return h.Max()
}
