package txns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A transaction record's value is Kafka's __transaction_state value,
// kmsg.TxnMetadataValue version 1, with two choices of kaas's own:
//
//   - A group whose offsets the transaction commits (AddOffsets) is an entry
//     of Topics named groupTopicPrefix + group ID, with no partitions. Kafka
//     records the group's __consumer_offsets partition instead; kaas needs
//     the group's name to complete its offsets, and a '/' cannot occur in a
//     topic name, so the entry never collides with a real topic.
//   - PreviousProducerID (KIP-890's tag 0) is the producer ID before the
//     latest InitProducerID, and tag lastEpochTag (an int16, absent when
//     -1) the epoch that went with it, so that a retried InitProducerID
//     (KIP-360) is recognised after the shard moves. Kafka keeps the last
//     epoch in memory only.
//
// A tombstone (nil value) removes the ID (expiration).
const (
	recordValueVersion        = 1
	groupTopicPrefix          = "__consumer_offsets/"
	lastEpochTag       uint32 = 10000
)

// IsRecord reports whether a shard-log record is a transaction record.
func IsRecord(key []byte) bool {
	return len(key) >= 2 && int16(binary.BigEndian.Uint16(key)) == RecordKeyVersion
}

// validID reports whether a transactional ID can be a record key.
func validID(txnID string) bool {
	return txnID != "" && len(txnID) <= math.MaxInt16
}

func recordKey(txnID string) []byte {
	key := make([]byte, 4+len(txnID))
	binary.BigEndian.PutUint16(key, uint16(RecordKeyVersion))
	binary.BigEndian.PutUint16(key[2:], uint16(len(txnID)))
	copy(key[4:], txnID)
	return key
}

func parseKey(key []byte) (string, error) {
	if len(key) < 4 {
		return "", errors.New("record key too short")
	}
	if v := int16(binary.BigEndian.Uint16(key)); v != RecordKeyVersion {
		return "", fmt.Errorf("record key version %d is not a transaction record", v)
	}
	n := int16(binary.BigEndian.Uint16(key[2:]))
	if n < 0 || len(key) != 4+int(n) {
		return "", fmt.Errorf("record key of %d bytes holds a transactional ID of length %d", len(key), n)
	}
	return string(key[4:]), nil
}

// record is the record of txnID entering state m (a tombstone for Dead).
func record(txnID string, m meta) Record {
	if m.state == stateDead {
		return Record{Key: recordKey(txnID)}
	}
	v := kmsg.NewTxnMetadataValue()
	v.Version = recordValueVersion
	v.ProducerID = m.producerID
	v.ProducerEpoch = m.epoch
	v.TimeoutMillis = int32(m.timeout / time.Millisecond)
	v.State = m.state
	for _, tp := range m.sortedPartitions() {
		if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewTxnMetadataValueTopic()
			t.Topic = tp.Topic
			v.Topics = append(v.Topics, t)
		}
		t := &v.Topics[len(v.Topics)-1]
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	for _, g := range m.sortedGroups() {
		t := kmsg.NewTxnMetadataValueTopic()
		t.Topic = groupTopicPrefix + g
		v.Topics = append(v.Topics, t)
	}
	v.LastUpdateTimestamp = m.updateMs
	v.StartTimestamp = m.startMs
	v.PreviousProducerID = m.lastProducerID
	if m.lastEpoch >= 0 {
		v.UnknownTags.Set(lastEpochTag, binary.BigEndian.AppendUint16(nil, uint16(m.lastEpoch)))
	}
	return Record{Key: recordKey(txnID), Value: v.AppendTo(nil)}
}

// parseValue is the state a record's value holds.
func parseValue(b []byte) (meta, error) {
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(b); err != nil {
		return meta{}, err
	}
	if v.Version < 0 || v.Version > recordValueVersion {
		return meta{}, fmt.Errorf("unknown value version %d", v.Version)
	}
	switch {
	case v.State < stateEmpty || v.State > stateDead:
		// PrepareEpochFence is never written (Kafka neither).
		return meta{}, fmt.Errorf("unexpected state %s (%d)", v.State, v.State)
	case v.ProducerEpoch < 0 || v.TimeoutMillis <= 0:
		return meta{}, fmt.Errorf("invalid producer epoch %d or timeout %d ms", v.ProducerEpoch, v.TimeoutMillis)
	}
	m := meta{
		producerID:     v.ProducerID,
		epoch:          v.ProducerEpoch,
		lastProducerID: v.PreviousProducerID,
		lastEpoch:      -1,
		timeout:        time.Duration(v.TimeoutMillis) * time.Millisecond,
		state:          v.State,
		partitions:     make(map[TopicPartition]struct{}),
		groups:         make(map[string]struct{}),
		startMs:        v.StartTimestamp,
		updateMs:       v.LastUpdateTimestamp,
		timeoutFromMs:  v.StartTimestamp,
	}
	for _, t := range v.Topics {
		if g, ok := strings.CutPrefix(t.Topic, groupTopicPrefix); ok {
			m.groups[g] = struct{}{}
			continue
		}
		for _, p := range t.Partitions {
			m.partitions[TopicPartition{t.Topic, p}] = struct{}{}
		}
	}
	var tagErr error
	v.UnknownTags.Each(func(tag uint32, val []byte) {
		if tag != lastEpochTag {
			return
		}
		if len(val) != 2 {
			tagErr = fmt.Errorf("last epoch tag of %d bytes", len(val))
			return
		}
		m.lastEpoch = int16(binary.BigEndian.Uint16(val))
	})
	return m, tagErr
}

// Replay applies one transaction record (IsRecord) from the shard log, in
// log order, while loading (before Start): the latest record of an ID is
// its state, a tombstone removes it.
func (c *Coordinator) Replay(r Record) error {
	txnID, err := parseKey(r.Key)
	if err != nil {
		return fmt.Errorf("txns: replay: %w", err)
	}
	var m meta
	if r.Value != nil {
		if m, err = parseValue(r.Value); err != nil {
			return fmt.Errorf("txns: replay: transactional ID %q: %w", txnID, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Value == nil || m.state == stateDead {
		delete(c.txns, txnID)
		return nil
	}
	c.txns[txnID] = &txn{id: txnID, meta: m, stored: true}
	return nil
}
