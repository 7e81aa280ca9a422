package wire

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/txns"
)

func TestWriteMarkersRequestGroupsTopicsInOrder(t *testing.T) {
	req := writeMarkersRequest(engine.MarkerWrite{ProducerID: 7, ProducerEpoch: 2, Commit: true, CoordinatorEpoch: 5,
		Parts: []txns.TopicPartition{{Topic: "b", Partition: 1}, {Topic: "a", Partition: 0}, {Topic: "b", Partition: 0}}})
	if len(req.Markers) != 1 {
		t.Fatalf("markers = %d, want 1", len(req.Markers))
	}
	m := req.Markers[0]
	if m.ProducerID != 7 || m.ProducerEpoch != 2 || !m.Committed || m.CoordinatorEpoch != 5 {
		t.Fatalf("marker = %+v", m)
	}
	got := map[string][]int32{}
	var order []string
	for _, tp := range m.Topics {
		order = append(order, tp.Topic)
		got[tp.Topic] = tp.Partitions
	}
	if want := []string{"a", "b"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("topics = %v, want %v", order, want)
	}
	if want := map[string][]int32{"a": {0}, "b": {1, 0}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("partitions = %v, want %v", got, want)
	}
}

func TestMarkerErrorsListsFailedPartitions(t *testing.T) {
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	rm := kmsg.NewWriteTxnMarkersResponseMarker()
	rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
	rt.Topic = "t"
	for i, code := range []int16{0, kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code} {
		rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
		rp.Partition, rp.ErrorCode = int32(i), code
		rt.Partitions = append(rt.Partitions, rp)
	}
	rm.Topics = append(rm.Topics, rt)
	resp.Markers = append(resp.Markers, rm)
	got := markerErrors(resp)
	want := []engine.PartitionError{
		{TopicPartition: txns.TopicPartition{Topic: "t", Partition: 1}, Err: kerr.NotLeaderForPartition},
		{TopicPartition: txns.TopicPartition{Topic: "t", Partition: 2}, Err: kerr.KafkaStorageError},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("failed = %+v, want %+v", got, want)
	}
}

func TestVerifyRequestAndAnswer(t *testing.T) {
	req := verifyRequest("tx", 9, 3, txns.TopicPartition{Topic: "t", Partition: 4})
	if len(req.Transactions) != 1 {
		t.Fatalf("transactions = %d, want 1", len(req.Transactions))
	}
	tx := req.Transactions[0]
	if tx.TransactionalID != "tx" || tx.ProducerID != 9 || tx.ProducerEpoch != 3 || !tx.VerifyOnly ||
		len(tx.Topics) != 1 || tx.Topics[0].Topic != "t" || !reflect.DeepEqual(tx.Topics[0].Partitions, []int32{4}) {
		t.Fatalf("transaction = %+v", tx)
	}

	answer := func(top, part int16) *kmsg.AddPartitionsToTxnResponse {
		resp := kmsg.NewPtrAddPartitionsToTxnResponse()
		resp.ErrorCode = top
		rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
		rp.ErrorCode = part
		rt.Partitions = append(rt.Partitions, rp)
		tr := kmsg.NewAddPartitionsToTxnResponseTransaction()
		tr.Topics = append(tr.Topics, rt)
		resp.Transactions = append(resp.Transactions, tr)
		return resp
	}
	for _, c := range []struct {
		top, part int16
		want      error
	}{
		{0, 0, nil},
		{0, kerr.InvalidTxnState.Code, kerr.InvalidTxnState},
		{kerr.NotCoordinator.Code, kerr.InvalidTxnState.Code, kerr.NotCoordinator},
	} {
		if got := verifyAnswer(answer(c.top, c.part)); got != c.want {
			t.Errorf("answer(%d, %d) = %v, want %v", c.top, c.part, got, c.want)
		}
	}
}

// TestPeersRoundTrip sends both calls to a real broker: the answers come
// back as kerr errors.
func TestPeersRoundTrip(t *testing.T) {
	b := startBroker(t, nil)
	host, port, err := net.SplitHostPort(b.addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	to := engine.BrokerInfo{ID: 0, Host: host, Port: int32(p)}
	peers := NewPeers("test", PeerSecurity{})
	defer peers.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	failed, err := peers.WriteMarkers(ctx, to, engine.MarkerWrite{ProducerID: 1, Parts: []txns.TopicPartition{{Topic: "missing", Partition: 0}}})
	if err != nil {
		t.Fatalf("write markers: %v", err)
	}
	if len(failed) != 1 || failed[0].Topic != "missing" || failed[0].Err != kerr.UnknownTopicOrPartition {
		t.Fatalf("failed = %+v, want missing/0 UNKNOWN_TOPIC_OR_PARTITION", failed)
	}

	err = peers.VerifyInTransaction(ctx, to, "no-such-txn", 1, 0, txns.TopicPartition{Topic: "t", Partition: 0})
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		t.Fatalf("verify = %v, want a kerr error", err)
	}
}
