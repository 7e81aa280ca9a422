package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/kaas-dev/kaas/volume"
)

// The assignment as a chain (docs/volume.md "The assignment"): the base,
// assignment.json, is a whole assignment; each later change is a delta
// file holding only the entries it changes; the head names the base's
// version and the deltas after it. A broker reads the head every round
// (a few hundred bytes) and, when it moved, only the deltas it lacks; the
// controller writes a change as one delta plus the head, and folds the
// chain into a new base (compacts) when the base is small or the chain
// long, so what is written per change stays proportional to the change.
//
//	<cluster>/assignment.json                                   base
//	<cluster>/assignment.d/head.json                            head
//	<cluster>/assignment.d/delta-<version>-c<controllerEpoch>.json   deltas

// Names of the chain's files.
const (
	AssignmentChainDir = "assignment.d"
	assignmentHeadFile = "head.json"
	deltaPrefix        = "delta-"
)

// AssignmentHead is the content of assignment.d/head.json: the version
// the chain reaches, the base it starts from and the deltas after it, in
// order (each applies to the version before it, the first to Base).
type AssignmentHead struct {
	Format int `json:"format"`
	AssignmentVersion
	Base   AssignmentVersion   `json:"base"`
	Deltas []AssignmentVersion `json:"deltas,omitempty"`
}

// TopicDelta is one topic's change in a delta: its partition count after
// the change and the entries that changed (every entry beyond the old
// count included).
type TopicDelta struct {
	Partitions int32          `json:"partitions"`
	Set        []indexedEntry `json:"set"`
}

// AssignmentDelta is the content of a delta file: what turns the
// assignment at Prev into the one at its own version.
type AssignmentDelta struct {
	Format int `json:"format"`
	AssignmentVersion
	Prev           AssignmentVersion     `json:"prev"`
	MaxLeaderEpoch int32                 `json:"maxLeaderEpoch,omitempty"`
	Brokers        map[int32]string      `json:"brokers,omitempty"` // incarnations of the brokers Set names
	Topics         map[string]TopicDelta `json:"topics,omitempty"`
	Removed        []string              `json:"removed,omitempty"`
	Coordinators   *TopicDelta           `json:"coordinators,omitempty"`
}

// Empty reports whether d changes no entry.
func (d *AssignmentDelta) Empty() bool {
	return len(d.Topics) == 0 && len(d.Removed) == 0 && d.Coordinators == nil
}

// Changed lists the topic IDs d sets, grows or removes, sorted.
func (d *AssignmentDelta) Changed() []string {
	out := slices.Collect(maps.Keys(d.Topics))
	out = append(out, d.Removed...)
	slices.Sort(out)
	return out
}

// sameOwner compares what makes two entries the same owner: the broker,
// its incarnation and the leader epoch.
func sameOwner(a, b PartitionOwner) bool {
	return a.Broker == b.Broker && a.LeaderEpoch == b.LeaderEpoch && a.Incarnation == b.Incarnation
}

// diffOwners is the TopicDelta from old to next, nil when they are equal.
// Entries of next that differ from old (or are beyond it) get since.
func diffOwners(old, next []PartitionOwner, since int64, brokers map[int32]string) *TopicDelta {
	var set []indexedEntry
	for i := range next {
		if i < len(old) && sameOwner(old[i], next[i]) {
			next[i].Since = old[i].Since
			continue
		}
		next[i].Since = since
		if next[i].Incarnation != "" {
			brokers[next[i].Broker] = next[i].Incarnation
		}
		set = append(set, indexedEntry{Index: int32(i), ownerEntry: ownerEntry{Broker: next[i].Broker, LeaderEpoch: next[i].LeaderEpoch, Since: since}})
	}
	if set == nil && len(next) == len(old) {
		return nil
	}
	return &TopicDelta{Partitions: int32(len(next)), Set: set}
}

