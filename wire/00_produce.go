package wire

// Produce: versions 3-9.
//
// Behavior:
// * acks other than -1, 0 and 1 is INVALID_REQUIRED_ACKS for every
//   partition that exists (UNKNOWN_TOPIC_OR_PARTITION for the others, no
//   auto-create), as Kafka answers, and nothing is written.
// * Each partition's records are exactly one RecordBatch v2 (Kafka's rule
//   for Produce v3+: none, another magic or a second batch is
//   INVALID_RECORD; zstd before v7 is UNSUPPORTED_COMPRESSION_TYPE),
//   validated (length, magic, CRC-32C once, offsets, max.message.bytes) and
//   checked against idempotent-producer state, then appended with
//   leader-assigned offsets. Batches are stored with the codec they came
//   with, unless the topic's compression.type names another: then the
//   batch is re-encoded with it (records, offsets, timestamps and producer
//   fields unchanged, CRC new) and max.message.bytes applies to the result,
//   as Kafka's LogValidator does.
// * On a CreateTime topic, each record's timestamp (but -1) must lie within
//   message.timestamp.before.max.ms before and after.max.ms after the
//   owner's clock, else the batch is INVALID_TIMESTAMP with Kafka's
//   message, and from v8 a RecordErrors entry per record out of range.
// * On a topic whose cleanup.policy includes compact, a record with a null
//   key refuses its batch with INVALID_RECORD, Kafka's message, and from
//   v8 a RecordErrors entry per keyless record ("Compacted topic cannot
//   accept message without key in topic partition <topic>-<partition>").
// * Every record of the batch is decoded first, as Kafka's LogValidator
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
// * A producer_byte_rate quota, or the broker-wide
//   --max-produce-bytes-per-second, meters each request's bytes
//   (quota_enforce.go): over it the records are still appended, and the
//   answer carries ThrottleTimeMs; from v6 the connection is then not read
//   for that long (an acks=0 producer's too), below v6 the answer is late.
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
// * Authorization (Kafka's): a request with transactional batches needs
//   WRITE on its transactional ID, else every partition is
//   TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing is written. Each
//   topic needs WRITE (one check per topic), else its partitions are
//   TOPIC_AUTHORIZATION_FAILED; auto-creation needs CREATE on the cluster
//   or the topic, else the topic stays unknown.
//
// Version notes:
// * v3: transactional ID
// * v5: LogStartOffset
// * v8: per-partition ErrorMessage
// * v9: flexible

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/records"
)

type pendingSync struct {
	part *dataplane.Partition
	last int64
	rp   *kmsg.ProduceResponseTopicPartition
	sync dataplane.PendingSync
}

