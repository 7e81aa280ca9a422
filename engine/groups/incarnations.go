package groups

import (
	"github.com/go-logr/logr"
)

// Topic incarnations (issue 7). A topic deleted and recreated under its
// name is a new topic: the committed offsets of the old incarnation must
// not apply to the new one, as Kafka deletes the offsets of a deleted
// topic. Offsets are keyed by topic name in the log (Kafka's format), so
// each commit carries the topic ID of the incarnation it was made for: the
// one live on the coordinator's broker when the commit arrives (Topics),
// persisted in the value (v4, tag 0, as Kafka 4 writes it).
//
// The rule is level-triggered, never an event to deliver to the shard
// owner (the delete machine runs on the controller, commits on the
// shard's owner):
//   - OffsetFetch answers "no committed offset" (-1) for an offset whose
//     topic ID is not the live incarnation's, and leaves it out of an
//     all-partitions answer;
//   - every expiry pass drops (tombstones) the offsets whose topic ID is
//     confirmed not live any more, and offsets without an ID of topics
//     confirmed gone;
//   - a new commit for the live incarnation replaces the old one (same
//     key).
//
// What is hidden or dropped is decided by the desired state on the volume
// (Topics.ConfirmTopicID), not by the broker's routing table alone, which
// may lag a moment behind (a broker that just took the shard over). The
// routing table is the fast path: an offset whose ID it names as live is
// served without I/O.
//
// A commit is stamped with the incarnation the coordinator knows. One that
// names its incarnation (OffsetCommit v10: the topic ID the client
// consumed under) is refused with UNKNOWN_TOPIC_ID unless that is the live
// one. Older versions (and TxnOffsetCommit) name none: a commit sent for
// the old incarnation that arrives after the coordinator learnt the new
// one is taken for the new one, a window only a topic ID can close.

// noTopicID is the zero UUID: no topic ID known.
var noTopicID [16]byte

// Topics is the coordinator's view of the topic table. Both methods are
// called without the coordinator's lock held.
type Topics interface {
	// TopicID returns the ID of the live incarnation of topic as this
	// broker routes it (memory, cheap); ok is false when it routes none
	// (absent, or being deleted).
	TopicID(topic string) (id [16]byte, ok bool)
	// ConfirmTopicID reads the live incarnation from the desired state on
	// the volume (slow: one open): ok false when the topic has none.
	ConfirmTopicID(topic string) (id [16]byte, ok bool, err error)
}

// incarnation is what is known of one topic's live incarnation.
type incarnation struct {
	id        [16]byte
	live      bool
	confirmed bool // read from the volume
}

// incarnations resolves topics for one request or pass, each at most once
// from memory and once from the volume.
type incarnations struct {
	topics Topics
	log    logr.Logger
	known  map[string]incarnation
}

func (c *Coordinator) newIncarnations() *incarnations {
	return &incarnations{topics: c.cfg.Topics, log: c.log, known: make(map[string]incarnation)}
}

// lookup returns what is known of topic, confirming it on the volume when
// confirm is set and the memory answer does not already agree with want.
func (in *incarnations) lookup(topic string, want [16]byte, confirm bool) incarnation {
	inc, ok := in.known[topic]
	if !ok {
		inc.id, inc.live = in.topics.TopicID(topic)
		in.known[topic] = inc
	}
	if inc.confirmed || !confirm || (inc.live && inc.id == want && want != noTopicID) {
		return inc
	}
	id, live, err := in.topics.ConfirmTopicID(topic)
	if err != nil {
		in.log.Error(err, "reading the desired state of a topic to check the incarnation of committed offsets", "topic", topic)
		return inc // unconfirmed
	}
	inc = incarnation{id: id, live: live, confirmed: true}
	in.known[topic] = inc
	return inc
}

// applies reports whether an offset committed for incarnation id of topic
// applies now: it has no ID, or the ID is the live incarnation's. A
// mismatch in memory is confirmed on the volume first; when that read
// fails, memory decides.
func (in *incarnations) applies(topic string, id [16]byte) bool {
	if in == nil || in.topics == nil || id == noTopicID {
		return true
	}
	inc := in.lookup(topic, id, true)
	return inc.live && inc.id == id
}

// stale reports whether an offset committed for incarnation id of topic
// is certainly of an incarnation that is no longer live, so that it may
// be deleted: confirmed on the volume, and, for an offset without an ID,
// the topic gone both from memory and from the volume.
func (in *incarnations) stale(topic string, id [16]byte) bool {
	if in == nil || in.topics == nil {
		return false
	}
	if id == noTopicID {
		if inc := in.lookup(topic, id, false); inc.live {
			return false
		}
	}
	inc := in.lookup(topic, id, true)
	if !inc.confirmed {
		return false
	}
	if id == noTopicID {
		return !inc.live
	}
	return !inc.live || inc.id != id
}

// currentTopicID returns the ID to stamp a commit for topic with: the live
// incarnation's as routed here. A topic routed nowhere gets no ID: package
// wire refuses commits to unknown topics before they get here, so that is
// only a topic deleted in between (its unstamped offset is dropped by the
// expiry pass once the topic is confirmed gone), or a caller that does not
// check.
func (c *Coordinator) currentTopicID(known map[string][16]byte, topic string) [16]byte {
	if c.cfg.Topics == nil {
		return noTopicID
	}
	if id, ok := known[topic]; ok {
		return id
	}
	id, ok := c.cfg.Topics.TopicID(topic)
	if !ok {
		id = noTopicID
	}
	known[topic] = id
	return id
}
