package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The assignment's file formats (docs/volume.md "Cluster files").
//
// Format 2, what kaas writes, keeps each entry as [broker, leaderEpoch,
// since], the brokers' incarnations in one table (every entry of a broker
// names its incarnation at that version), and the coordinator shards in
// their own place. Format 1, the earlier one, spelled every entry as an
// object with the incarnation and kept the shards under the pseudo-topic
// "__groups"; it is read once on upgrade, and written only while a broker
// of an older kaas is live (Assignment.Legacy), since that is all it reads.

// AssignmentFormat is the format kaas writes.
const AssignmentFormat = 2

// CoordinatorsID is the topic ID under which the coordinator shards are
// looked up (Owner), and under which format 1 kept them.
const CoordinatorsID = "__groups"

// AssignmentVersion identifies one write of the assignment. A controller
// writes each change one version above the last, continuing from the
// highest version it read when it took over; of two writes of one
// version, the one of the higher controller epoch is the newer.
type AssignmentVersion struct {
	ControllerEpoch int32 `json:"controllerEpoch"`
	Version         int64 `json:"version"`
}

// Before reports whether v is older than o.
func (v AssignmentVersion) Before(o AssignmentVersion) bool {
	if v.ControllerEpoch != o.ControllerEpoch {
		return v.ControllerEpoch < o.ControllerEpoch
	}
	return v.Version < o.Version
}

func (v AssignmentVersion) String() string {
	return strconv.FormatInt(v.Version, 10) + "@c" + strconv.Itoa(int(v.ControllerEpoch))
}

// ID is the version a holds.
func (a *Assignment) ID() AssignmentVersion {
	return AssignmentVersion{ControllerEpoch: a.ControllerEpoch, Version: a.Version}
}

// ownerEntry is a PartitionOwner in format 2: [broker, leaderEpoch, since].
type ownerEntry struct {
	Broker, LeaderEpoch int32
	Since               int64
}

func (o ownerEntry) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 24)
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(o.Broker), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(o.LeaderEpoch), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, o.Since, 10)
	return append(b, ']'), nil
}

func (o *ownerEntry) UnmarshalJSON(b []byte) error {
	var v [3]int64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("assignment entry %s: %w", b, err)
	}
	o.Broker, o.LeaderEpoch, o.Since = int32(v[0]), int32(v[1]), v[2]
	return nil
}

// indexedEntry is a changed entry of a delta: [index, broker, leaderEpoch, since].
type indexedEntry struct {
	Index int32
	ownerEntry
}

func (e indexedEntry) MarshalJSON() ([]byte, error) {
	inner, _ := e.ownerEntry.MarshalJSON()
	b := make([]byte, 0, len(inner)+12)
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(e.Index), 10)
	b = append(b, ',')
	return append(b, inner[1:]...), nil
}

func (e *indexedEntry) UnmarshalJSON(b []byte) error {
	var v [4]int64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("assignment delta entry %s: %w", b, err)
	}
	e.Index, e.Broker, e.LeaderEpoch, e.Since = int32(v[0]), int32(v[1]), int32(v[2]), v[3]
	return nil
}

// assignmentV2 is format 2 on the volume. The version fields come first,
// so a reader of the file's first bytes learns which write it holds
// (ReadAssignmentID).
type assignmentV2 struct {
	Format          int                     `json:"format"`
	ControllerEpoch int32                   `json:"controllerEpoch"`
	Version         int64                   `json:"version"`
	MaxLeaderEpoch  int32                   `json:"maxLeaderEpoch,omitempty"`
	Brokers         map[int32]string        `json:"brokers,omitempty"`
	Topics          map[string][]ownerEntry `json:"topics"`
	Coordinators    []ownerEntry            `json:"coordinators,omitempty"`
}

// ownerV1 is a PartitionOwner in format 1.
type ownerV1 struct {
	Broker      int32  `json:"broker"`
	LeaderEpoch int32  `json:"leaderEpoch"`
	Incarnation string `json:"incarnation,omitempty"`
}

// assignmentV1 is format 1 on the volume.
type assignmentV1 struct {
	ControllerEpoch int32                `json:"controllerEpoch"`
	Version         int64                `json:"version,omitempty"`
	Topics          map[string][]ownerV1 `json:"topics"`
	MaxLeaderEpoch  int32                `json:"maxLeaderEpoch,omitempty"`
}

// errTwoIncarnations is an assignment naming one broker in two
// incarnations: NextAssignment never makes one.
var errTwoIncarnations = errors.New("assignment names a broker in two incarnations")

// incarnations collects the brokers' incarnations into table.
func incarnations(table map[int32]string, ps []PartitionOwner) error {
	for _, o := range ps {
		if o.Incarnation == "" {
			continue
		}
		if cur, ok := table[o.Broker]; ok && cur != o.Incarnation {
			return fmt.Errorf("%w: broker %d as %s and %s", errTwoIncarnations, o.Broker, cur, o.Incarnation)
		}
		table[o.Broker] = o.Incarnation
	}
	return nil
}

