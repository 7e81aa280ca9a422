package txns

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transaction states, as Kafka numbers them (kmsg.TransactionState and the
// State field of the __transaction_state value).
const (
	stateEmpty             kmsg.TransactionState = 0
	stateOngoing           kmsg.TransactionState = 1
	statePrepareCommit     kmsg.TransactionState = 2
	statePrepareAbort      kmsg.TransactionState = 3
	stateCompleteCommit    kmsg.TransactionState = 4
	stateCompleteAbort     kmsg.TransactionState = 5
	stateDead              kmsg.TransactionState = 6
	statePrepareEpochFence kmsg.TransactionState = 7
)

// validPrevious is Kafka's TransactionState.validPreviousStates: the states
// a transactional ID may be in before it moves to the key state. Every
// transition is checked against it before its record is appended.
//
// PrepareEpochFence is Kafka's in-memory step of a fence; here a fence is
// written directly as PrepareAbort at the bumped epoch (one record, as
// Kafka writes), so it is never a target, but the table stays complete.
var validPrevious = map[kmsg.TransactionState][]kmsg.TransactionState{
	stateEmpty:             {stateEmpty, stateCompleteCommit, stateCompleteAbort},
	stateOngoing:           {stateOngoing, stateEmpty, stateCompleteCommit, stateCompleteAbort},
	statePrepareCommit:     {stateOngoing},
	statePrepareAbort:      {stateOngoing, statePrepareEpochFence},
	stateCompleteCommit:    {statePrepareCommit},
	stateCompleteAbort:     {statePrepareAbort},
	stateDead:              {stateEmpty, stateCompleteCommit, stateCompleteAbort},
	statePrepareEpochFence: {stateOngoing},
}

func checkTransition(from, to kmsg.TransactionState) error {
	if !slices.Contains(validPrevious[to], from) {
		return fmt.Errorf("invalid transaction state transition %s -> %s", from, to)
	}
	return nil
}

// prepared reports whether s is a decided transaction whose markers are
// still to be written.
func prepared(s kmsg.TransactionState) bool {
	return s == statePrepareCommit || s == statePrepareAbort
}

// idle reports whether s has no transaction in progress.
func idle(s kmsg.TransactionState) bool {
	return s == stateEmpty || s == stateCompleteCommit || s == stateCompleteAbort
}

// epochExhausted is Kafka's isProducerEpochExhausted: the epoch must stay
// below math.MaxInt16 so that a fence can still bump it once.
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// meta is the state of one transactional ID: what one record holds.
type meta struct {
	producerID int64
	epoch      int16
	// lastProducerID/lastEpoch are the pair the producer held before its
	// latest InitProducerID, so that a retry of that call (KIP-360: the
	// producer sends the pair it still holds) gets the current pair
	// instead of being fenced. -1 when unknown.
	lastProducerID int64
	lastEpoch      int16
	timeout        time.Duration
	state          kmsg.TransactionState
	partitions     map[TopicPartition]struct{}
	groups         map[string]struct{}
	startMs        int64 // the transaction's start, -1 if none
	updateMs       int64 // the last transition
	// timeoutFromMs is when this coordinator started counting the
	// transaction's timeout: its start, or for a transaction loaded from
	// the log no earlier than the load, since the start was stamped by
	// another host's clock (never compare timestamps across hosts).
	timeoutFromMs int64
}

// clone copies m with its own sets, to be changed into a next state. The
// sets of a state in use are never changed in place: withAdded clones.
func (m meta) clone() meta {
	m.partitions = cloneSet(m.partitions)
	m.groups = cloneSet(m.groups)
	return m
}

func cloneSet[K comparable](src map[K]struct{}) map[K]struct{} {
	dst := make(map[K]struct{}, len(src))
	for k := range src {
		dst[k] = struct{}{}
	}
	return dst
}

// empty reports whether the transaction touched nothing: its end needs no
// markers.
func (m meta) empty() bool { return len(m.partitions) == 0 && len(m.groups) == 0 }

// initialized is m after InitProducerID: Empty at producerID/epoch with
// no transaction.
func (m meta) initialized(producerID int64, epoch int16, lastProducerID int64, lastEpoch int16, timeout time.Duration, nowMs int64) meta {
	m.producerID, m.epoch = producerID, epoch
	m.lastProducerID, m.lastEpoch = lastProducerID, lastEpoch
	m.timeout = timeout
	m.state = stateEmpty
	m.partitions, m.groups = nil, nil
	m.startMs, m.updateMs, m.timeoutFromMs = -1, nowMs, -1
	return m
}

// withAdded is m with partitions and a group (if not "") in its ongoing
// transaction, starting one if none is; changed is false if m already had
// them all.
func (m meta) withAdded(parts []TopicPartition, group string, nowMs int64) (next meta, changed bool) {
	next = m.clone()
	if m.state != stateOngoing {
		next.state = stateOngoing
		next.partitions = make(map[TopicPartition]struct{}, len(parts))
		next.groups = make(map[string]struct{})
		next.startMs, next.timeoutFromMs = nowMs, nowMs
		changed = true
	}
	for _, tp := range parts {
		if _, ok := next.partitions[tp]; !ok {
			next.partitions[tp] = struct{}{}
			changed = true
		}
	}
	if _, ok := next.groups[group]; group != "" && !ok {
		next.groups[group] = struct{}{}
		changed = true
	}
	next.updateMs = nowMs
	return next, changed
}

// decided is m's ongoing transaction prepared to commit or abort.
func (m meta) decided(commit bool, nowMs int64) meta {
	m.state = statePrepareAbort
	if commit {
		m.state = statePrepareCommit
	}
	m.updateMs = nowMs
	return m
}

// fenced is m's ongoing transaction aborted at a bumped epoch, as Kafka
// fences a producer (InitProducerID from a new instance, or a timeout):
// the old epoch's requests are refused from now on and the abort markers
// carry the new one. The bump is also what a retried InitProducerID of the
// old instance must not undo, so the last pair is forgotten.
func (m meta) fenced(nowMs int64) meta {
	m = m.decided(false, nowMs)
	if m.epoch < math.MaxInt16 { // always: an exhausted epoch rotates before a transaction starts
		m.epoch++
	}
	m.lastProducerID, m.lastEpoch = -1, -1
	return m
}

// completed is m's prepared transaction after its markers: Complete* with
// no partitions or groups (the start timestamp stays, as in Kafka).
func (m meta) completed(nowMs int64) meta {
	commit := m.state == statePrepareCommit
	m.state = stateCompleteAbort
	if commit {
		m.state = stateCompleteCommit
	}
	m.partitions, m.groups = nil, nil
	m.updateMs = nowMs
	return m
}

// sortedPartitions is m's partitions by topic, then partition.
func (m meta) sortedPartitions() []TopicPartition {
	if len(m.partitions) == 0 {
		return nil
	}
	out := make([]TopicPartition, 0, len(m.partitions))
	for tp := range m.partitions {
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	return out
}

func (m meta) sortedGroups() []string {
	if len(m.groups) == 0 {
		return nil
	}
	out := make([]string, 0, len(m.groups))
	for g := range m.groups {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// markers is what ends m's prepared transaction.
func (m meta) markers(txnID string, coordinatorEpoch int32) Markers {
	return Markers{
		TransactionalID:  txnID,
		ProducerID:       m.producerID,
		ProducerEpoch:    m.epoch,
		Commit:           m.state == statePrepareCommit,
		CoordinatorEpoch: coordinatorEpoch,
		Partitions:       m.sortedPartitions(),
		Groups:           m.sortedGroups(),
	}
}
