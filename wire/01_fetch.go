package wire

// Fetch: versions 4-15.
//
// Behavior:
// * Returns whole batches, starting with the batch that contains the fetch
//   offset (clients skip the records below it), never past the high
//   watermark: only fsynced data is readable, so nothing a consumer saw can
//   vanish in a crash.
// * Long poll: waits up to MaxWaitMillis for MinBytes, woken by appends.
//   MaxWaitMillis is capped at the broker's MaxFetchWait (30 s), and a
//   client's close ends its long polls at once.
// * An answer holds at most min(MaxBytes, the broker's fetch.max.bytes,
//   55 MiB by default) of records. The first partition with data gets at
//   least one whole batch even when it exceeds the byte limits (KIP-74),
//   so consumers always progress; later partitions never exceed them.
// * A partition named more than once in a request is answered once, at its
//   first place, with the last entry's fetch position (Kafka reads the
//   request into a map keyed by partition).
// * CurrentLeaderEpoch (v9+) older than ours: FENCED_LEADER_EPOCH; newer:
//   UNKNOWN_LEADER_EPOCH (KIP-320).
// * read_committed (isolation level 1) returns batches only below the last
//   stable offset (the first offset of the oldest open transaction), and
//   lists the aborted transactions whose records the answer may hold, so
//   the client drops them; read_uncommitted gets everything up to the high
//   watermark.
// * Sessions (KIP-227) are not kept: every answer is a full, sessionless one
//   (SessionID 0), which clients accept.
// * From v13 topics are named by topic ID only. An ID that is not the live
//   incarnation of a topic (never created, or deleted, perhaps recreated
//   under its name with a new ID) gets UNKNOWN_TOPIC_ID on each of its
//   partitions: a partition is served only while the incarnation the
//   request names is the one whose log this broker serves, so records of
//   one incarnation are never answered for another. (franz-go keeps a
//   cursor's topic ID for good: on a new ID in metadata it stops and its
//   fetches fail UNKNOWN_TOPIC_ID until the topic is purged and re-added.)
// * A consumer_byte_rate quota (quota_enforce.go) bounds an answer to the
//   quota's bytes in one window (1 s), as Kafka does; a client over it is
//   answered without records with its ThrottleTimeMs (and, from v8, its
//   connection is not read meanwhile; below v8 the answer comes late).
// * Authorization (Kafka's, for consumers): READ on each topic, else its
//   partitions are TOPIC_AUTHORIZATION_FAILED (answered at once). kaas has
//   no follower fetches, so none needs CLUSTER_ACTION.
//
// Version notes:
// * v4: isolation level, LastStableOffset, AbortedTransactions
// * v5: LogStartOffset
// * v7: sessions
// * v9: CurrentLeaderEpoch
// * v11: rack id, PreferredReadReplica (always -1)
// * v12: flexible
// * v13: topic IDs instead of names (KIP-516)
// * v14: OFFSET_MOVED_TO_TIERED_STORAGE (never answered: no tiers)
// * v15: ReplicaState replaces ReplicaID (KIP-903; a follower's field:
//   kaas has none and ignores it, as it ignored ReplicaID)
// * v16 (NodeEndpoints and CurrentLeader hints with NOT_LEADER_OR_FOLLOWER,
//   KIP-951) is not served yet.

import (
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/volume/partlog"
)

