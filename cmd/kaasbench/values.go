package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// compressionCodecs maps --compression names to franz-go codecs.
var compressionCodecs = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

// parseCompression normalises a --compression value.
func parseCompression(s string) (string, error) {
	c := strings.ToLower(strings.TrimSpace(s))
	if _, ok := compressionCodecs[c]; !ok {
		return "", fmt.Errorf("--compression must be none, gzip, snappy, lz4 or zstd, not %q", s)
	}
	return c, nil
}

// textCorpusBytes is the size of the shared text --compressible values are
// cut from. It is larger than any batch (--batch-max-bytes is capped well
// below it in practice, default 1 MiB) and than every codec's window, so a
// batch never contains the same stretch of text twice and compresses only as
// well as the text itself does (about 3x with gzip), not the ~1000x a batch
// of identical values would.
const textCorpusBytes = 4 << 20

// textWords is the vocabulary of the corpus: log-like English text.
var textWords = strings.Fields(`the a to of and in is for on with at by from as
	broker partition record batch offset leader epoch fetch produce consumer
	group commit topic segment index volume fsync write read request response
	error retry timeout client server connection started stopped ready failed
	info warn debug trace user order payment id status ok value key header
	time ms bytes count total size queue latency throughput sent received
	accepted rejected created deleted updated account session region zone
	node pod service http grpc json true false null 200 404 500 -1 0 1 2 3 7 42`)

// newTextCorpus returns textCorpusBytes of space-separated words drawn with a
// fixed seed, so every run produces the same bytes.
func newTextCorpus() []byte {
	rng := rand.New(rand.NewPCG(15, 3))
	b := make([]byte, 0, textCorpusBytes+32)
	for len(b) < textCorpusBytes {
		b = append(b, textWords[rng.IntN(len(textWords))]...)
		b = append(b, ' ')
	}
	return b[:textCorpusBytes]
}

// valueSource hands out record values for one producer. With compressible
// off it returns the same shared random payload every time (kaasbench's
// original behaviour: no allocation per record). With compressible on, each
// value is a unique prefix "p<producer>-<seq> " followed by the next stretch
// of the shared text corpus, so values are distinct and batches compress like
// text.
type valueSource struct {
	payload  []byte // shared random value, when not compressible
	corpus   []byte // shared text, when compressible
	size     int
	producer int
	seq      int64
	off      int
}

func newValueSource(payload, corpus []byte, size, producer int) *valueSource {
	v := &valueSource{payload: payload, corpus: corpus, size: size, producer: producer}
	if len(corpus) > 0 {
		// Producers start far apart in the corpus.
		v.off = (producer * len(corpus) / 7) % len(corpus)
	}
	return v
}

// next returns the value for the next record.
func (v *valueSource) next() []byte {
	if v.corpus == nil {
		return v.payload
	}
	b := make([]byte, 0, v.size)
	b = append(b, 'p')
	b = strconv.AppendInt(b, int64(v.producer), 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, v.seq, 10)
	b = append(b, ' ')
	v.seq++
	if len(b) > v.size {
		return b[:v.size]
	}
	for len(b) < v.size {
		n := min(v.size-len(b), len(v.corpus)-v.off)
		b = append(b, v.corpus[v.off:v.off+n]...)
		v.off = (v.off + n) % len(v.corpus)
	}
	return b
}
