package groups

import (
	"bytes"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupState is a classic group's state, with Kafka's names.
type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

func (s groupState) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	default:
		return "Dead"
	}
}

type topicPartition struct {
	topic     string
	partition int32
}

// committedOffset is one partition's visible (durable) commit.
type committedOffset struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	committedAt int64 // unix millis
	logOffset   int64 // of its record; -1 when replayed (older than any append)
	// topicID is the incarnation of the topic the commit was made for
	// (the one live on the coordinator's broker then); noTopicID when not
	// known (no Config.Topics, or a record written before kaas kept it).
	topicID [16]byte
}

// member is one member of a classic group.
type member struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocols        []kmsg.JoinGroupRequestProtocol // the member's preference order
	assignment       []byte
	joinOrder        uint64 // earlier joiners lead and break protocol ties

	// A waiting JoinGroup / SyncGroup: a channel of capacity one, answered
	// at most once (answer* clears it), so answering never blocks.
	joinReply   chan *kmsg.JoinGroupResponse
	joinVersion int16
	syncReply   chan *kmsg.SyncGroupResponse
	syncVersion int16

	session      Timer
	sessionToken uint64
}

func (m *member) answerJoin(resp *kmsg.JoinGroupResponse) {
	if m.joinReply != nil {
		m.joinReply <- resp
		m.joinReply = nil
	}
}

func (m *member) answerSync(resp *kmsg.SyncGroupResponse) {
	if m.syncReply != nil {
		m.syncReply <- resp
		m.syncReply = nil
	}
}

// metadataFor is the member's subscription metadata for protocol.
func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (m *member) supports(protocol string) bool {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return true
		}
	}
	return false
}

// sameProtocols: a rejoin with unchanged protocols and metadata needs no
// rebalance.
func (m *member) sameProtocols(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(m.protocols) != len(ps) {
		return false
	}
	for i := range ps {
		if m.protocols[i].Name != ps[i].Name || !bytes.Equal(m.protocols[i].Metadata, ps[i].Metadata) {
			return false
		}
	}
	return true
}

// group is one classic group and its committed offsets.
type group struct {
	id           string
	state        groupState
	stateSince   time.Time
	protocolType string
	protocol     string
	generation   int32
	leader       string

	members       map[string]*member
	static        map[string]string // instance ID → member ID
	pending       map[string]Timer  // KIP-394 member IDs handed out, not yet joined
	nextJoinOrder uint64

	// Rebalance bookkeeping. rebalanceToken invalidates the rebalance and
	// pending-sync timers when they are re-armed or stopped.
	rebalanceTimer Timer
	syncTimer      Timer
	rebalanceToken uint64
	initialDelay   bool // KIP-134 delay running: joins do not complete it early
	newMemberAdded bool
	awaitingSync   map[string]bool // members yet to SyncGroup this generation
	syncWriting    bool            // leader's assignment appended this generation

	offsets map[topicPartition]committedOffset
	// deleted holds the log offsets of tombstones appended while commits
	// were in flight, so an older commit finishing later does not
	// resurrect its partition. Cleared when no commit is in flight.
	deleted         map[topicPartition]int64
	commitsInFlight int

	// txnOffsets are transactional offset commits whose transaction has
	// not ended, by producer ID (txnoffsets.go): durable as pending
	// records, visible once the transaction commits. Nil when none.
	txnOffsets map[int64]map[topicPartition]committedOffset
}

func newGroup(id string, now time.Time) *group {
	return &group{
		id:         id,
		state:      stateEmpty,
		stateSince: now,
		members:    make(map[string]*member),
		static:     make(map[string]string),
		pending:    make(map[string]Timer),
		offsets:    make(map[topicPartition]committedOffset),
	}
}

func (g *group) setState(s groupState, now time.Time) {
	g.state = s
	g.stateSince = now
}

func (g *group) membersInOrder() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].joinOrder < ms[j].joinOrder })
	return ms
}

func (g *group) addMember(m *member) {
	g.nextJoinOrder++
	m.joinOrder = g.nextJoinOrder
	g.members[m.id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
}

func (g *group) pendingIDs() []string {
	ids := make([]string, 0, len(g.pending))
	for id := range g.pending {
		ids = append(ids, id)
	}
	return ids
}

func (g *group) removePending(id string) {
	if t, ok := g.pending[id]; ok {
		if t != nil {
			t.Stop()
		}
		delete(g.pending, id)
	}
}

// stopTimers stops every timer of the group (Close, deletion).
func (g *group) stopTimers() {
	g.stopRebalanceTimers()
	for _, m := range g.members {
		m.stopSession()
	}
	for _, t := range g.pending {
		if t != nil {
			t.Stop()
		}
	}
}

func (g *group) stopRebalanceTimers() {
	g.rebalanceToken++
	if g.rebalanceTimer != nil {
		g.rebalanceTimer.Stop()
		g.rebalanceTimer = nil
	}
	if g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
	}
}

func (m *member) stopSession() {
	m.sessionToken++
	if m.session != nil {
		m.session.Stop()
		m.session = nil
	}
}

func (g *group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

func (g *group) allJoined() bool {
	for _, m := range g.members {
		if m.joinReply == nil {
			return false
		}
	}
	return len(g.pending) == 0
}

// supportsProtocols is Kafka's check for a joining member: an Empty group
// (or one whose only member is the joiner) takes any protocol type; else
// the type must match and one of the member's protocols must be supported
// by every other member.
func (g *group) supportsProtocols(joiner, protocolType string, ps []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType == "" || len(ps) == 0 {
		return false
	}
	others := 0
	for id := range g.members {
		if id != joiner {
			others++
		}
	}
	if others == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range ps {
		n := 0
		for id, m := range g.members {
			if id != joiner && m.supports(p.Name) {
				n++
			}
		}
		if n == others {
			return true
		}
	}
	return false
}

// selectProtocol is Kafka's vote: among the protocols every member
// supports, each member votes for its most preferred one; most votes
// wins, ties going to the protocol voted for first in join order.
func (g *group) selectProtocol() string {
	ms := g.membersInOrder()
	var order []string
	votes := make(map[string]int)
	for _, m := range ms {
		for _, p := range m.protocols {
			if !supportedByAll(ms, p.Name) {
				continue
			}
			if votes[p.Name] == 0 {
				order = append(order, p.Name)
			}
			votes[p.Name]++
			break
		}
	}
	best := ""
	for _, name := range order {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

func supportedByAll(ms []*member, protocol string) bool {
	for _, m := range ms {
		if !m.supports(protocol) {
			return false
		}
	}
	return true
}

// checkInstance is KIP-345's fencing of a request that names a static
// instance: an unknown instance is an unknown member, a different member
// ID is a fenced zombie.
func (g *group) checkInstance(instanceID *string, memberID string) int16 {
	if instanceID == nil {
		return 0
	}
	known, ok := g.static[*instanceID]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	if known != memberID {
		return kerr.FencedInstanceID.Code
	}
	return 0
}

// fencedInstance is the weaker check Kafka makes for commits: only a known
// instance with another member ID is fenced.
func (g *group) fencedInstance(instanceID *string, memberID string) bool {
	if instanceID == nil {
		return false
	}
	known, ok := g.static[*instanceID]
	return ok && known != memberID
}

func (g *group) sortedPartitions() []topicPartition {
	tps := make([]topicPartition, 0, len(g.offsets))
	for tp := range g.offsets {
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