func entries(ps []PartitionOwner) []ownerEntry {
	out := make([]ownerEntry, len(ps))
	for i, o := range ps {
		out[i] = ownerEntry{Broker: o.Broker, LeaderEpoch: o.LeaderEpoch, Since: o.Since}
	}
	return out
}

func owners(es []ownerEntry, table map[int32]string) []PartitionOwner {
	out := make([]PartitionOwner, len(es))
	for i, e := range es {
		out[i] = PartitionOwner{Broker: e.Broker, LeaderEpoch: e.LeaderEpoch, Incarnation: table[e.Broker], Since: e.Since}
	}
	return out
}

// MarshalJSON writes a in format 2, or format 1 when a.Legacy.
func (a Assignment) MarshalJSON() ([]byte, error) {
	if a.Legacy {
		f := assignmentV1{ControllerEpoch: a.ControllerEpoch, Version: a.Version, MaxLeaderEpoch: a.MaxLeaderEpoch,
			Topics: make(map[string][]ownerV1, len(a.Topics)+1)}
		add := func(id string, ps []PartitionOwner) {
			out := make([]ownerV1, len(ps))
			for i, o := range ps {
				out[i] = ownerV1{Broker: o.Broker, LeaderEpoch: o.LeaderEpoch, Incarnation: o.Incarnation}
			}
			f.Topics[id] = out
		}
		for id, ps := range a.Topics {
			add(id, ps)
		}
		if a.Coordinators != nil {
			add(CoordinatorsID, a.Coordinators)
		}
		return json.Marshal(f)
	}
	f := assignmentV2{Format: AssignmentFormat, ControllerEpoch: a.ControllerEpoch, Version: a.Version,
		MaxLeaderEpoch: a.MaxLeaderEpoch, Brokers: map[int32]string{},
		Topics: make(map[string][]ownerEntry, len(a.Topics)), Coordinators: entries(a.Coordinators)}
	for id, ps := range a.Topics {
		if err := incarnations(f.Brokers, ps); err != nil {
			return nil, fmt.Errorf("topic %s: %w", id, err)
		}
		f.Topics[id] = entries(ps)
	}
	if err := incarnations(f.Brokers, a.Coordinators); err != nil {
		return nil, fmt.Errorf("coordinator shards: %w", err)
	}
	return json.Marshal(f)
}

// UnmarshalJSON reads either format.
func (a *Assignment) UnmarshalJSON(b []byte) error {
	var probe struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	switch probe.Format {
	case 0, 1:
		var f assignmentV1
		if err := json.Unmarshal(b, &f); err != nil {
			return err
		}
		*a = Assignment{ControllerEpoch: f.ControllerEpoch, Version: f.Version, MaxLeaderEpoch: f.MaxLeaderEpoch}
		if f.Topics != nil {
			a.Topics = make(map[string][]PartitionOwner, len(f.Topics))
		}
		for id, ps := range f.Topics {
			out := make([]PartitionOwner, len(ps))
			for i, o := range ps {
				out[i] = PartitionOwner{Broker: o.Broker, LeaderEpoch: o.LeaderEpoch, Incarnation: o.Incarnation}
			}
			if id == CoordinatorsID {
				a.Coordinators = out
				continue
			}
			a.Topics[id] = out
		}
		return nil
	case AssignmentFormat:
		var f assignmentV2
		if err := json.Unmarshal(b, &f); err != nil {
			return err
		}
		*a = Assignment{ControllerEpoch: f.ControllerEpoch, Version: f.Version, MaxLeaderEpoch: f.MaxLeaderEpoch,
			Coordinators: nil}
		if f.Topics != nil {
			a.Topics = make(map[string][]PartitionOwner, len(f.Topics))
		}
		for id, es := range f.Topics {
			a.Topics[id] = owners(es, f.Brokers)
		}
		if f.Coordinators != nil {
			a.Coordinators = owners(f.Coordinators, f.Brokers)
		}
		return nil
	default:
		return fmt.Errorf("assignment format %d: this kaas reads formats up to %d", probe.Format, AssignmentFormat)
	}
}

// parseAssignmentID reads the version an assignment file holds from its
// first bytes (the version fields come before the topics in either
// format). ok is false when they are not all there.
func parseAssignmentID(prefix []byte) (id AssignmentVersion, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return id, false
	}
	var haveEpoch, haveVersion bool
	for !haveEpoch || !haveVersion {
		t, err := dec.Token()
		if err != nil {
			return id, false
		}
		key, isKey := t.(string)
		if !isKey {
			return id, false
		}
		switch key {
		case "controllerEpoch":
			haveEpoch = dec.Decode(&id.ControllerEpoch) == nil
		case "version":
			haveVersion = dec.Decode(&id.Version) == nil
		case "topics":
			// Format 1 without a version (written before kaas kept one):
			// version 0.
			return id, haveEpoch
		default:
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return id, false
			}
		}
	}
	return id, true
}

// readPrefix reads up to n bytes of r.
func readPrefix(r io.Reader, n int) ([]byte, error) {
	b := make([]byte, n)
	got, err := io.ReadFull(r, b)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil
	}
	return b[:got], err
}
