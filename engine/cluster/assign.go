package cluster

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"slices"
	"sync"

	"github.com/kaas-dev/kaas/volume"
)

// weight is the rendezvous (highest-random-weight) score of broker for a
// partition: FNV-1a over (topic ID, 0, partition, broker), then the
// splitmix64 finaliser so that nearby inputs spread. It is a fixed function
// of its inputs on every host and Go version (no per-process hash seed), so
// every broker computes the same owner.
func weight(topicID string, partition, broker int32) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(topicID))
	var b [9]byte
	binary.BigEndian.PutUint32(b[1:5], uint32(partition))
	binary.BigEndian.PutUint32(b[5:9], uint32(broker))
	_, _ = h.Write(b[:])
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Assign selects the broker for (topicID, partition) by rendezvous hashing
// over the sorted eligible brokers (docs/design.md §5): the one with the highest
// weight wins, ties going to the lower ID. When a broker leaves, only the
// partitions it held move; when one joins, only the partitions it now wins
// move to it. If zone is not empty and some live broker is in it, only
// those are eligible; otherwise all are. It returns -1 when live is empty.
// The result does not depend on the order of live.
func Assign(topicID string, partition int32, live []LiveBroker, zone string) int32 {
	inZone := zone != "" && slices.ContainsFunc(live, func(b LiveBroker) bool { return b.Zone == zone })
	best, bestW := int32(-1), uint64(0)
	for _, b := range live {
		if inZone && b.Zone != zone {
			continue
		}
		w := weight(topicID, partition, b.ID)
		if best < 0 || w > bestW || (w == bestW && b.ID < best) {
			best, bestW = b.ID, w
		}
	}
	return best
}

// Topic is a topic to assign, identified by its topic ID (a topic deleted
// and recreated under the same name has a new ID: docs/design.md §1 rule 4).
type Topic struct {
	ID         string
	Partitions int32
}

// PartitionOwner is one partition's entry in the assignment.
type PartitionOwner struct {
	// Broker owns (is the sole writer of) the partition; -1 if no broker is
	// live.
	Broker int32
	// LeaderEpoch grows by one exactly when Broker changes (or Broker
	// restarts: a new Incarnation). The owner writes the partition's fence
	// at this epoch before reading its tail.
	LeaderEpoch int32
	// Incarnation is the owner's incarnation when it was assigned (empty
	// if unknown). A broker restarted under the same ID is a new owner: it
	// gets a new leader epoch, and it does not act on an entry naming its
	// previous incarnation.
	Incarnation string
	// Since is the assignment version that gave the entry its owner and
	// epoch (0 in files from before kaas kept it): a broker that has read
	// that version knows it owns the partition.
	Since int64
}

// Assignment is the assignment (assignment.json and the chain after it,
// assignchain.go). Only the controller writes it, stamped with its
// controller epoch. Once published, an Assignment is never changed.
type Assignment struct {
	ControllerEpoch int32
	// Version counts the controller's writes: each change is written one
	// version above the last (Stamp); a new controller continues from the
	// highest it read. 0 in files written before kaas kept it.
	Version int64
	// Topics maps a topic ID to its partitions' owners, by partition index.
	Topics map[string][]PartitionOwner
	// Coordinators are the coordinator shards' owners, by shard, looked
	// up as the topic CoordinatorsID.
	Coordinators []PartitionOwner
	// MaxLeaderEpoch is the highest leader epoch this assignment or any
	// before it handed out, deleted topics' included. A new partition
	// starts above it, so that no epoch is ever reused under a name: a
	// topic deleted and recreated under the same name never shares a
	// fence epoch, a manifest or a segment name with its previous
	// incarnation, whose paused writer may still wake up and write by
	// path into the new directory (the fence then stops it).
	MaxLeaderEpoch int32
	// Legacy writes the file in format 1, which brokers of an older kaas
	// read (assignfile.go); it is never read from a file.
	Legacy bool
}

// NoteEpochs raises MaxLeaderEpoch to every epoch a holds.
func (a *Assignment) NoteEpochs() {
	for _, ps := range a.Topics {
		for _, o := range ps {
			a.MaxLeaderEpoch = max(a.MaxLeaderEpoch, o.LeaderEpoch)
		}
	}
	for _, o := range a.Coordinators {
		a.MaxLeaderEpoch = max(a.MaxLeaderEpoch, o.LeaderEpoch)
	}
}

// Owners returns the entries of a topic, or of the coordinator shards
// for CoordinatorsID.
func (a *Assignment) Owners(topicID string) []PartitionOwner {
	if topicID == CoordinatorsID {
		return a.Coordinators
	}
	return a.Topics[topicID]
}

// Owner returns the owner of a partition (a coordinator shard's for
// CoordinatorsID).
func (a *Assignment) Owner(topicID string, partition int32) (PartitionOwner, bool) {
	ps := a.Owners(topicID)
	if partition < 0 || int(partition) >= len(ps) {
		return PartitionOwner{}, false
	}
	return ps[partition], true
}

