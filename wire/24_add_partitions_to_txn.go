package wire

// AddPartitionsToTxn: versions 0-5.
//
// Behavior:
// * Routed to the transactional ID's coordinator, which adds the
//   partitions to the ongoing transaction (starting one if none is) and
//   answers once that is durable.
// * A partition of a topic that does not exist gets
//   UNKNOWN_TOPIC_OR_PARTITION and the others of the request
//   OPERATION_NOT_ATTEMPTED, as Kafka answers; nothing is added.
// * v4+ (KIP-890) carries several transactions, as brokers send it; with
//   VerifyOnly the coordinator only answers whether each partition is in
//   the transaction. A partition owner asks that before it takes a
//   transaction's first batch.
// * v4+ is for brokers only (clients send v3 and below): once this broker
//   authenticates clients, a principal that is not a broker's (nor a
//   super user) gets the top-level CLUSTER_AUTHORIZATION_FAILED
//   (interbroker.go).
// * With the authorizer on, each transaction needs WRITE on its
//   transactional ID (else every partition gets
//   TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic: the
//   partitions of a topic the principal may not write get
//   TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED,
//   nothing is added, as Kafka answers. A broker principal sending v4+ is
//   trusted with the transactions it verifies for its own partitions (as
//   Kafka's inter-broker principal, a super user there, is).
//
// Version notes:
// * v2: PRODUCER_FENCED instead of INVALID_PRODUCER_EPOCH (KIP-588)
// * v3: flexible
// * v4: batched transactions, VerifyOnly, top-level ErrorCode

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/txns"
)

func handleAddPartitionsToTxn(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version <= 3 {
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch = req.TransactionalID, req.ProducerID, req.ProducerEpoch
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			rt.Topic, rt.Partitions = t.Topic, t.Partitions
			tx.Topics = append(tx.Topics, rt)
		}
		c.async(r, func() {
			res := c.addPartitionsToTxn(req.Version, tx)
			for _, t := range res.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, p.ErrorCode
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			r.finish(resp)
		})
		return
	}
	c.async(r, func() {
		for _, tx := range req.Transactions {
			resp.Transactions = append(resp.Transactions, c.addPartitionsToTxn(req.Version, tx))
		}
		r.finish(resp)
	})
}

// addPartitionsToTxn serves one transaction of the request.
func (c *conn) addPartitionsToTxn(v int16, tx kmsg.AddPartitionsToTxnRequestTransaction) kmsg.AddPartitionsToTxnResponseTransaction {
	var parts []txns.TopicPartition
	unknown := map[txns.TopicPartition]bool{}
	checked := c.authzOn() && !(v >= 4 && c.fromBrokerPrincipal())
	idDenied := checked && !c.allowedTxn(kmsg.ACLOperationWrite, tx.TransactionalID)
	deniedTopics := map[string]bool{}
	for _, t := range tx.Topics {
		if checked && !idDenied && !c.allowedTopic(kmsg.ACLOperationWrite, t.Topic) {
			deniedTopics[t.Topic] = true
		}
		n, ok := c.s.eng.TopicPartitions(t.Topic)
		for _, p := range t.Partitions {
			tp := txns.TopicPartition{Topic: t.Topic, Partition: p}
			parts = append(parts, tp)
			if !ok || p < 0 || p >= n {
				unknown[tp] = true
			}
		}
	}
	codes := make([]int16, len(parts))
	tc, err := c.s.eng.TxnCoordinator(tx.TransactionalID)
	switch {
	case idDenied:
		for i := range codes {
			codes[i] = codeTxnAuthz
		}
	case len(deniedTopics) > 0:
		for i, tp := range parts {
			codes[i] = kerr.OperationNotAttempted.Code
			if deniedTopics[tp.Topic] {
				codes[i] = codeTopicAuthz
			} else if unknown[tp] {
				codes[i] = kerr.UnknownTopicOrPartition.Code
			}
		}
	case err != nil:
		for i := range codes {
			codes[i] = errorCode(err)
		}
	case len(unknown) > 0 && !tx.VerifyOnly:
		for i, tp := range parts {
			codes[i] = kerr.OperationNotAttempted.Code
			if unknown[tp] {
				codes[i] = kerr.UnknownTopicOrPartition.Code
			}
		}
	case tx.VerifyOnly:
		codes = tc.VerifyPartitions(tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, parts)
	default:
		codes = tc.AddPartitions(c.ctx, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, parts)
	}
	out := kmsg.NewAddPartitionsToTxnResponseTransaction()
	out.TransactionalID = tx.TransactionalID
	i := 0
	for _, t := range tx.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			rp.Partition, rp.ErrorCode = p, fencedCode(codes[i], v, 2)
			rt.Partitions = append(rt.Partitions, rp)
			i++
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}