// Stamp makes next the version after prev (nil: the first, version 1):
// next.Version is prev's plus one, each entry that differs from prev's
// (or is new) gets that version as its Since, and the others keep prev's.
// It returns the delta from prev to next, Empty when no entry differs
// (MaxLeaderEpoch alone is no change).
func Stamp(prev, next *Assignment) *AssignmentDelta {
	var prevTopics map[string][]PartitionOwner
	var prevCoords []PartitionOwner
	d := &AssignmentDelta{Format: AssignmentFormat, Brokers: map[int32]string{}}
	if prev != nil {
		d.Prev = prev.ID()
		next.Version = prev.Version + 1
		prevTopics, prevCoords = prev.Topics, prev.Coordinators
	} else {
		next.Version = 1
	}
	d.AssignmentVersion = next.ID()
	d.MaxLeaderEpoch = next.MaxLeaderEpoch
	for id, ps := range next.Topics {
		if td := diffOwners(prevTopics[id], ps, next.Version, d.Brokers); td != nil {
			if d.Topics == nil {
				d.Topics = map[string]TopicDelta{}
			}
			d.Topics[id] = *td
		}
	}
	for id := range prevTopics {
		if _, ok := next.Topics[id]; !ok {
			d.Removed = append(d.Removed, id)
		}
	}
	slices.Sort(d.Removed)
	d.Coordinators = diffOwners(prevCoords, next.Coordinators, next.Version, d.Brokers)
	return d
}

// applyOwners returns old changed by td, in a new slice.
func applyOwners(old []PartitionOwner, td TopicDelta, brokers map[int32]string) ([]PartitionOwner, error) {
	out := make([]PartitionOwner, td.Partitions)
	copy(out, old)
	for i := len(old); i < int(td.Partitions); i++ {
		out[i] = PartitionOwner{Broker: -1}
	}
	for _, e := range td.Set {
		if e.Index < 0 || e.Index >= td.Partitions {
			return nil, fmt.Errorf("entry %d of %d partitions", e.Index, td.Partitions)
		}
		out[e.Index] = PartitionOwner{Broker: e.Broker, LeaderEpoch: e.LeaderEpoch, Incarnation: brokers[e.Broker], Since: e.Since}
	}
	for i := len(old); i < int(td.Partitions); i++ {
		if out[i].Since == 0 {
			return nil, fmt.Errorf("partition %d is new and not set", i)
		}
	}
	return out, nil
}

// Apply returns a with d applied, as a new Assignment (a is not changed;
// the topics d does not name share their slices with a). d must apply to
// a's version.
func (a *Assignment) Apply(d *AssignmentDelta) (*Assignment, error) {
	if d.Prev != a.ID() {
		return nil, fmt.Errorf("assignment delta %s applies to %s, not %s", d.AssignmentVersion, d.Prev, a.ID())
	}
	next := &Assignment{ControllerEpoch: d.ControllerEpoch, Version: d.Version, MaxLeaderEpoch: d.MaxLeaderEpoch,
		Topics: maps.Clone(a.Topics), Coordinators: a.Coordinators}
	if next.Topics == nil {
		next.Topics = map[string][]PartitionOwner{}
	}
	for _, id := range d.Removed {
		delete(next.Topics, id)
	}
	for id, td := range d.Topics {
		ps, err := applyOwners(a.Topics[id], td, d.Brokers)
		if err != nil {
			return nil, fmt.Errorf("assignment delta %s, topic %s: %w", d.AssignmentVersion, id, err)
		}
		next.Topics[id] = ps
	}
	if d.Coordinators != nil {
		ps, err := applyOwners(a.Coordinators, *d.Coordinators, d.Brokers)
		if err != nil {
			return nil, fmt.Errorf("assignment delta %s, coordinator shards: %w", d.AssignmentVersion, err)
		}
		next.Coordinators = ps
	}
	return next, nil
}

// Paths of the chain's files.
func assignmentChainDir(clusterDir string) string { return path.Join(clusterDir, AssignmentChainDir) }

// AssignmentHeadPath is the head file.
func AssignmentHeadPath(clusterDir string) string {
	return path.Join(clusterDir, AssignmentChainDir, assignmentHeadFile)
}

func deltaPath(clusterDir string, v AssignmentVersion) string {
	return path.Join(assignmentChainDir(clusterDir), fmt.Sprintf("%s%020d-c%010d.json", deltaPrefix, v.Version, v.ControllerEpoch))
}