// ErrStaleController says an assignment (or a controller about to write
// one) is older than a controller epoch already seen.
var ErrStaleController = errors.New("assignment from an older controller epoch")

// NextAssignment computes the assignment the controller at controllerEpoch
// writes, given the previous one (nil if none), every existing topic (the
// coordinator shards as the topic CoordinatorsID), and the live brokers.
// Owners come from Assign with no zone: a partition has one writer
// whatever zone its clients are in. A partition keeps its leader epoch
// while its owner stays and gets the previous epoch plus one when the
// owner changes (also to or from -1, and when the owner's incarnation in
// live differs from the one recorded: a restart under the same ID is an
// owner change); a new partition starts above every epoch handed out
// before (MaxLeaderEpoch), at 0 in the first assignment. The result has
// prev's version and no Since of its own: Stamp makes it the next
// version.
//
// topics must be the complete list: a topic missing from it is released
// and forgotten, so leaving out one that still exists would restart its
// epochs. A controllerEpoch below prev's is refused with ErrStaleController.
// The same inputs always give the same result.
func NextAssignment(prev *Assignment, topics []Topic, live []LiveBroker, controllerEpoch int32) (*Assignment, error) {
	if prev != nil && controllerEpoch < prev.ControllerEpoch {
		return nil, fmt.Errorf("controller epoch %d, previous assignment has %d: %w", controllerEpoch, prev.ControllerEpoch, ErrStaleController)
	}
	next := &Assignment{ControllerEpoch: controllerEpoch, Topics: make(map[string][]PartitionOwner, len(topics))}
	first := int32(0) // the epoch of a partition new to the assignment
	if prev != nil {
		floor := *prev
		floor.NoteEpochs()
		first = floor.MaxLeaderEpoch + 1
		next.MaxLeaderEpoch = floor.MaxLeaderEpoch
		next.Version = prev.Version
	}
	incarnation := make(map[int32]string, len(live))
	for _, b := range live {
		incarnation[b.ID] = b.Incarnation
	}
	for _, t := range topics {
		if t.Partitions < 0 {
			return nil, fmt.Errorf("topic %s: negative partition count %d", t.ID, t.Partitions)
		}
		var old []PartitionOwner
		if prev != nil {
			old = prev.Owners(t.ID)
		}
		ps := make([]PartitionOwner, t.Partitions)
		for p := range t.Partitions {
			owner := Assign(t.ID, p, live, "")
			inc := incarnation[owner]
			switch {
			case int(p) >= len(old):
				ps[p] = PartitionOwner{Broker: owner, LeaderEpoch: first, Incarnation: inc}
			case old[p].Broker == owner && old[p].Incarnation == inc:
				ps[p] = old[p]
			default:
				ps[p] = PartitionOwner{Broker: owner, LeaderEpoch: old[p].LeaderEpoch + 1, Incarnation: inc}
			}
		}
		if t.ID == CoordinatorsID {
			next.Coordinators = ps
			continue
		}
		next.Topics[t.ID] = ps
	}
	next.NoteEpochs()
	return next, nil
}

// AssignmentPath is the assignment file.
func AssignmentPath(clusterDir string) string { return path.Join(clusterDir, AssignmentFile) }

// WriteAssignment replaces the assignment file atomically. Only the
// controller calls it, after Elector.Verify. An error may mean the file was
// replaced anyway; the controller re-reads and re-drives it.
//
// After a successful write it removes the temp files earlier assignment
// writes left behind (a controller killed between its create and its
// rename leaves one): only the controller writes the assignment, so they
// are its to sweep, and every later write re-drives the sweep. A deposed
// controller still writing loses its temp file and fails its rename, which
// is harmless; the current controller, should a deposed one sweep its temp
// the same way, fails one round and writes again the next.
func WriteAssignment(fsys volume.FS, clusterDir string, a *Assignment) error {
	if a.ControllerEpoch <= 0 {
		return fmt.Errorf("write assignment: controller epoch %d", a.ControllerEpoch)
	}
	b, err := json.Marshal(a) // map keys sorted: same assignment, same bytes
	if err != nil {
		return fmt.Errorf("write assignment: %w", err)
	}
	if err := writeAtomicMkdir(fsys, AssignmentPath(clusterDir), b); err != nil {
		return fmt.Errorf("write assignment: %w", err)
	}
	sweepAssignmentTemps(fsys, clusterDir)
	return nil
}

// WriteAssignmentInPlaceUnsafe overwrites the assignment file in place,
// with no temp file and no rename, so a reader or a crash can find it torn.
// It exists only as a negative control for chaos tests, whose checkers must
// catch what it breaks; nothing else calls it.
func WriteAssignmentInPlaceUnsafe(fsys volume.FS, clusterDir string, a *Assignment) error {
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("write assignment in place: %w", err)
	}
	f, err := fsys.Create(AssignmentPath(clusterDir))
	if err != nil {
		return fmt.Errorf("write assignment in place: %w", err)
	}
	// Two writes, as a large file would take several.
	half := len(b) / 2
	if _, err = f.Write(b[:half]); err == nil {
		_, err = f.Write(b[half:])
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write assignment in place: %w", err)
	}
	return nil
}

