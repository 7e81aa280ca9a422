package wire

// Produce: versions 3-9.
//
// Behavior:
// * Each partition's records are split into RecordBatch v2 batches, each
//   validated (length, magic, CRC-32C, offsets, max.message.bytes) and
//   checked against idempotent-producer state, then appended as received
//   with leader-assigned offsets. Compressed batches are stored as they came.
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
			last, first, err := appendBatches(part, rp.Records, req.TransactionID != nil)
			var unverified *engine.TxnUnverifiedError
			if errors.As(err, &unverified) {
				// The transaction's first batch here: verify, then append
				// again. On the read path, so this connection's appends
				// keep their order; it costs one round trip per
				// transaction and partition.
				if err = c.verifyTxn(*req.TransactionID, unverified, rt.Topic, rp.Partition); err == nil {
					part.Verified(unverified.ProducerID, unverified.ProducerEpoch)
					last, first, err = appendBatches(part, rp.Records, true)
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
// partition's record set is all or nothing: every batch's framing, magic and
// CRC are checked before the first one is appended, so a bad batch after a
// good one cannot leave the good one written under an error answer (which
// the client would retry, duplicating it).
func appendBatches(part *engine.Partition, records []byte, transactional bool) (int64, engine.ProduceResult, error) {
	var (
		first engine.ProduceResult
		last  int64 = -1
	)
	batches, err := splitBatches(records)
	if err != nil {
		return 0, first, err
	}
	if !transactional {
		for _, b := range batches {
			if binary.BigEndian.Uint16(b[21:23])&attrTransactional != 0 {
				return 0, first, fmt.Errorf("%w: a transactional batch needs the produce request's transactional ID", engine.ErrInvalidRecord)
			}
		}
	}
	if len(batches) > 1 {
		// One batch is validated by Append itself before anything is written.
		for n, b := range batches {
			if _, err := partlog.ValidateBatch(b); err != nil {
				return 0, first, fmt.Errorf("batch %d: %w", n, err)
			}
		}
	}
	for n, b := range batches {
		l, res, err := part.Append(b)
		if err != nil {
			if n > 0 {
				err = fmt.Errorf("batch %d: %w", n, err)
			}
			return 0, first, err
		}
		if n == 0 {
			first = res
		}
		last = max(last, l)
	}
	return last, first, nil
}

// attrTransactional is the transactional bit of a batch's attributes
// (bytes 21-22 of a batch).
const attrTransactional = 0x10

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
func splitBatches(records []byte) ([][]byte, error) {
	if len(records) == 0 {
		// Kafka: INVALID_RECORD (not the retriable CORRUPT_MESSAGE).
		return nil, fmt.Errorf("%w: produce requests must carry at least one record batch per partition", engine.ErrInvalidRecord)
	}
	var out [][]byte
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
		out = append(out, records[:size:size])
		records = records[size:]
	}
	return out, nil
}
