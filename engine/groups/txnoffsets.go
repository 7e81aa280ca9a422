package groups

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactional offset commits (TxnOffsetCommit, KIP-98/KIP-447), as
// Kafka's GroupMetadata pending transactional offsets.
//
// A TxnOffsetCommit writes one pending record per partition: key version
// txnOffsetKeyVersion (1001), the producer ID, then group, topic and
// partition as in an offset commit key; the value is the offset commit
// value a plain commit would write. The group keeps them, per producer ID
// (last write wins per partition), apart from its committed offsets:
// OffsetFetch does not show them, and with requireStable answers
// UNSTABLE_OFFSET_COMMIT for their partitions.
//
// Each pending commit carries the topic ID of the incarnation live when
// the TxnOffsetCommit arrived (incarnations.go); the commit at the
// transaction's end keeps it.
//
// The transaction's end reaches the group coordinator as CompleteTxn (the
// transaction coordinator's marker for the group). A commit writes the
// plain offset commit records of the pending offsets and tombstones of
// their pending records, in one batch; an abort writes only the
// tombstones. So the log alone says what is pending and what is committed,
// and compaction keeps exactly that: Kafka gets the same from transaction
// markers in __consumer_offsets, which kaas's log does not have.
//
// Unlike Kafka, where a plain commit appended between the TxnOffsetCommit
// and the commit marker wins over the transactional one, the committed
// transaction's offsets win here, being written later: replay and the live
// coordinator agree on that order.

// txnOffsetKey is a pending record's key (see records.go).
func txnOffsetKey(producerID int64, group, topic string, partition int32) []byte {
	k := make([]byte, 0, 2+8+2+len(group)+2+len(topic)+4)
	k = kbin.AppendInt16(k, txnOffsetKeyVersion)
	k = kbin.AppendInt64(k, producerID)
	k = kbin.AppendString(k, group)
	k = kbin.AppendString(k, topic)
	return kbin.AppendInt32(k, partition)
}

// readTxnOffsetKey parses txnOffsetKey.
func readTxnOffsetKey(key []byte) (producerID int64, group string, tp topicPartition, err error) {
	b := kbin.Reader{Src: key}
	version := b.Int16()
	producerID = b.Int64()
	group = b.String()
	tp.topic = b.String()
	tp.partition = b.Int32()
	if err := b.Complete(); err != nil {
		return 0, "", tp, err
	}
	if version != txnOffsetKeyVersion || len(b.Src) != 0 {
		return 0, "", tp, fmt.Errorf("malformed pending offset key (version %d, %d trailing bytes)", version, len(b.Src))
	}
	return producerID, group, tp, nil
}

// txnOffsetRecord is a pending commit: the value a plain commit writes.
func txnOffsetRecord(producerID int64, group string, tp topicPartition, o committedOffset) Record {
	r := offsetCommitRecord(group, tp, o)
	r.Key = txnOffsetKey(producerID, group, tp.topic, tp.partition)
	return r
}

func txnOffsetTombstone(producerID int64, group string, tp topicPartition) Record {
	return Record{Key: txnOffsetKey(producerID, group, tp.topic, tp.partition)}
}

// addTxnOffset records a pending commit of producerID (last write wins).
func (c *Coordinator) addTxnOffset(g *group, producerID int64, tp topicPartition, o committedOffset) {
	if g.txnOffsets == nil {
		g.txnOffsets = make(map[int64]map[topicPartition]committedOffset)
	}
	byTP := g.txnOffsets[producerID]
	if byTP == nil {
		byTP = make(map[topicPartition]committedOffset)
		g.txnOffsets[producerID] = byTP
	}
	byTP[tp] = o
	if c.txnGroups == nil {
		c.txnGroups = make(map[int64]map[string]struct{})
	}
	ids := c.txnGroups[producerID]
	if ids == nil {
		ids = make(map[string]struct{})
		c.txnGroups[producerID] = ids
	}
	ids[g.id] = struct{}{}
}

// dropTxnOffsets drops producerID's pending commits of g appended before
// logOffset (replayed ones count as older than any append).
func (c *Coordinator) dropTxnOffsets(g *group, producerID int64, before int64) {
	for tp, o := range g.txnOffsets[producerID] {
		if o.logOffset < before {
			delete(g.txnOffsets[producerID], tp)
		}
	}
	c.pruneTxn(g, producerID)
}

// pruneTxn forgets producerID in g, and g in the index, once g has no
// pending commit of producerID left.
func (c *Coordinator) pruneTxn(g *group, producerID int64) {
	if len(g.txnOffsets[producerID]) > 0 {
		return
	}
	delete(g.txnOffsets, producerID)
	if len(g.txnOffsets) == 0 {
		g.txnOffsets = nil
	}
	c.unindexTxn(producerID, g.id)
}

