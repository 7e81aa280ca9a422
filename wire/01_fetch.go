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
// * read_committed (isolation level 1) returns batches only below the last
//   stable offset (the first offset of the oldest open transaction), and
//   lists the aborted transactions whose records the answer may hold, so
//   the client drops them; read_uncommitted gets everything up to the high
//   watermark.
// * Sessions (KIP-227) are not kept: every answer is a full, sessionless one
//   (SessionID 0), which clients accept.
//
// Version notes:
// * v4: isolation level, LastStableOffset, AbortedTransactions
// * v5: LogStartOffset
// * v7: sessions
// * v9: CurrentLeaderEpoch
// * v11: rack id, PreferredReadReplica (always -1)
// * v12: flexible

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/volume/partlog"
)

func handleFetch(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.FetchRequest)
	c.async(r, func() {
		wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
		deadline := time.Now().Add(wait)
		var refs []partlog.Ref
		// New data wakes this fetch only through the partitions it asked
		// for; routing changes through the engine.
		w := &fetchWatch{wake: make(chan struct{}, 1)}
		defer w.stop()
		for {
			changed := c.s.eng.Changed()
			var resp *kmsg.FetchResponse
			var n int
			var errs bool
			resp, refs, n, errs = c.s.fetchOnce(req, refs[:0], w)
			left := time.Until(deadline)
			if n >= int(req.MinBytes) || errs || left <= 0 {
				// The writer sends the refs' file ranges, then releases them
				// (also when the connection broke).
				r.refs = refs
				r.release = func() { releaseRefs(refs) }
				r.finish(resp)
				return
			}
			// Waiting: hold no segment handles meanwhile.
			releaseRefs(refs)
			t := time.NewTimer(left)
			select {
			case <-changed:
			case <-w.wake:
			case <-t.C:
			case <-c.ctx.Done():
				// The connection's writer has failed: nothing will be
				// written. Answer without records.
				t.Stop()
				r.finish(resp)
				return
			}
			t.Stop()
		}
	})
}

// fetchWatch is one long-poll fetch's registration with the partitions it
// reads. It registers before reading a partition's high watermark, so an
// append that lands after the read still wakes it.
type fetchWatch struct {
	wake    chan struct{}
	watched []*engine.Partition
}

func (w *fetchWatch) add(p *engine.Partition) {
	if w == nil || slices.Contains(w.watched, p) {
		return
	}
	p.Watch(w.wake)
	w.watched = append(w.watched, p)
}

func (w *fetchWatch) stop() {
	for _, p := range w.watched {
		p.Unwatch(w.wake)
	}
}

// releaseRefs releases every ref (empty ones are no-ops) and clears them.
func releaseRefs(refs []partlog.Ref) {
	for i := range refs {
		refs[i].Release()
		refs[i] = partlog.Ref{}
	}
}

// fetchOnce builds one answer. Record sets are not copied: each partition
// gets one entry in refs (appended, in answer order; empty when it has no
// records), a reference to the batches in their segment file that the
// writer sends with sendfile where it can (appendFetchResponse, writePieces)
// and then releases. It reports the bytes of records in the answer and
// whether any partition carries an error (answered at once, like Kafka).
func (s *Server) fetchOnce(req *kmsg.FetchRequest, refs []partlog.Ref, w *fetchWatch) (*kmsg.FetchResponse, []partlog.Ref, int, bool) {
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
			ref, n, failed := s.fetchPartition(&sp, rt.Topic, rp, req.IsolationLevel == 1, remaining, total, w)
			refs = append(refs, ref)
			total += n
			remaining -= n
			anyErr = anyErr || failed
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, refs, total, anyErr
}

// fetchPartition fills sp for one requested partition and returns the
// reference to its records (empty if none), their size, and whether sp
// carries an error. total is the record bytes of the answer so far.
func (s *Server) fetchPartition(sp *kmsg.FetchResponseTopicPartition, topic string, rp kmsg.FetchRequestTopicPartition, committed bool, remaining, total int, w *fetchWatch) (partlog.Ref, int, bool) {
	part, err := s.eng.Partition(topic, rp.Partition)
	if err != nil {
		sp.ErrorCode = errorCode(err)
		return partlog.Ref{}, 0, true
	}
	w.add(part)
	lg := part.Log()
	if code := epochCheck(rp.CurrentLeaderEpoch, part.Epoch()); code != 0 {
		sp.ErrorCode = code
		return partlog.Ref{}, 0, true
	}
	hw := lg.HighWatermark()
	lso := part.LastStableOffset()
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, lso, lg.LogStartOffset()
	if rp.FetchOffset < lg.LogStartOffset() || rp.FetchOffset > hw {
		sp.ErrorCode = kerr.OffsetOutOfRange.Code
		return partlog.Ref{}, 0, true
	}
	end := hw
	if committed {
		end = lso
	}
	limit := min(int(rp.PartitionMaxBytes), remaining)
	if rp.FetchOffset >= end || (limit <= 0 && total > 0) {
		return partlog.Ref{}, 0, false
	}
	if limit <= 0 {
		limit = 1 // at least one whole batch
	}
	ref, err := lg.ReadRefBelow(rp.FetchOffset, limit, end)
	if err == nil && committed && ref.Len > 0 {
		// Aborted transactions overlapping what is read: from the fetch
		// offset to the end of the answer, bounded by the last stable
		// offset (a few more than needed are harmless: clients use an
		// entry only once they reach its first offset).
		aborted := part.AbortedTransactions(rp.FetchOffset, end, nil)
		sp.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(aborted))
		for _, a := range aborted {
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
			sp.AbortedTransactions = append(sp.AbortedTransactions, at)
		}
	}
	if err != nil {
		sp.ErrorCode = errorCode(err)
		if err == partlog.ErrOffsetOutOfRange {
			sp.ErrorCode = kerr.OffsetOutOfRange.Code
		}
		return partlog.Ref{}, 0, true
	}
	return ref, ref.Len, false
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
