package wire

// TxnOffsetCommit: versions 0-5.
//
// Behavior:
// * Routed to the group's coordinator, which stores the offsets as the
//   producer's pending commits: durable in the shard's log before the
//   answer, invisible to OffsetFetch until the transaction commits (its
//   coordinator's marker for the group's shard), dropped if it aborts.
// * Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and are
//   not stored, as for OffsetCommit.
// * v3+ carries the member's generation and ID, fenced as OffsetCommit.
// * With the authorizer on, as Kafka: WRITE on the transactional ID (else
//   every partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on
//   the group (else GROUP_AUTHORIZATION_FAILED), then READ on each topic
//   (its partitions TOPIC_AUTHORIZATION_FAILED, not stored).
//
// Version notes:
// * v2: LeaderEpoch per partition
// * v3: Generation, MemberID, InstanceID (KIP-447), flexible, and
//   PRODUCER_FENCED (KIP-588)

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleTxnOffsetCommit(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	if code := c.txnOffsetCommitRefusal(req); code != 0 {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		resp.Topics = txnCommitErrors(req.Topics, code)
		r.finish(resp)
		return
	}
	coord, err := c.s.eng.GroupCoordinator(req.Group)
	if err != nil {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		resp.Topics = txnCommitErrors(req.Topics, errorCode(err))
		r.finish(resp)
		return
	}
	topics, denied := splitAuthorizedTopics(c, kmsg.ACLOperationRead, req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) string { return t.Topic })
	var known, unknown []kmsg.TxnOffsetCommitRequestTopic
	for _, t := range topics {
		n, ok := c.s.eng.TopicPartitions(t.Topic)
		kt, ut := t, t
		kt.Partitions, ut.Partitions = nil, nil
		for _, p := range t.Partitions {
			if ok && p.Partition >= 0 && p.Partition < n {
				kt.Partitions = append(kt.Partitions, p)
			} else {
				ut.Partitions = append(ut.Partitions, p)
			}
		}
		if len(kt.Partitions) > 0 {
			known = append(known, kt)
		}
		if len(ut.Partitions) > 0 {
			unknown = append(unknown, ut)
		}
	}
	c.async(r, func() {
		sub := *req
		sub.Topics = known
		resp := coord.TxnOffsetCommit(c.ctx, &sub)
		resp.Topics = append(resp.Topics, txnCommitErrors(unknown, kerr.UnknownTopicOrPartition.Code)...)
		resp.Topics = append(resp.Topics, txnCommitErrors(denied, codeTopicAuthz)...)
		resp.Version = req.Version
		for ti := range resp.Topics {
			for pi := range resp.Topics[ti].Partitions {
				p := &resp.Topics[ti].Partitions[pi]
				p.ErrorCode = fencedCode(p.ErrorCode, req.Version, 3)
			}
		}
		r.finish(resp)
	})
}

// txnOffsetCommitRefusal is the code every partition gets when the
// principal may not use the transactional ID or the group; 0 if it may.
func (c *conn) txnOffsetCommitRefusal(req *kmsg.TxnOffsetCommitRequest) int16 {
	if !c.allowedTxn(kmsg.ACLOperationWrite, req.TransactionalID) {
		return codeTxnAuthz
	}
	if !c.allowedGroup(kmsg.ACLOperationRead, req.Group) {
		return codeGroupAuthz
	}
	return 0
}

// txnCommitErrors answers every partition of topics with code.
func txnCommitErrors(topics []kmsg.TxnOffsetCommitRequestTopic, code int16) []kmsg.TxnOffsetCommitResponseTopic {
	out := make([]kmsg.TxnOffsetCommitResponseTopic, 0, len(topics))
	for _, t := range topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}
