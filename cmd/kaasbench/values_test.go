package main

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
)

func TestValueSourceRandomSharesPayload(t *testing.T) {
	payload := []byte("0123456789")
	v := newValueSource(payload, nil, len(payload), 0)
	for range 3 {
		if got := v.next(); &got[0] != &payload[0] || len(got) != len(payload) {
			t.Fatalf("default values must be the one shared payload, got %q", got)
		}
	}
}

func TestValueSourceCompressible(t *testing.T) {
	corpus := newTextCorpus()
	if len(corpus) != textCorpusBytes || !bytes.Equal(corpus, newTextCorpus()) {
		t.Fatalf("corpus must be %d deterministic bytes", textCorpusBytes)
	}
	tests := []struct {
		name       string
		size       int
		producer   int
		wantPrefix []string
	}{
		{name: "1 KiB", size: 1024, producer: 2, wantPrefix: []string{"p2-0 ", "p2-1 ", "p2-2 "}},
		{name: "tiny values are cut", size: 3, producer: 0, wantPrefix: []string{"p0-", "p0-", "p0-"}},
		{name: "larger than the corpus wraps", size: textCorpusBytes + 100, producer: 1, wantPrefix: []string{"p1-0 ", "p1-1 "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newValueSource(nil, corpus, tt.size, tt.producer)
			seen := make(map[string]bool)
			for _, want := range tt.wantPrefix {
				got := v.next()
				if len(got) != tt.size || !strings.HasPrefix(string(got), want) {
					t.Fatalf("value %.20q (len %d), want prefix %q and len %d", got, len(got), want, tt.size)
				}
				if tt.size > 8 && seen[string(got)] {
					t.Fatalf("value repeated: %.20q", got)
				}
				seen[string(got)] = true
			}
		})
	}
}

// TestCompressibleValuesCompress checks that a batch's worth of values
// compresses like text: clearly, but nowhere near the ~1000x of repeated
// identical values.
func TestCompressibleValuesCompress(t *testing.T) {
	v := newValueSource(nil, newTextCorpus(), 1024, 0)
	var raw, zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	for range 1000 {
		b := v.next()
		raw.Write(b)
		zw.Write(b)
	}
	zw.Close()
	ratio := float64(raw.Len()) / float64(zipped.Len())
	if ratio < 1.5 || ratio > 10 {
		t.Fatalf("gzip ratio %.2f over %d bytes, want text-like (1.5x..10x)", ratio, raw.Len())
	}
	t.Logf("gzip ratio %.2f", ratio)
}