func handleProduce(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	eng := c.s.eng
	if req.Acks != -1 && req.Acks != 0 && req.Acks != 1 {
		r.finish(invalidAcksResponse(c, req, resp))
		return
	}
	if c.authzOn() && !c.allowedTxnRecords(req) {
		r.finish(txnDeniedProduceResponse(req, resp))
		return
	}
	// A compressed batch may inflate to at most what one request may carry
	// uncompressed: a bomb costs no more than a plain request.
	limit := int(c.s.cfg.MaxFrameBytes)
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	// The request's time bounds its wait for write slots (back-pressure
	// when too many partitions hold appends not yet fsynced) and for its
	// rounds.
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	var pending []pendingSync
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := &resp.Topics[ti]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		// One check per topic, not per partition or record.
		var denied error
		if !c.allowedTopic(kmsg.ACLOperationWrite, rt.Topic) {
			denied = topicDeniedError(kmsg.ACLOperationWrite, rt.Topic)
		}
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			sp := &st.Partitions[pi]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			setErr := func(err error) {
				sp.ErrorCode = errorCode(err)
				if req.Version >= 8 {
					sp.ErrorMessage = errMessage(err)
					sp.ErrorRecords = recordErrors(err)
				}
			}
			if denied != nil {
				sp.BaseOffset = -1
				setErr(denied)
				continue
			}
			part, err := eng.Partition(rt.Topic, rp.Partition)
			if errors.Is(err, engine.ErrUnknownTopic) {
				if _, known := eng.Topic(rt.Topic); !known && eng.AutoCreateEnabled() && c.mayCreateTopic(rt.Topic) {
					if cerr := eng.AutoCreate(rt.Topic); cerr != nil {
						err = cerr
					}
				}
			}
			if err != nil {
				setErr(err)
				continue
			}
			if err := part.ReserveWrite(ctx); err != nil {
				setErr(err)
				continue
			}
			last, first, err := appendBatch(part, rp.Records, req.Version, req.TransactionID != nil, limit)
			var unverified *dataplane.TxnUnverifiedError
			if errors.As(err, &unverified) {
				// The transaction's first batch here: verify, then append
				// again. On the read path, so this connection's appends
				// keep their order; it costs one round trip per
				// transaction and partition.
				if err = c.verifyTxn(*req.TransactionID, unverified, rt.Topic, rp.Partition); err == nil {
					part.Verified(unverified.ProducerID, unverified.ProducerEpoch)
					last, first, err = appendBatch(part, rp.Records, req.Version, true, limit)
				}
			}
			if err != nil {
				part.ReleaseReserved()
				setErr(err)
				continue
			}
			sp.BaseOffset = first.BaseOffset
			sp.LogStartOffset = first.LogStartOffset
			if c.s.metrics != nil {
				part.Traffic.Produced(int64(len(rp.Records)), last-first.BaseOffset+1)
			}
			// The round is asked for now, not after the request's last
			// append: a later partition's wait for a write slot may need
			// this one's round to give its slot back.
			pending = append(pending, pendingSync{part: part, last: last, rp: sp, sync: part.SyncLater(last)})
		}
	}
	if req.Acks == 0 {
		// No response, but the data still has to become durable and visible.
		cancel()
		r.finish(nil)
		if len(pending) > 0 {
			go func() {
				for _, p := range pending {
					_ = p.sync.Wait(context.Background())
				}
			}()
		}
		return
	}
	if len(pending) == 0 {
		cancel()
		r.finish(resp)
		return
	}
	c.async(r, func() {
		defer cancel()
		for _, p := range pending {
			if err := p.sync.Wait(ctx); err != nil {
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

// appendBatch checks and appends a partition's record set, which holds
// exactly one RecordBatch v2 (Kafka's ProduceRequest.validateRecords for
// v3 and later, kaas's every version): its framing, header and CRC, the
// batch-level rules of Kafka's LogValidator for clients, then every record
// (decompressed to at most limit bytes), before anything is appended. It
// returns the batch's last offset and the append's result.
func appendBatch(part *dataplane.Partition, recs []byte, version int16, transactional bool, limit int) (int64, dataplane.ProduceResult, error) {
	var res dataplane.ProduceResult
	b, err := onlyBatch(recs, version)
	if err != nil {
		return 0, res, err
	}
	h := b.Header()
	switch {
	case !transactional && h.IsTransactional():
		return 0, res, fmt.Errorf("%w: a transactional batch needs the produce request's transactional ID", dataplane.ErrInvalidRecord)
	case h.IsControl():
		return 0, res, fmt.Errorf("%w: clients may not write control batches", dataplane.ErrInvalidRecord)
	case h.ProducerID >= 0 && h.BaseSequence < 0:
		return 0, res, fmt.Errorf("%w: sequence %d in a batch of producer ID %d", dataplane.ErrInvalidRecord, h.BaseSequence, h.ProducerID)
	case h.LogAppendTime():
		return 0, res, &codedError{code: kerr.InvalidTimestamp.Code, err: errors.New("producers may not set the timestamp type to LogAppendTime")}
	case h.Compression() == codecZstd && version < 7:
		return 0, res, &codedError{code: kerr.UnsupportedCompressionType.Code, err: fmt.Errorf("produce requests with version %d may not use zstd compression (version 7 and later)", version)}
	}
	c, err := part.Prepare(b, limit)
	if err != nil {
		var refused *dataplane.RecordsRefusedError
		if errors.As(err, &refused) {
			return 0, res, err
		}
		return 0, res, recordsError(err)
	}
	return part.AppendChecked(c)
}

// recordErrors lists the records a refusal names, for Produce v8+.
func recordErrors(err error) []kmsg.ProduceResponseTopicPartitionErrorRecord {
	var refused *dataplane.RecordsRefusedError
	if !errors.As(err, &refused) {
		return nil
	}
	out := make([]kmsg.ProduceResponseTopicPartitionErrorRecord, len(refused.Records))
	for i, r := range refused.Records {
		out[i] = kmsg.NewProduceResponseTopicPartitionErrorRecord()
		out[i].RelativeOffset, out[i].ErrorMessage = r.Index, kmsg.StringPtr(r.Message)
	}
	return out
}

// codecZstd is zstd's compression codec ID in a batch's attributes.
const codecZstd = 4

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
			if _, perr := c.s.eng.Partition(rt.Topic, rp.Partition); errors.Is(perr, engine.ErrUnknownTopic) || errors.Is(perr, desired.ErrInvalidTopic) {
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
func (c *conn) verifyTxn(txnID string, u *dataplane.TxnUnverifiedError, topic string, partition int32) error {
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

// onlyBatch returns the one batch of a partition's record set, checked
// (partlog.CheckProduced). As Kafka does for Produce v3 and later, a
// record set that is empty, holds a batch of another magic, or holds more
// than one batch is INVALID_RECORD (not the retriable CORRUPT_MESSAGE,
// which would make clients retry).
func onlyBatch(recs []byte, version int16) (partlog.Checked, error) {
	b, err := partlog.CheckProduced(recs)
	if err == nil {
		return b, nil // before errors.As, whose target would escape on every call
	}
	var rse *partlog.RecordSetError
	if !errors.As(err, &rse) {
		return b, err
	}
	switch rse.Fault {
	case partlog.NoBatch:
		return b, fmt.Errorf("%w: produce requests with version %d must have at least one record batch per partition", dataplane.ErrInvalidRecord, version)
	case partlog.OtherMagic:
		return b, fmt.Errorf("%w: produce requests with version %d are only allowed to contain record batches with magic version 2, got magic %d", dataplane.ErrInvalidRecord, version, uint8(rse.Magic))
	default:
		return b, fmt.Errorf("%w: produce requests with version %d are only allowed to contain exactly one record batch per partition", dataplane.ErrInvalidRecord, version)
	}
}
