package wire

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/txns"
)

// The engine's transaction calls to other brokers (engine.Peers), as the
// Kafka requests that make them: WriteTxnMarkers, and AddPartitionsToTxn
// with VerifyOnly (KIP-890 part 1).

// WriteMarkers sends w to broker to as one WriteTxnMarkers request and
// returns the partitions it answered with an error code.
func (p *Peers) WriteMarkers(ctx context.Context, to engine.BrokerInfo, w engine.MarkerWrite) ([]engine.PartitionError, error) {
	kresp, err := p.request(ctx, to, writeMarkersRequest(w))
	if err != nil {
		return nil, err
	}
	return markerErrors(kresp.(*kmsg.WriteTxnMarkersResponse)), nil
}

// VerifyInTransaction sends broker to a verify-only AddPartitionsToTxn for
// tp and returns its answer as a kerr error, nil if tp is in the
// transaction.
func (p *Peers) VerifyInTransaction(ctx context.Context, to engine.BrokerInfo, txnID string, producerID int64, epoch int16, tp txns.TopicPartition) error {
	kresp, err := p.request(ctx, to, verifyRequest(txnID, producerID, epoch, tp))
	if err != nil {
		return fmt.Errorf("verify transaction at broker %d: %w", to.ID, err)
	}
	return verifyAnswer(kresp.(*kmsg.AddPartitionsToTxnResponse))
}

// writeMarkersRequest is w as one marker, its partitions grouped by topic
// in name order.
func writeMarkersRequest(w engine.MarkerWrite) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = w.ProducerID, w.ProducerEpoch, w.Commit, w.CoordinatorEpoch
	byTopic := map[string][]int32{}
	for _, tp := range w.Parts {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	for _, name := range sortedKeys(byTopic) {
		t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		t.Topic, t.Partitions = name, byTopic[name]
		mk.Topics = append(mk.Topics, t)
	}
	req.Markers = append(req.Markers, mk)
	return req
}

// markerErrors lists the partitions of resp with an error code, in the
// response's order.
func markerErrors(resp *kmsg.WriteTxnMarkersResponse) []engine.PartitionError {
	var failed []engine.PartitionError
	for _, rm := range resp.Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					failed = append(failed, engine.PartitionError{
						TopicPartition: txns.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}, Err: err})
				}
			}
		}
	}
	return failed
}

func verifyRequest(txnID string, producerID int64, epoch int16, tp txns.TopicPartition) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = txnID, producerID, epoch, true
	rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	rt.Topic, rt.Partitions = tp.Topic, []int32{tp.Partition}
	tx.Topics = append(tx.Topics, rt)
	req.Transactions = append(req.Transactions, tx)
	return req
}

// verifyAnswer is the first error code of resp: the top-level one, then the
// partitions'.
func verifyAnswer(resp *kmsg.AddPartitionsToTxnResponse) error {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	for _, t := range resp.Transactions {
		for _, rt := range t.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
