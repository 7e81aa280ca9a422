// Package records decodes and validates the records inside one Kafka
// RecordBatch v2, for every codec, the way Kafka's LogValidator and
// DefaultRecord do: a produced batch whose records a consumer could not
// decode is refused instead of stored.
//
// The batch's header and CRC are partlog.ValidateBatch's job; this package
// reads only the header fields it needs, so that partlog can use it too
// (ListOffsets by timestamp decodes one batch's records) without a cycle.
//
// Validation streams: a compressed batch is decompressed through a fixed
// window and the records' keys, values and headers are skipped, never held,
// so the memory of one validation is the decompressor's state plus the
// window (a raw snappy block, which cannot be streamed, is decoded whole
// into a reused buffer). The total decompressed size is bounded by the
// caller's limit: a compression bomb is refused after at most that many
// bytes of work. A Validator allocates nothing per record or per batch once
// warm.
package records
