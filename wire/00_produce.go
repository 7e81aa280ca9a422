package wire

// Produce: versions 3-9.
//
// Behavior:
// * acks other than -1, 0 and 1 is INVALID_REQUIRED_ACKS for every
//   partition that exists (UNKNOWN_TOPIC_OR_PARTITION for the others, no
//   auto-create), as Kafka answers, and nothing is written.
// * Each partition's records are split into RecordBatch v2 batches, each
//   validated (length, magic, CRC-32C, offsets, max.message.bytes) and
//   checked against idempotent-producer state, then appended as received
//   with leader-assigned offsets. Compressed batches are stored as they came.
// * Every record of every batch is decoded first, as Kafka's LogValidator
//   does (volume/records): a codec that does not exist, a broken or
//   truncated compressed stream is CORRUPT_MESSAGE; a bad varint or
//   length, an offset delta out of sequence, a bad header, a count that
//   lies is INVALID_RECORD; records that inflate past MaxFrameBytes are
//   MESSAGE_TOO_LARGE. Clients may not write control batches, nor an
//   idempotent batch without a sequence (INVALID_RECORD), nor set the
//   LogAppendTime bit (INVALID_TIMESTAMP), as Kafka's LogValidator.
// * acks=1 and acks=-1 are answered only after the data is fsynced and the
//   partition's fence re-checked; concurrent requests share one fsync (group
//   commit). Appends happen in request order on the connection's read path;
//   the durability wait happens off it, so a pipelining client's requests
//   overlap their waits without reordering their appends.
// * acks=0 gets no response (as in Kafka); its data becomes readable when a
//   sync covers it.
// * A retried batch of an idempotent producer is answered with the offset
//   it was first written at; a sequence gap gets OUT_OF_ORDER_SEQUENCE_NUMBER.
// * Unknown topics are auto-created when allowed; the answer is the
//   retriable UNKNOWN_TOPIC_OR_PARTITION until they are served.
// * Transactional batches need the request's transactional ID. The first
//   batch of a producer's transaction at a partition is taken only once
//   the transaction's coordinator confirms the partition is in the
//   producer's ongoing transaction at that epoch (KIP-890 part 1), so a
//   late batch of an ended or fenced transaction can never open a
//   transaction nobody will end. Coordinator errors become the retriable
//   NOT_ENOUGH_REPLICAS, as Kafka answers; a partition not in the
//   transaction, INVALID_TXN_STATE; an old epoch, INVALID_PRODUCER_EPOCH.
//
// Version notes:
// * v3: transactional ID
// * v5: LogStartOffset
// * v8: per-partition ErrorMessage
// * v9: flexible

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/records"
)

type pendingSync struct {
	part *engine.Partition
	last int64
	rp   *kmsg.ProduceResponseTopicPartition
}