func (c *Coordinator) unindexTxn(producerID int64, group string) {
	if ids := c.txnGroups[producerID]; ids != nil {
		delete(ids, group)
		if len(ids) == 0 {
			delete(c.txnGroups, producerID)
		}
	}
}

// hasTxnOffset reports whether some transaction has a pending commit for
// tp (KIP-447's unstable offset).
func (g *group) hasTxnOffset(tp topicPartition) bool {
	for _, byTP := range g.txnOffsets {
		if _, ok := byTP[tp]; ok {
			return true
		}
	}
	return false
}

// TxnOffsetCommit stores a transaction's offset commits as pending: they
// are durable before the answer but visible to OffsetFetch only once the
// transaction commits (CompleteTxn). Checks are Kafka's
// doTxnCommitOffsets: a request naming a member or generation (v3+) must
// come from a current member of the current generation, in any group
// state (no REBALANCE_IN_PROGRESS); one that names neither (v0–2 always)
// is taken into any group, an unknown one being created Empty. The
// records go to the journal in one Append.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	n := 0
	resp.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		rt.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rt.Partitions[j].Partition = p.Partition
		}
		n += len(t.Partitions)
	}
	if req.Group == "" {
		setTxnCommitErrors(resp, nil, kerr.InvalidGroupID.Code)
		return resp
	}
	now := c.clock.Now().UnixMilli()
	// The incarnation each topic's commits are for (incarnations.go).
	ids := make([][16]byte, len(req.Topics))
	known := make(map[string][16]byte, len(req.Topics))
	for i, t := range req.Topics {
		ids[i] = c.currentTopicID(known, t.Topic)
	}

	c.mu.Lock()
	g, code := c.txnCommitTarget(req)
	if code != 0 {
		c.mu.Unlock()
		setTxnCommitErrors(resp, nil, code)
		return resp
	}
	commits := make([]pendingCommit, 0, n)
	recs := make([]Record, 0, n)
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			if p.Metadata != nil && len(*p.Metadata) > c.cfg.MaxMetadataBytes {
				resp.Topics[i].Partitions[j].ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			pc := pendingCommit{
				tp:    topicPartition{t.Topic, p.Partition},
				topic: i, result: j,
				value: committedOffset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, committedAt: now, topicID: ids[i]},
			}
			if req.Version < 2 {
				pc.value.leaderEpoch = -1
			}
			if p.Metadata != nil {
				pc.value.metadata = *p.Metadata
			}
			commits = append(commits, pc)
			recs = append(recs, txnOffsetRecord(req.ProducerID, g.id, pc.tp, pc.value))
		}
	}
	if len(recs) == 0 {
		c.mu.Unlock()
		return resp
	}
	first, wait, err := c.cfg.Journal.Append(recs)
	if err != nil {
		c.mu.Unlock()
		c.log.Error(err, "appending transactional offset commit", "group", g.id, "producerID", req.ProducerID)
		setTxnCommitErrors(resp, commits, kerr.NotCoordinator.Code)
		return resp
	}
	// Pending from the append on, as Kafka's prepareTxnOffsetCommit: a
	// CompleteTxn appended after these records must end them, and
	// requireStable fetches see them at once. Should the wait fail, the
	// records may still be durable; keeping them pending stays true to
	// the log either way (the transaction's end drops them).
	for i := range commits {
		commits[i].value.logOffset = first + int64(i)
		c.addTxnOffset(g, req.ProducerID, commits[i].tp, commits[i].value)
	}
	c.mu.Unlock()

	if err := wait(ctx); err != nil {
		c.log.V(1).Info("transactional offset commit not durable", "group", g.id, "producerID", req.ProducerID, "err", err.Error())
		setTxnCommitErrors(resp, commits, kerr.NotCoordinator.Code)
	}
	return resp
}

// txnCommitTarget is Kafka's validateOffsetCommit for a transactional
// commit. Fields of v3+ only are ignored in older requests.
func (c *Coordinator) txnCommitTarget(req *kmsg.TxnOffsetCommitRequest) (*group, int16) {
	if c.closed {
		return nil, kerr.NotCoordinator.Code
	}
	generation, memberID, instanceID := int32(-1), "", (*string)(nil)
	if req.Version >= 3 {
		generation, memberID, instanceID = req.Generation, req.MemberID, req.InstanceID
	}
	g := c.groups[req.Group]
	if generation < 0 && memberID == "" && instanceID == nil {
		if g == nil {
			g = newGroup(req.Group, c.clock.Now())
			c.groups[g.id] = g
		}
		return g, 0
	}
	// Kafka creates the group first; an Empty group has no member, so
	// the answer is the same without leaving an empty group behind.
	if g == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	if code := g.checkInstance(instanceID, memberID); code != 0 {
		return nil, code
	}
	if g.members[memberID] == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	if generation != g.generation {
		return nil, kerr.IllegalGeneration.Code
	}
	return g, 0
}

