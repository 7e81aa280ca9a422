package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/engine/groups"
	"github.com/kaas-dev/kaas/engine/txns"
)

// Transactions cross brokers twice: a transaction coordinator has its
// markers written by each partition's owner and each group's coordinator
// (WriteTxnMarkers), and a partition owner asks a transaction's
// coordinator whether a partition is in the transaction before it takes
// the transaction's first batch (AddPartitionsToTxn, verify only: KIP-890
// part 1). Both go to another broker through Peers (the wire package
// speaks the Kafka protocol to it, as in Kafka), or straight to this
// broker's own partitions and shards.

// Peers makes the transaction calls that cross brokers, to another live
// broker. The errors a peer broker answers with are kerr errors, so the
// same codes reach clients as if this broker had answered.
type Peers interface {
	// WriteMarkers has broker to write w's marker into each of w.Parts
	// (topic ConsumerOffsetsTopic: the completion of the transactional
	// offset commits in that group coordinator shard). It returns the
	// parts that failed, each with the broker's answer; err means the
	// broker was not reached or did not answer.
	WriteMarkers(ctx context.Context, to BrokerInfo, w MarkerWrite) (failed []PartitionError, err error)
	// VerifyInTransaction asks broker to, txnID's coordinator, whether tp
	// is in the producer's ongoing transaction at epoch; nil means it is.
	// Otherwise the error is the coordinator's answer (INVALID_TXN_STATE,
	// PRODUCER_FENCED, NOT_COORDINATOR, ...) or one reaching it.
	VerifyInTransaction(ctx context.Context, to BrokerInfo, txnID string, producerID int64, epoch int16, tp txns.TopicPartition) error
}

// MarkerWrite is the part of a transaction's markers one broker writes.
type MarkerWrite struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	Parts            []txns.TopicPartition
}

// PartitionError is one partition's failure at a peer broker.
type PartitionError struct {
	txns.TopicPartition
	Err error
}

// ConsumerOffsetsTopic names a group coordinator shard in WriteTxnMarkers,
// as Kafka names the __consumer_offsets partition of a group: partition i
// is shard i.
const ConsumerOffsetsTopic = "__consumer_offsets"

// ErrNoPeers: the request needs another broker and this one has no way to
// reach it.
var ErrNoPeers = errors.New("no peer client configured to reach other brokers")

// brokerInfo returns the live broker with id.
func (e *Engine) brokerInfo(id int32) (BrokerInfo, error) {
	for _, b := range e.Brokers() {
		if b.ID == id && (b.Port > 0 || b.Self) {
			return b, nil
		}
	}
	return BrokerInfo{}, fmt.Errorf("%w: broker %d is not live", ErrNotServing, id)
}

// partitionOwner returns the live broker that owns topic/index; known is
// false if the topic does not exist (deleted).
func (e *Engine) partitionOwner(topic string, index int32) (b BrokerInfo, known bool, err error) {
	id, _, known := e.routes.route(topic, index)
	if !known {
		return BrokerInfo{}, false, nil
	}
	o, _, ok := e.ownerOf(id, index)
	if !ok || o.Broker < 0 {
		return BrokerInfo{}, true, fmt.Errorf("%w: %s/%d has no owner yet", ErrNotServing, topic, index)
	}
	b, err = e.brokerInfo(o.Broker)
	return b, true, err
}

