package dataplane

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"math/bits"
)

// OffsetMap is the log cleaner's bounded dedupe memory (Kafka's
// SkimpyOffsetMap): for each key of a dirty range, the offset of its last
// record. It is one byte slice of 24-byte slots, each the key's MD5 and
// the offset plus one (zero marks an empty slot, so offset 0 needs no
// sentinel hash), with linear probing. A 128-bit hash makes a collision,
// which would drop a latest value, negligible at any key count a log
// sees; a 64-bit one would not. It is full at 0.9 of its slots, where
// probing stays short. Put and Get allocate nothing. Not safe for
// concurrent use.
type OffsetMap struct {
	buf     []byte
	slots   uint64
	entries int
	limit   int // entries at which it is full
	latest  int64
	// dropLatest is the negative control UnsafeDropLatest.
	dropLatest bool
}

// UnsafeDropLatest is a negative control: for one key in 64 the map
// claims a record beyond the key's last, so the filter removes the key's
// latest value (a loss the compaction checker must catch). Never on in
// production.
func (m *OffsetMap) UnsafeDropLatest() { m.dropLatest = true }

const (
	offsetMapSlotBytes = md5.Size + 8
	// offsetMapLoad is Kafka's log.cleaner.io.buffer.load.factor.
	offsetMapLoad = 0.9
)

// NewOffsetMap allocates a map in budget bytes (a cleaner thread's share
// of the dedupe buffer). A budget too small to hold one key is refused, as
// Kafka refuses a dedupe buffer without a slot per thread.
func NewOffsetMap(budget int) (*OffsetMap, error) {
	slots := budget / offsetMapSlotBytes
	limit := int(float64(slots) * offsetMapLoad)
	if limit < 1 {
		return nil, fmt.Errorf("offset map: %d bytes hold no key: need at least %d", budget, 2*offsetMapSlotBytes)
	}
	return &OffsetMap{buf: make([]byte, slots*offsetMapSlotBytes), slots: uint64(slots), limit: limit, latest: -1}, nil
}

// Slots is how many slots it has; Len how many keys it holds; Full
// whether a new key would be refused.
func (m *OffsetMap) Slots() int { return int(m.slots) }
func (m *OffsetMap) Len() int   { return m.entries }
func (m *OffsetMap) Full() bool { return m.entries >= m.limit }

// Put maps key to offset, replacing an earlier offset for it. It reports
// false, and changes nothing, when the key is new and the map is full: the
// map build ends there.
func (m *OffsetMap) Put(key []byte, offset int64) bool {
	sum := md5.Sum(key)
	at, found := m.find(&sum)
	if !found {
		if m.Full() {
			return false
		}
		copy(m.buf[at:at+md5.Size], sum[:])
		m.entries++
	}
	stored := uint64(offset) + 1
	if m.dropLatest && sum[0]%64 == 0 {
		stored++
	}
	binary.LittleEndian.PutUint64(m.buf[at+md5.Size:], stored)
	m.noteLatest(offset)
	return true
}

// Get is the offset mapped for key, -1 if none.
func (m *OffsetMap) Get(key []byte) int64 {
	sum := md5.Sum(key)
	at, found := m.find(&sum)
	if !found {
		return -1
	}
	return int64(binary.LittleEndian.Uint64(m.buf[at+md5.Size:])) - 1
}

// LatestOffset is the highest offset the map covers: the last offset put
// or noted as read, -1 if none. Records above it were not seen by the map
// build, so the filter keeps them.
func (m *OffsetMap) LatestOffset() int64 { return m.latest }

// noteLatest records that the map build read up to offset (a whole batch,
// keys or not), as Kafka's updateLatest does.
func (m *OffsetMap) noteLatest(offset int64) { m.latest = max(m.latest, offset) }

// Clear empties the map for the next pass, keeping its memory.
func (m *OffsetMap) Clear() {
	clear(m.buf)
	m.entries, m.latest = 0, -1
}

// find returns the byte position of sum's slot, or of the empty slot where
// it would go. The map is never full to the last slot, so the probe ends.
func (m *OffsetMap) find(sum *[md5.Size]byte) (at int, found bool) {
	// The hash's high 64 bits spread over the slots by multiply-shift:
	// no modulo, no bias worth noting.
	slot, _ := bits.Mul64(binary.LittleEndian.Uint64(sum[:8]), m.slots)
	for {
		at = int(slot) * offsetMapSlotBytes
		if binary.LittleEndian.Uint64(m.buf[at+md5.Size:]) == 0 {
			return at, false
		}
		if [md5.Size]byte(m.buf[at:at+md5.Size]) == *sum {
			return at, true
		}
		if slot++; slot == m.slots {
			slot = 0
		}
	}
}