// ReadAssignmentHead reads the head through Open, retrying a transient
// ENOENT or ESTALE. A chain never written (an assignment of format 1, or
// none) gives an error satisfying errors.Is(err, fs.ErrNotExist).
func ReadAssignmentHead(fsys volume.FS, clusterDir string) (*AssignmentHead, error) {
	b, err := readKnown(fsys, AssignmentHeadPath(clusterDir))
	if err != nil {
		return nil, fmt.Errorf("read assignment head: %w", err)
	}
	var h AssignmentHead
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("read assignment head: %w", err)
	}
	if h.Format != AssignmentFormat {
		return nil, fmt.Errorf("read assignment head: format %d", h.Format)
	}
	return &h, nil
}

// readDelta reads the delta of version v.
func readDelta(fsys volume.FS, clusterDir string, v AssignmentVersion) (*AssignmentDelta, error) {
	b, err := readKnown(fsys, deltaPath(clusterDir, v))
	if err != nil {
		return nil, fmt.Errorf("read assignment delta %s: %w", v, err)
	}
	var d AssignmentDelta
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("read assignment delta %s: %w", v, err)
	}
	if d.AssignmentVersion != v {
		return nil, fmt.Errorf("read assignment delta %s: it holds %s", v, d.AssignmentVersion)
	}
	return &d, nil
}

// ReadAssignmentID reads which write the base file holds from its first
// bytes, not the whole file. An absent base gives an error satisfying
// errors.Is(err, fs.ErrNotExist).
func ReadAssignmentID(fsys volume.FS, clusterDir string) (AssignmentVersion, error) {
	for attempt := 0; ; attempt++ {
		f, err := fsys.Open(AssignmentPath(clusterDir))
		if err == nil {
			b, rerr := readPrefix(f, 256)
			_ = f.Close()
			if rerr != nil {
				return AssignmentVersion{}, fmt.Errorf("read assignment version: %w", rerr)
			}
			id, ok := parseAssignmentID(b)
			if !ok {
				return AssignmentVersion{}, fmt.Errorf("read assignment version: no version in %q", b)
			}
			return id, nil
		}
		if !transientRead(err) || attempt == readAttempts-1 {
			return AssignmentVersion{}, fmt.Errorf("read assignment version: %w", err)
		}
	}
}

// errChainBehind says the base is older than the one the head names: a
// reader caught a replacement half-way, or a deposed controller wrote
// the base (the controller rewrites it). Read again later.
var errChainBehind = errors.New("assignment base is older than its head names")

