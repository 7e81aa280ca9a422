package wire

// Fetch: versions 4-12.
//
// Behavior:
// * Returns whole batches, starting with the batch that contains the fetch
//   offset (clients skip the records below it), never past the high
//   watermark: only fsynced data is readable, so nothing a consumer saw can
//   vanish in a crash.
// * Long poll: waits up to MaxWaitMillis for MinBytes, woken by appends.
// * The first partition with data gets at least one whole batch even when
//   it exceeds the byte limits (KIP-74), so consumers always progress.
// * CurrentLeaderEpoch (v9+) older than ours: FENCED_LEADER_EPOCH; newer:
//   UNKNOWN_LEADER_EPOCH (KIP-320).
// * Sessions (KIP-227) are not kept: every answer is a full, sessionless one
//   (SessionID 0), which clients accept.
//
// Version notes:
// * v4: isolation level, LastStableOffset (= high watermark: no transactions)
// * v5: LogStartOffset
// * v7: sessions
// * v9: CurrentLeaderEpoch
// * v11: rack id, PreferredReadReplica (always -1)
// * v12: flexible

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/volume/partlog"
)

func handleFetch(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.FetchRequest)
	c.async(r, func() {
		wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
		deadline := time.Now().Add(wait)
		recs := fetchBufPool.Get().(*[]byte)
		for {
			changed := c.s.eng.Changed()
			resp, n, errs := c.s.fetchOnce(req, recs)
			left := time.Until(deadline)
			if n >= int(req.MinBytes) || errs || left <= 0 {
				r.release = func() { fetchBufPool.Put(recs) }
				r.finish(resp)
				return
			}
			t := time.NewTimer(left)
			select {
			case <-changed:
			case <-t.C:
			case <-c.ctx.Done():
				t.Stop()
				r.release = func() { fetchBufPool.Put(recs) }
				r.finish(resp)
				return
			}
			t.Stop()
		}
	})
}

// fetchBufPool recycles the buffers fetch answers read record batches into
// (one per answer, shared by its partitions): a fresh one per partition per
// answer cost more in page faults and GC than the reads (kaasbench catch-up
// consume). Idle buffers go at GC.
var fetchBufPool = sync.Pool{New: func() any { return new([]byte) }}

// fetchOnce builds one answer, reading record batches into *recs (the
// answer references it until written); it reports the bytes of records in
// it and whether any partition carries an error (answered at once, like
// Kafka).
func (s *Server) fetchOnce(req *kmsg.FetchRequest, recs *[]byte) (*kmsg.FetchResponse, int, bool) {
	*recs = (*recs)[:0]
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	remaining := int(req.MaxBytes)
	if req.Version < 3 || remaining <= 0 {
		remaining = 1 << 30
	}
	total, anyErr := 0, false
	resp.Topics = make([]kmsg.FetchResponseTopic, 0, len(req.Topics))
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions))
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			// Empty, not null: librdkafka rejects a null record set.
			sp.RecordBatches = []byte{}
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			part, err := s.eng.Partition(rt.Topic, rp.Partition)
			if err != nil {
				sp.ErrorCode = errorCode(err)
				anyErr = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			lg := part.Log()
			if code := epochCheck(rp.CurrentLeaderEpoch, part.Epoch()); code != 0 {
				sp.ErrorCode = code
				anyErr = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			hw := lg.HighWatermark()
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, hw, lg.LogStartOffset()
			if rp.FetchOffset < lg.LogStartOffset() || rp.FetchOffset > hw {
				sp.ErrorCode = kerr.OffsetOutOfRange.Code
				anyErr = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			limit := min(int(rp.PartitionMaxBytes), remaining)
			if rp.FetchOffset < hw && (limit > 0 || total == 0) {
				if limit <= 0 {
					limit = 1 // at least one whole batch
				}
				// Read appends; if it has to grow *recs, the batches of
				// earlier partitions keep the old array (still valid).
				n0 := len(*recs)
				buf, err := lg.Read(rp.FetchOffset, limit, *recs)
				*recs = buf
				if err != nil {
					sp.ErrorCode = errorCode(err)
					if err == partlog.ErrOffsetOutOfRange {
						sp.ErrorCode = kerr.OffsetOutOfRange.Code
					}
					anyErr = true
				} else if n := len(buf) - n0; n > 0 {
					sp.RecordBatches = buf[n0:len(buf):len(buf)]
					total += n
					remaining -= n
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, total, anyErr
}

// epochCheck compares a client's CurrentLeaderEpoch with ours (-1: none).
func epochCheck(client, ours int32) int16 {
	switch {
	case client < 0 || client == ours:
		return 0
	case client < ours:
		return kerr.FencedLeaderEpoch.Code
	default:
		return kerr.UnknownLeaderEpoch.Code
	}
}
