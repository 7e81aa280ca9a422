package main

import (
	"math"
	"sync"
	"testing"
)

func TestBucketsContiguous(t *testing.T) {
	prevHi := int64(-1)
	for i := 0; i < histBuckets; i++ {
		lo, hi := bucketRange(i)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if hi < lo {
			t.Fatalf("bucket %d: hi %d < lo %d", i, hi, lo)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d [%d,%d] maps back to %d/%d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		prevHi = hi
	}
	if prevHi != math.MaxInt64 {
		t.Fatalf("last bucket ends at %d, want MaxInt64", prevHi)
	}
}

func TestBucketRelativeError(t *testing.T) {
	for _, v := range []int64{0, 1, 255, 256, 257, 1000, 123456, 1e9, 3e12, math.MaxInt64 / 3} {
		lo, hi := bucketRange(bucketOf(v))
		if v < lo || v > hi {
			t.Fatalf("%d not in its bucket [%d,%d]", v, lo, hi)
		}
		width := float64(hi - lo + 1)
		if v < 2*histSub && width != 1 || v >= 2*histSub && width/float64(v) > 1.0/histSub {
			t.Fatalf("bucket for %d too wide: %v", v, width)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	seq := func(from, to, step int64) []int64 {
		var s []int64
		for v := from; v <= to; v += step {
			s = append(s, v)
		}
		return s
	}
	tests := []struct {
		name   string
		values []int64
		// want maps percentile -> expected value; tol is the allowed
		// relative error (0 = exact).
		want map[float64]int64
		tol  float64
		max  int64
		mean float64
	}{
		{name: "empty", values: nil, want: map[float64]int64{50: 0, 99: 0, 100: 0}},
		{name: "single", values: []int64{7}, want: map[float64]int64{0.1: 7, 50: 7, 99.9: 7, 100: 7}, max: 7, mean: 7},
		{
			name:   "1..100 exact",
			values: seq(1, 100, 1),
			want:   map[float64]int64{1: 1, 50: 50, 90: 90, 99: 99, 99.9: 100, 100: 100},
			max:    100, mean: 50.5,
		},
		{
			name:   "reverse order same result",
			values: []int64{5, 4, 3, 2, 1},
			want:   map[float64]int64{20: 1, 50: 3, 80: 4, 100: 5},
			max:    5, mean: 3,
		},
		{
			name:   "negative clamps to zero",
			values: []int64{-5, 10},
			want:   map[float64]int64{50: 0, 100: 10},
			max:    10, mean: 5,
		},
		{
			name:   "1us..10ms approx",
			values: seq(1000, 10_000_000, 1000),
			want:   map[float64]int64{50: 5_000_000, 90: 9_000_000, 99: 9_900_000, 99.9: 9_990_000, 100: 10_000_000},
			tol:    1.0 / histSub,
			max:    10_000_000, mean: 5_000_500,
		},
		{
			name:   "outlier is max",
			values: append(seq(1, 999, 1), 5_000_000_000),
			want:   map[float64]int64{50: 500, 99.9: 999, 100: 5_000_000_000},
			tol:    1.0 / histSub,
			max:    5_000_000_000, mean: (999*1000/2 + 5_000_000_000) / 1000.0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHistogram()
			for _, v := range tt.values {
				h.Record(v)
			}
			if got := h.Count(); got != uint64(len(tt.values)) {
				t.Fatalf("count %d, want %d", got, len(tt.values))
			}
			for p, want := range tt.want {
				got := h.Quantile(p)
				diff := math.Abs(float64(got - want))
				if diff > tt.tol*float64(want) {
					t.Errorf("p%v = %d, want %d (tol %.2f%%)", p, got, want, tt.tol*100)
				}
			}
			if got := h.Max(); got != tt.max {
				t.Errorf("max %d, want %d", got, tt.max)
			}
			if got := h.Mean(); math.Abs(got-tt.mean) > 1e-6*max(1, tt.mean) {
				t.Errorf("mean %v, want %v", got, tt.mean)
			}
		})
	}
}

func TestHistogramMergeAndConcurrency(t *testing.T) {
	const workers, per = 8, 1000
	hs := make([]*histogram, 2)
	for i := range hs {
		hs[i] = newHistogram()
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hs[w%2]
			for i := 1; i <= per; i++ {
				h.Record(int64(i + w))
			}
		}()
	}
	wg.Wait()
	all := newHistogram()
	all.Merge(hs[0])
	all.Merge(hs[1])
	all.Merge(newHistogram()) // empty merge is a no-op
	if got := all.Count(); got != workers*per {
		t.Fatalf("count %d, want %d", got, workers*per)
	}
	if all.Min() != 1 || all.Max() != per+workers-1 {
		t.Fatalf("min/max %d/%d, want 1/%d", all.Min(), all.Max(), per+workers-1)
	}
	s := summarize(all)
	if s.Count != workers*per || s.MaxMs != float64(per+workers-1)/1e6 {
		t.Fatalf("summary %+v", s)
	}
}
