package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"
)

// diskRun is one fsync'd sequential-write measurement.
type diskRun struct {
	ChunkBytes int     `json:"chunk_bytes"`
	Bytes      int64   `json:"bytes"`
	Fsyncs     int     `json:"fsyncs"`
	Seconds    float64 `json:"seconds"`
	MBPerSec   float64 `json:"mb_per_sec"`
}

// diskResult holds the disk measurements for one directory.
type diskResult struct {
	Dir  string    `json:"dir"`
	Runs []diskRun `json:"runs"`
}

// reference returns the run used as the produce/disk baseline: the one with
// the largest chunk size (1 MiB by default).
func (d *diskResult) reference() (diskRun, bool) {
	if d == nil || len(d.Runs) == 0 {
		return diskRun{}, false
	}
	best := d.Runs[0]
	for _, r := range d.Runs[1:] {
		if r.ChunkBytes > best.ChunkBytes {
			best = r
		}
	}
	return best, true
}

// Disk test bounds, per chunk size.
var (
	diskChunkSizes = []int{1 << 20, 64 << 10}
	diskMaxBytes   = int64(256 << 20)
	diskMaxTime    = 2 * time.Second
)

// measureDisk writes each chunk size sequentially to a fresh temp file in dir,
// fsyncing after every chunk, until maxTime has passed or maxBytes have been
// written, and reports MB/s (10^6 bytes). Files are removed afterwards.
func measureDisk(ctx context.Context, dir string, chunks []int, maxBytes int64, maxTime time.Duration) (*diskResult, error) {
	res := &diskResult{Dir: dir}
	for _, size := range chunks {
		r, err := measureDiskOnce(ctx, dir, size, maxBytes, maxTime)
		if err != nil {
			return res, fmt.Errorf("disk %s, %s chunks: %w", dir, fmtSize(int64(size)), err)
		}
		res.Runs = append(res.Runs, r)
	}
	return res, nil
}

func measureDiskOnce(ctx context.Context, dir string, size int, maxBytes int64, maxTime time.Duration) (r diskRun, err error) {
	r.ChunkBytes = size
	buf := make([]byte, size)
	// Random bytes so compressing or deduplicating filesystems cannot cheat.
	if _, err := rand.Read(buf); err != nil {
		return r, err
	}
	f, err := os.CreateTemp(dir, "kaasbench-disk-*.tmp")
	if err != nil {
		return r, err
	}
	name := f.Name()
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if rerr := os.Remove(name); rerr != nil && err == nil {
			err = rerr
		}
	}()
	start := time.Now()
	deadline := start.Add(maxTime)
	for r.Bytes < maxBytes && time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		n, err := f.Write(buf)
		r.Bytes += int64(n)
		if err != nil {
			return r, err
		}
		if err := f.Sync(); err != nil {
			return r, err
		}
		r.Fsyncs++
	}
	r.Seconds = time.Since(start).Seconds()
	r.MBPerSec = mbps(r.Bytes, r.Seconds)
	return r, nil
}

func mbps(bytes int64, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / secs
}