func handleProduce(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	eng := c.s.eng
	if req.Acks != -1 && req.Acks != 0 && req.Acks != 1 {
		r.finish(invalidAcksResponse(c, req, resp))
		return
	}
	// A compressed batch may inflate to at most what one request may carry
	// uncompressed: a bomb costs no more than a plain request.
	limit := int(c.s.cfg.MaxFrameBytes)
	var pending []pendingSync
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := &resp.Topics[ti]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			sp := &st.Partitions[pi]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			setErr := func(err error) {
				sp.ErrorCode = errorCode(err)
				if req.Version >= 8 {
					sp.ErrorMessage = errMessage(err)
				}
			}
			part, err := eng.Partition(rt.Topic, rp.Partition)
			if errors.Is(err, engine.ErrUnknownTopic) {
				if _, known := eng.Topic(rt.Topic); !known && eng.AutoCreateEnabled() {
					if cerr := eng.AutoCreate(rt.Topic); cerr != nil {
						err = cerr
					}
				}
			}
			if err != nil {
				setErr(err)
				continue
			}
			last, first, err := appendBatches(part, rp.Records, req.TransactionID != nil, limit)
			var unverified *engine.TxnUnverifiedError
			if errors.As(err, &unverified) {
				// The transaction's first batch here: verify, then append
				// again. On the read path, so this connection's appends
				// keep their order; it costs one round trip per
				// transaction and partition.
				if err = c.verifyTxn(*req.TransactionID, unverified, rt.Topic, rp.Partition); err == nil {
					part.Verified(unverified.ProducerID, unverified.ProducerEpoch)
					last, first, err = appendBatches(part, rp.Records, true, limit)
				}
			}
			if err != nil {
				setErr(err)
				continue
			}
			sp.BaseOffset = first.BaseOffset
			sp.LogStartOffset = first.LogStartOffset
			pending = append(pending, pendingSync{part: part, last: last, rp: sp})
		}
	}
	if req.Acks == 0 {
		// No response, but the data still has to become durable and visible.
		r.finish(nil)
		if len(pending) > 0 {
			go func() {
				for _, p := range pending {
					_ = p.part.Sync(context.Background(), p.last)
				}
			}()
		}
		return
	}
	if len(pending) == 0 {
		r.finish(resp)
		return
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	c.async(r, func() {
		ctx, cancel := context.WithTimeout(c.ctx, timeout)
		defer cancel()
		for _, p := range pending {
			if err := p.part.Sync(ctx, p.last); err != nil {
				p.rp.ErrorCode = errorCode(err)
				p.rp.BaseOffset = -1
				if req.Version >= 8 {
					p.rp.ErrorMessage = errMessage(err)
				}
			}
		}
		r.finish(resp)
	})
}

// appendBatches appends every batch in records, in order. It returns the
// last offset appended and the result of the first batch. As in Kafka, a
// partition's record set is all or nothing: every batch's framing, magic,
// CRC and records (decompressed to at most limit bytes) are checked before
// the first one is appended, so a bad batch after a good one cannot leave
// the good one written under an error answer (which the client would
// retry, duplicating it).
func appendBatches(part *engine.Partition, recs []byte, transactional bool, limit int) (int64, engine.ProduceResult, error) {
	var (
		first engine.ProduceResult
		last  int64 = -1
	)
	batches, err := splitBatches(recs)
	if err != nil {
		return 0, first, err
	}
	inBatch := func(n int, err error) error {
		if len(batches) > 1 {
			return fmt.Errorf("batch %d: %w", n, err)
		}
		return err
	}
	for n, b := range batches {
		h := b.Header()
		if !transactional && h.IsTransactional() {
			return 0, first, inBatch(n, fmt.Errorf("%w: a transactional batch needs the produce request's transactional ID", engine.ErrInvalidRecord))
		}
		// The rest is Kafka's LogValidator.validateBatch for clients.
		if h.IsControl() {
			return 0, first, inBatch(n, fmt.Errorf("%w: clients may not write control batches", engine.ErrInvalidRecord))
		}
		if h.ProducerID >= 0 && h.BaseSequence < 0 {
			return 0, first, inBatch(n, fmt.Errorf("%w: sequence %d in a batch of producer ID %d", engine.ErrInvalidRecord, h.BaseSequence, h.ProducerID))
		}
		if h.LogAppendTime() {
			return 0, first, inBatch(n, &codedError{code: kerr.InvalidTimestamp.Code, err: errors.New("producers may not set the timestamp type to LogAppendTime")})
		}
	}
	v := records.Acquire()
	defer v.Release()
	for n, b := range batches {
		if err := v.Validate(b.Bytes(), limit); err != nil {
			return 0, first, inBatch(n, recordsError(err))
		}
	}
	for n, b := range batches {
		l, res, err := part.AppendChecked(b)
		if err != nil {
			return 0, first, inBatch(n, err)
		}
		if n == 0 {
			first = res
		}
		last = max(last, l)
	}
	return last, first, nil
}