// WriteMarkers implements txns.MarkerWriter: every partition's marker by
// its owner, every group's completion by its coordinator, the brokers in
// parallel. It returns nil once all are durable.
func (e *Engine) WriteMarkers(ctx context.Context, m txns.Markers) error {
	type target struct {
		broker BrokerInfo
		parts  []txns.TopicPartition // topic ConsumerOffsetsTopic: a shard
	}
	byBroker := map[int32]*target{}
	var errs []error
	add := func(b BrokerInfo, tp txns.TopicPartition) {
		t := byBroker[b.ID]
		if t == nil {
			t = &target{broker: b}
			byBroker[b.ID] = t
		}
		t.parts = append(t.parts, tp)
	}
	for _, tp := range m.Partitions {
		b, known, err := e.partitionOwner(tp.Topic, tp.Partition)
		switch {
		case !known:
			// Deleted: nothing of it is left to commit or abort.
		case err != nil:
			errs = append(errs, err)
		default:
			add(b, tp)
		}
	}
	shards := map[int32]bool{}
	for _, g := range m.Groups {
		shards[groups.ShardOf(g)] = true
	}
	for i := range shards {
		b, err := e.shardBroker(i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		add(b, txns.TopicPartition{Topic: ConsumerOffsetsTopic, Partition: i})
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, t := range byBroker {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if t.broker.Self {
				err = e.writeLocalMarkers(ctx, m, t.parts)
			} else {
				err = e.writeRemoteMarkers(ctx, t.broker, m, t.parts)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// WriteLocalMarker writes one marker at this broker: into a partition it
// serves, or (topic ConsumerOffsetsTopic) the completion of the producer's
// transactional offset commits in a shard it serves. WriteTxnMarkers
// requests from other brokers' coordinators end here.
func (e *Engine) WriteLocalMarker(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32, topic string, index int32) error {
	if topic == ConsumerOffsetsTopic {
		if index < 0 || index >= groups.Shards {
			return fmt.Errorf("%w: %s/%d", ErrUnknownTopic, topic, index)
		}
		s := e.shards.get(index)
		if o, mine, _ := e.ownerOf(GroupsTopicID, index); !mine || s == nil || s.epoch != o.LeaderEpoch {
			return fmt.Errorf("%w: coordinator shard %d", ErrNotCoordinator, index)
		}
		return s.coord.CompleteTxn(ctx, producerID, epoch, commit)
	}
	p, err := e.Partition(topic, index)
	if err != nil {
		return err
	}
	err = p.WriteMarker(ctx, producerID, epoch, commit, coordinatorEpoch)
	if errors.Is(err, dataplane.ErrInvalidProducerEpoch) {
		// A newer epoch of the producer has written here since: this
		// transaction's end is already behind it (Kafka's coordinator
		// stops retrying such a marker too).
		e.log.Info("transaction marker superseded by a newer producer epoch", "topic", topic, "partition", index,
			"producerID", producerID, "epoch", epoch, "err", err.Error())
		return nil
	}
	return err
}

// writeLocalMarkers writes this broker's markers of m concurrently, so
// their fsyncs overlap.
func (e *Engine) writeLocalMarkers(ctx context.Context, m txns.Markers, parts []txns.TopicPartition) error {
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, tp := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.WriteLocalMarker(ctx, m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch, tp.Topic, tp.Partition); err != nil {
				errs[i] = fmt.Errorf("marker for %s/%d: %w", tp.Topic, tp.Partition, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (e *Engine) writeRemoteMarkers(ctx context.Context, b BrokerInfo, m txns.Markers, parts []txns.TopicPartition) error {
	if e.cfg.Peers == nil {
		return ErrNoPeers
	}
	failed, err := e.cfg.Peers.WriteMarkers(ctx, b, MarkerWrite{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
		Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch, Parts: parts})
	if err != nil {
		return fmt.Errorf("write markers at broker %d: %w", b.ID, err)
	}
	errs := make([]error, 0, len(failed))
	for _, f := range failed {
		errs = append(errs, fmt.Errorf("marker for %s/%d at broker %d: %w", f.Topic, f.Partition, b.ID, f.Err))
	}
	return errors.Join(errs...)
}

// VerifyTxn asks txnID's coordinator whether topic/index is in the
// producer's ongoing transaction at epoch; nil means it is. The error is a
// kerr error from the coordinator (INVALID_TXN_STATE, PRODUCER_FENCED,
// NOT_COORDINATOR, ...) or one reaching it.
func (e *Engine) VerifyTxn(ctx context.Context, txnID string, producerID int64, epoch int16, topic string, index int32) error {
	tps := []txns.TopicPartition{{Topic: topic, Partition: index}}
	if tc, err := e.TxnCoordinator(txnID); err == nil {
		return kerr.ErrorForCode(tc.VerifyPartitions(txnID, producerID, epoch, tps)[0])
	} else if !errors.Is(err, ErrNotCoordinator) {
		return err
	}
	b, err := e.GroupCoordinatorBroker(txnID)
	if err != nil {
		return err
	}
	if b.Self {
		return fmt.Errorf("%w: shard of %q is moving", ErrCoordinatorLoading, txnID)
	}
	if e.cfg.Peers == nil {
		return ErrNoPeers
	}
	return e.cfg.Peers.VerifyInTransaction(ctx, b, txnID, producerID, epoch, tps[0])
}
