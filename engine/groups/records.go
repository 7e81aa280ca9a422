package groups

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record versions written, as Kafka's __consumer_offsets: offset commit
// key v1 with value v3 (leader epoch, no expire timestamp), or value v4
// (flexible, tag 0 the topic ID, as Kafka 4's) when the coordinator knows
// which incarnation of the topic the commit is for (Config.Topics), group
// metadata key v2 with value v3 (static members). Replay reads values
// v0–4; one without a topic ID applies to whatever incarnation is live.
//
// kaas adds key versions of its own, above Kafka's 0–2 (and those of
// Kafka's next group coordinator): 1000 is a transaction record
// (txns.RecordKeyVersion), 1001 a pending transactional offset commit
// (txnOffsetKeyVersion: int16 1001, int64 producer ID, then the group,
// topic and partition as in an offset commit key; the value an offset
// commit value, a tombstone ending it; see txnoffsets.go).
const (
	offsetCommitKeyVersion   = 1
	offsetCommitValueVersion = 3
	offsetCommitValueWithID  = 4
	groupMetadataKeyVersion  = 2
	groupMetadataValVersion  = 3
	txnOffsetKeyVersion      = 1001
)

func offsetCommitKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetCommitKeyVersion, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(make([]byte, 0, 2+2+len(group)+2+len(topic)+4))
}

// offsetCommitRecord encodes one commit; key and value share one
// allocation (commits are the hot path).
func offsetCommitRecord(group string, tp topicPartition, o committedOffset) Record {
	keyLen := 2 + 2 + len(group) + 2 + len(tp.topic) + 4
	buf := make([]byte, 0, keyLen+2+8+4+2+len(o.metadata)+8+1+18)
	k := kmsg.OffsetCommitKey{Version: offsetCommitKeyVersion, Group: group, Topic: tp.topic, Partition: tp.partition}
	buf = k.AppendTo(buf)
	v := kmsg.OffsetCommitValue{
		Version:         offsetCommitValueVersion,
		Offset:          o.offset,
		LeaderEpoch:     o.leaderEpoch,
		Metadata:        o.metadata,
		CommitTimestamp: o.committedAt,
	}
	if o.topicID != noTopicID {
		v.Version, v.TopicID = offsetCommitValueWithID, o.topicID
	}
	buf = v.AppendTo(buf)
	return Record{Key: buf[:keyLen:keyLen], Value: buf[keyLen:]}
}

func offsetTombstone(group string, tp topicPartition) Record {
	return Record{Key: offsetCommitKey(group, tp.topic, tp.partition)}
}

func groupMetadataKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupMetadataKeyVersion, Group: group}
	return k.AppendTo(nil)
}

func groupTombstone(group string) Record {
	return Record{Key: groupMetadataKey(group)}
}

// groupMetadataRecord is g's membership as Kafka persists it. assignments
// overrides the members' stored assignments (the leader's, not yet
// applied); nil uses the stored ones.
func groupMetadataRecord(g *group, assignments map[string][]byte) Record {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupMetadataValVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		v.Protocol = kmsg.StringPtr(g.protocol)
	}
	if g.leader != "" {
		v.Leader = kmsg.StringPtr(g.leader)
	}
	v.CurrentStateTimestamp = g.stateSince.UnixMilli()
	for _, m := range g.membersInOrder() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.id
		vm.InstanceID = m.instanceID
		vm.ClientID = m.clientID
		vm.ClientHost = m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout / time.Millisecond)
		vm.SessionTimeoutMillis = int32(m.sessionTimeout / time.Millisecond)
		vm.Subscription = m.metadataFor(g.protocol)
		vm.Assignment = m.assignment
		if assignments != nil {
			vm.Assignment = assignments[m.id]
		}
		v.Members = append(v.Members, vm)
	}
	return Record{Key: groupMetadataKey(g.id), Value: v.AppendTo(nil)}
}

