// Package records decodes and validates the records inside one Kafka
// RecordBatch v2, for every codec, the way Kafka's LogValidator and
// DefaultRecord do: a produced batch whose records a consumer could not
// decode is refused instead of stored.
//
// This package holds the RecordBatch v2 header's layout and its decoding
// (BatchHeader.Decode), the one copy of them: partlog, which checks the
// header and CRC (partlog.ValidateBatch), stamps and builds batches, uses
// them, and uses this package's validator too (ListOffsets by timestamp
// decodes one batch's records), so this package cannot import partlog.
//
// Validation streams: a compressed batch is decompressed through a fixed
// window and the records' keys, values and headers are skipped, never held,
// so the memory of one validation is the decompressor's state plus the
// window (a raw snappy block, which cannot be streamed, is decoded whole
// into a reused buffer). The total decompressed size is bounded by the
// caller's limit: a compression bomb is refused after at most that many
// bytes of work. A Validator allocates nothing per record or per batch once
// warm.
//
// Encoding: an Encoder compresses a records section with any codec at
// Kafka's compression levels, writing what Kafka's own producer writes,
// and Recompress rewrites a validated batch with another codec (a topic's
// compression.type), its header kept but for the codec, length and CRC.
//
// Log cleaning: an Iter walks a stored batch's records (decompressed once,
// checked as ValidateStored checks them) and Encoder.AppendRetained
// rewrites the batch keeping some of them, byte for byte, as Kafka's
// cleaner does; partlog.BuildBatch frames the result.
package records