// LoadAssignment reads the whole current assignment and its head (nil
// when the chain was never written): the base, then the deltas the head
// names after it; a base newer than the head (a compacting write whose
// head was not written yet) is current alone. No assignment at all gives
// an error satisfying errors.Is(err, fs.ErrNotExist).
func LoadAssignment(fsys volume.FS, clusterDir string) (*Assignment, *AssignmentHead, error) {
	head, err := ReadAssignmentHead(fsys, clusterDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	base, berr := ReadAssignment(fsys, clusterDir)
	if berr != nil {
		return nil, nil, berr
	}
	if head == nil || head.Before(base.ID()) || head.AssignmentVersion == base.ID() {
		return base, head, nil
	}
	a, _, err := followChain(fsys, clusterDir, base, head)
	return a, head, err
}

// followChain applies head's deltas after from, which must be head's
// base or one of its deltas' versions, and returns them too.
func followChain(fsys volume.FS, clusterDir string, from *Assignment, head *AssignmentHead) (*Assignment, []*AssignmentDelta, error) {
	i := 0
	if at := from.ID(); at != head.Base {
		i = slices.Index(head.Deltas, at) + 1
		if i == 0 {
			if at.Before(head.Base) {
				return nil, nil, fmt.Errorf("%w: %s, head %s names base %s", errChainBehind, at, head.AssignmentVersion, head.Base)
			}
			return nil, nil, fmt.Errorf("assignment %s is not in the chain of head %s", at, head.AssignmentVersion)
		}
	}
	a := from
	var applied []*AssignmentDelta
	for _, v := range head.Deltas[i:] {
		d, err := readDelta(fsys, clusterDir, v)
		if err != nil {
			return nil, nil, err
		}
		if a, err = a.Apply(d); err != nil {
			return nil, nil, err
		}
		applied = append(applied, d)
	}
	return a, applied, nil
}

// AssignmentUpdate is what one AssignmentReader.Read found.
type AssignmentUpdate struct {
	// Assignment is the current assignment (the same pointer as before
	// when Unchanged). Never changed once returned.
	Assignment *Assignment
	Unchanged  bool
	// Full says the whole assignment was read (the first read, or the
	// chain did not reach back to the one held): compare it whole.
	// Otherwise Changed lists the topic IDs set, grown or removed since
	// the last read, and Coordinators whether the shards changed.
	Full         bool
	Changed      []string
	Coordinators bool
}

// CommitAssignment writes next, which Stamp made one version above prev
// (the committed assignment, nil for none) with delta d, and returns the
// new head. head is the chain's head as the controller read it this
// round (nil if there is none). compact writes next whole as the base
// (WriteAssignment) and then a head naming it; otherwise d becomes a delta
// file (an atomic write) and the head names it after the others. Only
// the controller calls it, after Elector.Verify; an error may mean the
// write landed anyway: the controller reads the chain again and
// re-drives.
func CommitAssignment(fsys volume.FS, clusterDir string, head *AssignmentHead, next *Assignment, d *AssignmentDelta, compact bool) (*AssignmentHead, error) {
	if next.ControllerEpoch <= 0 {
		return nil, fmt.Errorf("commit assignment: controller epoch %d", next.ControllerEpoch)
	}
	nh := &AssignmentHead{Format: AssignmentFormat, AssignmentVersion: next.ID()}
	if compact || head == nil || head.AssignmentVersion != d.Prev {
		// A chain the delta does not extend (none yet, or not the one d
		// was computed against) is restarted from a new base.
		if err := WriteAssignment(fsys, clusterDir, next); err != nil {
			return nil, err
		}
		nh.Base = next.ID()
	} else {
		b, err := json.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("commit assignment delta %s: %w", d.AssignmentVersion, err)
		}
		// An atomic replace, not an exclusive create: a file of this name
		// can only be this controller's own from an attempt whose head
		// never landed (the caller commits only on the head it read, and
		// names carry the controller epoch), which no head names.
		if err := writeAtomicMkdir(fsys, deltaPath(clusterDir, d.AssignmentVersion), b); err != nil {
			return nil, fmt.Errorf("commit assignment delta %s: %w", d.AssignmentVersion, err)
		}
		nh.Base = head.Base
		nh.Deltas = append(slices.Clip(head.Deltas), d.AssignmentVersion)
	}
	b, err := json.Marshal(nh)
	if err != nil {
		return nil, fmt.Errorf("commit assignment head: %w", err)
	}
	if err := writeAtomicMkdir(fsys, AssignmentHeadPath(clusterDir), b); err != nil {
		return nil, fmt.Errorf("commit assignment head: %w", err)
	}
	if len(nh.Deltas) == 0 {
		collectDeltas(fsys, clusterDir, nh)
	}
	return nh, nil
}

// collectDeltas removes the delta files head does not name and leftover
// temp files, best effort: only the controller writes the chain,
// so they are its to remove, and a reader that loses a delta it was about
// to read reads the head again and finds the newer base. A stale listing
// only delays a removal to the next compaction.
func collectDeltas(fsys volume.FS, clusterDir string, head *AssignmentHead) {
	dir := assignmentChainDir(clusterDir)
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return
	}
	keep := map[string]bool{}
	for _, v := range head.Deltas {
		keep[path.Base(deltaPath(clusterDir, v))] = true
	}
	for _, e := range ents {
		name := e.Name()
		if (strings.HasPrefix(name, deltaPrefix) && !keep[name]) || volume.IsTempName(name) {
			_ = fsys.Remove(path.Join(dir, name))
		}
	}
}