// Replay applies one record of the shard's log (or snapshot), in log order,
// while loading. Unknown record versions are an error.
func (c *Coordinator) Replay(r Record) error {
	if len(r.Key) < 2 {
		return errors.New("groups: replay: record key too short for a version")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch version := int16(binary.BigEndian.Uint16(r.Key)); version {
	case 0, 1:
		return c.replayOffsetCommit(r)
	case 2:
		return c.replayGroupMetadata(r)
	case txnOffsetKeyVersion:
		return c.replayTxnOffset(r)
	default:
		return fmt.Errorf("groups: replay: unknown record key version %d", version)
	}
}

func (c *Coordinator) replayOffsetCommit(r Record) error {
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(r.Key); err != nil {
		return fmt.Errorf("groups: replay: offset commit key: %w", err)
	}
	tp := topicPartition{k.Topic, k.Partition}
	if r.Value == nil {
		if g := c.groups[k.Group]; g != nil {
			delete(g.offsets, tp)
		}
		return nil
	}
	o, err := decodeOffsetValue(r.Value)
	if err != nil {
		return fmt.Errorf("groups: replay: offset commit value of %s/%s/%d: %w", k.Group, k.Topic, k.Partition, err)
	}
	g := c.groups[k.Group]
	if g == nil {
		g = newGroup(k.Group, c.clock.Now())
		c.groups[k.Group] = g
	}
	g.offsets[tp] = o
	return nil
}

// decodeOffsetValue reads an offset commit value (v0–4) as a replayed
// commit: older than any append. Only v4 can carry a topic ID.
func decodeOffsetValue(value []byte) (committedOffset, error) {
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(value); err != nil {
		return committedOffset{}, err
	}
	if v.Version < 0 || v.Version > 4 {
		return committedOffset{}, fmt.Errorf("unknown offset commit value version %d", v.Version)
	}
	if v.Version < 3 {
		v.LeaderEpoch = -1
	}
	return committedOffset{
		offset:      v.Offset,
		leaderEpoch: v.LeaderEpoch,
		metadata:    v.Metadata,
		committedAt: v.CommitTimestamp,
		topicID:     v.TopicID,
		logOffset:   -1,
	}, nil
}

func (c *Coordinator) replayGroupMetadata(r Record) error {
	var k kmsg.GroupMetadataKey
	if err := k.ReadFrom(r.Key); err != nil {
		return fmt.Errorf("groups: replay: group metadata key: %w", err)
	}
	old := c.groups[k.Group]
	if r.Value == nil {
		// Offsets have their own tombstones, written before the group's;
		// pending transactional offsets keep a group too.
		if old != nil && len(old.offsets) == 0 && len(old.txnOffsets) == 0 {
			delete(c.groups, k.Group)
		} else if old != nil {
			c.groups[k.Group] = groupWithOffsets(newGroup(k.Group, c.clock.Now()), old)
		}
		return nil
	}
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(r.Value); err != nil {
		return fmt.Errorf("groups: replay: group metadata value of %s: %w", k.Group, err)
	}
	if v.Version < 0 || v.Version > 4 {
		return fmt.Errorf("groups: replay: unknown group metadata value version %d", v.Version)
	}
	g := newGroup(k.Group, c.clock.Now())
	if v.Version >= 2 && v.CurrentStateTimestamp >= 0 {
		g.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
	}
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	for _, vm := range v.Members {
		m := &member{
			id:             vm.MemberID,
			instanceID:     vm.InstanceID,
			clientID:       vm.ClientID,
			clientHost:     vm.ClientHost,
			sessionTimeout: millis(vm.SessionTimeoutMillis),
			protocols:      []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: bytes.Clone(vm.Subscription)}},
			assignment:     bytes.Clone(vm.Assignment),
		}
		m.rebalanceTimeout = millis(vm.RebalanceTimeoutMillis)
		if v.Version == 0 || vm.RebalanceTimeoutMillis <= 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		g.addMember(m)
	}
	if v.Leader != nil && g.members[*v.Leader] != nil {
		g.leader = *v.Leader
	}
	if len(g.members) > 0 {
		g.state = stateStable
	}
	c.groups[k.Group] = groupWithOffsets(g, old)
	return nil
}

// groupWithOffsets carries the offsets (committed and pending
// transactional) loaded so far for a group whose metadata record is
// replaced.
func groupWithOffsets(g, old *group) *group {
	if old != nil {
		g.offsets = old.offsets
		g.txnOffsets = old.txnOffsets
	}
	return g
}