func handleFetch(c *conn, kreq kmsg.Request, r *reply) {
	req := collapseDuplicates(kreq.(*kmsg.FetchRequest))
	c.async(r, func() {
		wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, c.s.cfg.MaxFetchWait)
		deadline := time.Now().Add(wait)
		var refs []partlog.Ref
		var parts []*dataplane.Partition
		// New data wakes this fetch only through the partitions it asked
		// for; routing changes through the engine.
		w := &fetchWatch{wake: make(chan struct{}, 1)}
		defer w.stop()
		var readable func(string) bool // nil: every topic
		if c.authzOn() {
			readable = func(topic string) bool { return c.allowedTopic(kmsg.ACLOperationRead, topic) }
		}
		// A consumer quota bounds the answer (quota_enforce.go).
		maxBytes := c.s.quotas.fetchCap(r.quotaUser, r.clientID)
		for {
			changed := c.s.eng.Changed()
			var resp *kmsg.FetchResponse
			var n int
			var errs bool
			start := time.Now()
			resp, refs, parts, n, errs = c.s.fetchOnce(req, refs[:0], parts[:0], w, readable, maxBytes)
			r.spent += time.Since(start) // reads count as handler time, waits do not
			left := time.Until(deadline)
			if n >= int(req.MinBytes) || errs || left <= 0 {
				// The writer sends the refs' file ranges, then releases them
				// (also when the connection broke).
				r.refs, r.parts, r.size = refs, parts, int64(n)
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
	watched []*dataplane.Partition
}

func (w *fetchWatch) add(p *dataplane.Partition) {
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
// maxBytes, when > 0, bounds the answer further (a consumer quota). parts
// gets the partition of each entry of refs (nil for none), for metrics.
func (s *Server) fetchOnce(req *kmsg.FetchRequest, refs []partlog.Ref, parts []*dataplane.Partition, w *fetchWatch, readable func(string) bool, maxBytes int) (*kmsg.FetchResponse, []partlog.Ref, []*dataplane.Partition, int, bool) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	remaining := int(s.cfg.FetchMaxBytes)
	if req.MaxBytes > 0 {
		remaining = min(remaining, int(req.MaxBytes))
	}
	if maxBytes > 0 {
		remaining = min(remaining, maxBytes)
	}
	total, anyErr := 0, false
	resp.Topics = make([]kmsg.FetchResponseTopic, 0, len(req.Topics))
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions))
		// From v13 the topic is named by ID: the name is looked up, and
		// each partition is checked to be of that incarnation.
		var id string
		known := true
		if req.Version >= 13 {
			st.Topic, id, known = s.topicByID(rt.TopicID)
		}
		denied := known && readable != nil && !readable(st.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			// Empty, not null: librdkafka rejects a null record set.
			sp.RecordBatches = []byte{}
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			if !known || denied {
				sp.ErrorCode = kerr.UnknownTopicID.Code
				if denied {
					sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				}
				refs = append(refs, partlog.Ref{})
				parts = append(parts, nil)
				anyErr = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			ref, part, n, failed := s.fetchPartition(&sp, st.Topic, id, rp, req.IsolationLevel == 1, remaining, total, w)
			refs = append(refs, ref)
			parts = append(parts, part)
			total += n
			remaining -= n
			anyErr = anyErr || failed
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, refs, parts, total, anyErr
}

// fetchPartition fills sp for one requested partition and returns the
// reference to its records (empty if none), the partition they are of,
// their size, and whether sp carries an error. total is the record bytes
// of the answer so far. A non-empty topicID (v13+) is the incarnation
// asked for: a partition of another one is UNKNOWN_TOPIC_ID.
func (s *Server) fetchPartition(sp *kmsg.FetchResponseTopicPartition, topic, topicID string, rp kmsg.FetchRequestTopicPartition, committed bool, remaining, total int, w *fetchWatch) (partlog.Ref, *dataplane.Partition, int, bool) {
	part, err := s.eng.Partition(topic, rp.Partition)
	// By ID: another incarnation is served under the name now, or the
	// name routes none (an error for a live ID keeps its own code).
	if topicID != "" && ((err == nil && part.TopicID != topicID) || (err != nil && !s.liveTopicID(topicID))) {
		sp.ErrorCode = kerr.UnknownTopicID.Code
		return partlog.Ref{}, nil, 0, true
	}
	if err != nil {
		sp.ErrorCode = errorCode(err)
		return partlog.Ref{}, nil, 0, true
	}
	w.add(part)
	lg := part.Log()
	if code := epochCheck(rp.CurrentLeaderEpoch, part.Epoch()); code != 0 {
		sp.ErrorCode = code
		return partlog.Ref{}, nil, 0, true
	}
	hw := lg.HighWatermark()
	lso := part.LastStableOffset()
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, lso, lg.LogStartOffset()
	if rp.FetchOffset < lg.LogStartOffset() || rp.FetchOffset > hw {
		sp.ErrorCode = kerr.OffsetOutOfRange.Code
		return partlog.Ref{}, nil, 0, true
	}
	end := hw
	if committed {
		end = lso
	}
	limit := min(int(rp.PartitionMaxBytes), remaining)
	if rp.FetchOffset >= end || (limit <= 0 && total > 0) {
		return partlog.Ref{}, nil, 0, false
	}
	if limit <= 0 {
		limit = 1 // at least one whole batch
	}
	ref, err := lg.ReadRefBelow(rp.FetchOffset, limit, end)
	if err == nil && total > 0 && ref.Len > limit {
		// Only the first partition with data may exceed the limits by
		// its first batch (the log returns at least one).
		ref.Release()
		return partlog.Ref{}, nil, 0, false
	}
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
		return partlog.Ref{}, nil, 0, true
	}
	return ref, part, ref.Len, false
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

// topicByID returns the name of the live topic with this ID and the ID as
// a string; ok false when no live topic has it.
func (s *Server) topicByID(id [16]byte) (name, sid string, ok bool) {
	sid = uuid.UUID(id).String()
	name, ok = s.eng.TopicName(sid)
	return name, sid, ok
}

// liveTopicID reports whether id is the live incarnation of its topic
// (the error paths of fetches by ID).
func (s *Server) liveTopicID(id string) bool {
	_, ok := s.eng.TopicName(id)
	return ok
}