// sweepAssignmentTemps removes leftover temp files of assignment writes,
// best effort.
func sweepAssignmentTemps(fsys volume.FS, clusterDir string) {
	ents, err := fsys.ReadDir(clusterDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if volume.IsTempNameOf(e.Name(), AssignmentFile) {
			_ = fsys.Remove(path.Join(clusterDir, e.Name()))
		}
	}
}

// ReadAssignment reads the base file (assignment.json) through Open,
// retrying a transient ENOENT or ESTALE: the whole assignment as of the
// base's version (LoadAssignment adds the chain after it). If no
// controller has written it yet the error satisfies
// errors.Is(err, fs.ErrNotExist).
func ReadAssignment(fsys volume.FS, clusterDir string) (*Assignment, error) {
	b, err := readKnown(fsys, AssignmentPath(clusterDir))
	if err != nil {
		return nil, fmt.Errorf("read assignment: %w", err)
	}
	var a Assignment
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("read assignment: %w", err)
	}
	return &a, nil
}

// AssignmentReader reads the assignment for a broker, the head every
// time and only what changed after the version it holds, and refuses one
// older than the highest controller epoch it has seen, in an assignment
// or from the Elector: a deposed controller's late write lands where
// nobody obeys it, and the current controller overwrites it on its next
// round. It is safe for concurrent use.
type AssignmentReader struct {
	fsys       volume.FS
	clusterDir string

	mu      sync.Mutex
	highest int32
	cur     *Assignment // what the last Read returned
}

// NewAssignmentReader returns a reader that has seen no controller epoch.
func NewAssignmentReader(fsys volume.FS, clusterDir string) *AssignmentReader {
	return &AssignmentReader{fsys: fsys, clusterDir: clusterDir}
}

// ObserveControllerEpoch records a controller epoch seen elsewhere, such as
// Elector.Current.
func (r *AssignmentReader) ObserveControllerEpoch(epoch int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.highest = max(r.highest, epoch)
}

// HighestControllerEpoch returns the highest controller epoch seen.
func (r *AssignmentReader) HighestControllerEpoch() int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.highest
}

// Read reads the current assignment: the head, and when it moved, the
// deltas after the version held, or the base and its chain when the
// chain no longer reaches back to it (a compaction since, or the first
// read). Without a head (a cluster of format 1) it reads the base. One
// older than the highest controller epoch seen is refused with an error
// satisfying errors.Is(err, ErrStaleController); the caller keeps what it
// had. A chain caught half-way (errChainBehind, a delta already
// collected) is an error too: read again next round.
func (r *AssignmentReader) Read() (AssignmentUpdate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	head, err := ReadAssignmentHead(r.fsys, r.clusterDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return AssignmentUpdate{}, err
	}
	if head != nil && r.cur != nil && head.AssignmentVersion == r.cur.ID() {
		return AssignmentUpdate{Assignment: r.cur, Unchanged: true}, nil
	}
	var (
		a   *Assignment
		up  AssignmentUpdate
		got bool
	)
	if head != nil && r.cur != nil && !head.Before(r.cur.ID()) {
		var ds []*AssignmentDelta
		if a, ds, err = followChain(r.fsys, r.clusterDir, r.cur, head); err == nil {
			up, got = changedBy(ds), true
		}
	}
	if !got {
		if a, _, err = LoadAssignment(r.fsys, r.clusterDir); err != nil {
			return AssignmentUpdate{}, err
		}
		// Without a head the base may be of format 1, whose writes all
		// carry version 0: only a versioned one is known by its version.
		if head != nil && r.cur != nil && a.ID() == r.cur.ID() {
			return AssignmentUpdate{Assignment: r.cur, Unchanged: true}, nil
		}
		up.Full = true
	}
	if a.ControllerEpoch < r.highest {
		return AssignmentUpdate{}, fmt.Errorf("assignment at controller epoch %d, %d seen: %w", a.ControllerEpoch, r.highest, ErrStaleController)
	}
	r.highest = a.ControllerEpoch
	r.cur = a
	up.Assignment = a
	return up, nil
}

// HeadUnchanged reports whether the assignment's head still names the
// version the last Read returned, without reading further or changing
// what Read returns next. A cluster without a head (format 1) answers
// false, as does a head that cannot be read.
func (r *AssignmentReader) HeadUnchanged() bool {
	head, err := ReadAssignmentHead(r.fsys, r.clusterDir)
	if err != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur != nil && head.AssignmentVersion == r.cur.ID()
}

// changedBy lists what deltas change.
func changedBy(ds []*AssignmentDelta) AssignmentUpdate {
	var up AssignmentUpdate
	seen := map[string]bool{}
	for _, d := range ds {
		for _, id := range d.Changed() {
			if !seen[id] {
				seen[id] = true
				up.Changed = append(up.Changed, id)
			}
		}
		up.Coordinators = up.Coordinators || d.Coordinators != nil
	}
	slices.Sort(up.Changed)
	return up
}