// setTxnCommitErrors sets code on the partitions of commits, or on every
// partition when commits is nil.
func setTxnCommitErrors(resp *kmsg.TxnOffsetCommitResponse, commits []pendingCommit, code int16) {
	if commits == nil {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
		return
	}
	for _, pc := range commits {
		resp.Topics[pc.topic].Partitions[pc.result].ErrorCode = code
	}
}

// txnCompletion is one group's part of a CompleteTxn batch.
type txnCompletion struct {
	g      *group
	tps    []topicPartition
	values []committedOffset
	at     int // index of the group's first commit record in the batch
}

// CompleteTxn ends producerID's pending offset commits in every group of
// the shard: on commit they become the committed offsets, on abort they
// are dropped; durable before it returns. With nothing pending it is a
// no-op (a re-sent marker). The epoch is not matched: pending commits are
// kept by producer ID, as Kafka keeps them.
//
// Every group's records go in one Append: the offset commit records (on
// commit) and the tombstones of the pending records. The new offsets show,
// and the pending ones go, once that batch is durable; pending commits of
// the producer appended after it (a next transaction) stay. A CompleteTxn
// re-sent while one is in flight writes the same records again, which is
// harmless. A failed write leaves the commits pending (an error; the
// caller retries, or a new owner reloads the shard).
func (c *Coordinator) CompleteTxn(ctx context.Context, producerID int64, epoch int16, commit bool) error {
	_ = epoch
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return kerr.NotCoordinator
	}
	ids := make([]string, 0, len(c.txnGroups[producerID]))
	for id := range c.txnGroups[producerID] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var (
		recs  []Record
		parts []txnCompletion
	)
	for _, id := range ids {
		g := c.groups[id]
		var byTP map[topicPartition]committedOffset
		if g != nil {
			byTP = g.txnOffsets[producerID]
		}
		if len(byTP) == 0 {
			c.unindexTxn(producerID, id) // stale entry
			continue
		}
		part := txnCompletion{g: g, tps: sortedTPs(byTP), at: len(recs)}
		if commit {
			part.values = make([]committedOffset, len(part.tps))
			for i, tp := range part.tps {
				part.values[i] = byTP[tp]
				recs = append(recs, offsetCommitRecord(id, tp, part.values[i]))
			}
		}
		for _, tp := range part.tps {
			recs = append(recs, txnOffsetTombstone(producerID, id, tp))
		}
		parts = append(parts, part)
	}
	if len(recs) == 0 {
		c.mu.Unlock()
		return nil
	}
	first, wait, err := c.cfg.Journal.Append(recs)
	if err != nil {
		c.mu.Unlock()
		c.log.Error(err, "appending transaction completion", "producerID", producerID, "commit", commit)
		return fmt.Errorf("groups: completing the offsets of producer %d: %w", producerID, err)
	}
	if commit {
		for _, part := range parts {
			part.g.commitsInFlight++
		}
	}
	c.mu.Unlock()

	err = wait(ctx)

	c.mu.Lock()
	for _, part := range parts {
		g := part.g
		if commit {
			g.commitsInFlight--
		}
		if err == nil && c.groups[g.id] == g {
			for i, v := range part.values {
				v.logOffset = first + int64(part.at+i)
				g.applyCommit(part.tps[i], v)
			}
			c.dropTxnOffsets(g, producerID, first)
		}
		if g.commitsInFlight == 0 {
			g.deleted = nil
		}
	}
	c.mu.Unlock()
	if err != nil {
		c.log.V(1).Info("transaction completion not durable", "producerID", producerID, "commit", commit, "err", err.Error())
		return fmt.Errorf("groups: completing the offsets of producer %d: %w", producerID, err)
	}
	return nil
}

func sortedTPs(m map[topicPartition]committedOffset) []topicPartition {
	tps := make([]topicPartition, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].topic != tps[j].topic {
			return tps[i].topic < tps[j].topic
		}
		return tps[i].partition < tps[j].partition
	})
	return tps
}

// replayTxnOffset applies a pending record or its tombstone. A group
// whose only state is pending commits is created (Empty) and kept.
func (c *Coordinator) replayTxnOffset(r Record) error {
	producerID, group, tp, err := readTxnOffsetKey(r.Key)
	if err != nil {
		return fmt.Errorf("groups: replay: pending offset key: %w", err)
	}
	g := c.groups[group]
	if r.Value == nil {
		if g != nil && g.txnOffsets[producerID] != nil {
			delete(g.txnOffsets[producerID], tp)
			c.pruneTxn(g, producerID)
		}
		return nil
	}
	o, err := decodeOffsetValue(r.Value)
	if err != nil {
		return fmt.Errorf("groups: replay: pending offset value of producer %d %s/%s/%d: %w", producerID, group, tp.topic, tp.partition, err)
	}
	if g == nil {
		g = newGroup(group, c.clock.Now())
		c.groups[group] = g
	}
	c.addTxnOffset(g, producerID, tp, o)
	return nil
}
