package engine

import (
	"math"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/volume/records"
)

// codecs are the compression.type values and the codec each stores
// batches with.
var codecs = map[string]records.Codec{
	"producer":     dataplane.Producer,
	"uncompressed": records.CodecNone,
	"gzip":         records.CodecGzip,
	"snappy":       records.CodecSnappy,
	"lz4":          records.CodecLZ4,
	"zstd":         records.CodecZstd,
}

// produceRules returns the produce rules a topic's configs set
// (docs/topics.md, Topic configs).
func produceRules(spec desired.TopicSpec) dataplane.ProduceRules {
	r := dataplane.NoProduceRules
	r.CreateTime = spec.ConfigValue("message.timestamp.type") == "CreateTime"
	r.RequireKeys = spec.Compacted()
	// As Kafka's LogConfig: the deprecated difference bound stands in for
	// either bound still at its default.
	diff := spec.ConfigInt("message.timestamp.difference.max.ms")
	r.TimestampBefore = orIfMax(spec.ConfigInt("message.timestamp.before.max.ms"), diff)
	r.TimestampAfter = orIfMax(spec.ConfigInt("message.timestamp.after.max.ms"), diff)
	if c, ok := codecs[spec.ConfigValue("compression.type")]; ok {
		r.Codec = c
	}
	r.Level = records.DefaultLevel
	switch r.Codec {
	case records.CodecGzip:
		r.Level = int(spec.ConfigInt("compression.gzip.level"))
	case records.CodecLZ4:
		r.Level = int(spec.ConfigInt("compression.lz4.level"))
	case records.CodecZstd:
		r.Level = int(spec.ConfigInt("compression.zstd.level"))
	}
	return r
}

func orIfMax(v, alt int64) int64 {
	if v == math.MaxInt64 {
		return alt
	}
	return v
}