// recordsError gives a refusal of volume/records the code Kafka answers.
func recordsError(err error) error {
	code := kerr.CorruptMessage.Code
	switch {
	case errors.Is(err, records.ErrInvalid):
		code = kerr.InvalidRecord.Code
	case errors.Is(err, records.ErrTooLarge):
		code = kerr.MessageTooLarge.Code
	}
	return &codedError{code: code, err: err}
}

// invalidAcksResponse answers a produce whose acks is not -1, 0 or 1, as
// Kafka's broker does: UNKNOWN_TOPIC_OR_PARTITION for partitions that do
// not exist (found before the acks check), INVALID_REQUIRED_ACKS for the
// others; nothing is appended or auto-created.
func invalidAcksResponse(c *conn, req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse) *kmsg.ProduceResponse {
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			sp := &st.Partitions[pi]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.BaseOffset = rp.Partition, -1
			err := error(&codedError{code: kerr.InvalidRequiredAcks.Code, err: fmt.Errorf("acks %d: must be -1 (all), 0 (none) or 1 (leader)", req.Acks)})
			if _, perr := c.s.eng.Partition(rt.Topic, rp.Partition); errors.Is(perr, engine.ErrUnknownTopic) || errors.Is(perr, engine.ErrInvalidTopic) {
				err = perr
			}
			sp.ErrorCode = errorCode(err)
			if req.Version >= 8 {
				sp.ErrorMessage = errMessage(err)
			}
		}
	}
	return resp
}

// verifyTxn asks the transaction's coordinator whether topic/partition is
// in the producer's ongoing transaction, and turns its answer into the
// error a produce answers.
func (c *conn) verifyTxn(txnID string, u *engine.TxnUnverifiedError, topic string, partition int32) error {
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	err := c.s.eng.VerifyTxn(ctx, txnID, u.ProducerID, u.ProducerEpoch, topic, partition)
	if err == nil {
		return nil
	}
	code := errorCode(err)
	var ke *kerr.Error
	if errors.As(err, &ke) {
		code = ke.Code
	}
	switch code {
	case kerr.InvalidProducerEpoch.Code, kerr.ProducerFenced.Code:
		code = kerr.InvalidProducerEpoch.Code
	case kerr.InvalidTxnState.Code, kerr.InvalidProducerIDMapping.Code:
		code = kerr.InvalidTxnState.Code
	default:
		// The coordinator is moving, loading or busy: retriable.
		code = kerr.NotEnoughReplicas.Code
	}
	return &codedError{code: code, err: fmt.Errorf("verify transaction %q at %s/%d: %w", txnID, topic, partition, err)}
}

// splitBatches cuts a partition's record set into its batches by their
// length fields.
func splitBatches(records []byte) ([]partlog.Checked, error) {
	if len(records) == 0 {
		// Kafka: INVALID_RECORD (not the retriable CORRUPT_MESSAGE).
		return nil, fmt.Errorf("%w: produce requests must carry at least one record batch per partition", engine.ErrInvalidRecord)
	}
	var out []partlog.Checked
	for len(records) > 0 {
		// The magic byte sits at byte 16 in every message format. Kafka
		// refuses old formats in Produce v3+ with the non-retriable
		// INVALID_RECORD; CORRUPT_MESSAGE would make clients retry.
		if len(records) > 16 && records[16] != 2 {
			return nil, fmt.Errorf("%w: produce requests with version 3 and above may only carry magic v2 record batches, got magic %d", engine.ErrInvalidRecord, records[16])
		}
		if len(records) < 12 {
			return nil, fmt.Errorf("%w: %d trailing bytes are not a batch", partlog.ErrCorruptBatch, len(records))
		}
		size := int64(int32(binary.BigEndian.Uint32(records[8:12]))) + 12
		if size < 12+49 || size > int64(len(records)) {
			return nil, fmt.Errorf("%w: batch length %d does not fit the %d bytes sent", partlog.ErrCorruptBatch, size-12, len(records))
		}
		b, err := partlog.Check(records[:size:size])
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", len(out), err)
		}
		out = append(out, b)
		records = records[size:]
	}
	return out, nil
}
