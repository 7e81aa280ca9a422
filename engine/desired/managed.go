package desired

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"

	"github.com/google/uuid"

	"github.com/kaas-dev/kaas/volume"
)

// Topics declared outside Kafka (Topic resources on Kubernetes) are driven
// through these functions. They write the same desired-state files the
// Kafka admin APIs write, with the same validation, and need no running
// broker: the brokers' reconcilers pick the change up from the volume.

// ErrTopicManaged: the topic is declared by a resource outside Kafka (its
// spec has ManagedBy set), so the Kafka admin APIs do not change or delete
// it; the resource is where it changes. Another resource naming the same
// topic gets it too.
var ErrTopicManaged = errors.New("topic is managed outside Kafka")

// ErrTopicUnmanaged: EnsureTopic found a topic created through the Kafka
// API (no ManagedBy) and was not asked to adopt it.
var ErrTopicUnmanaged = errors.New("topic was created through the Kafka API")

// ManagedTopic is what a declaration asks for.
type ManagedTopic struct {
	Name       string
	Partitions int32
	Configs    map[string]string
	// ManagedBy names the declaration and its incarnation, e.g.
	// "kubernetes/<namespace>/<name>/<uid>". A spec managed by another
	// value is never changed here.
	ManagedBy string
	// Adopt takes over a topic created through the Kafka API (one with no
	// ManagedBy) instead of failing with ErrTopicUnmanaged.
	Adopt bool
}

// EnsureTopic makes the desired state of want.Name say what want says:
// absent, it is created with a new topic ID; present and managed by
// want.ManagedBy, its partitions are raised and its configs replaced
// (generation bumped) where they differ. It returns the spec as written or
// found, with these errors: ErrInvalidTopic, ErrInvalidPartitions (also
// for a decrease, which Kafka cannot do), ErrInvalidConfig,
// ErrTopicDeleting (the name's previous incarnation is still being
// deleted; retry), ErrTopicManaged (another declaration has it; the spec
// found is returned) and ErrTopicUnmanaged.
//
// Writes race with a broker's admin writes as those race each other
// (last writer wins), except that a managed spec is refused by the admin
// APIs, so only the declaration changes it.
func EnsureTopic(fsys volume.FS, clusterDir string, want ManagedTopic) (TopicSpec, error) {
	if want.ManagedBy == "" {
		return TopicSpec{}, errors.New("EnsureTopic needs ManagedBy")
	}
	if err := ValidateTopic(want.Name, want.Partitions, want.Configs); err != nil {
		return TopicSpec{}, err
	}
	configs := maps.Clone(want.Configs)
	if len(configs) == 0 {
		configs = nil
	}
	cur, err := ReadTopicSpec(fsys, clusterDir, want.Name)
	if errors.Is(err, fs.ErrNotExist) {
		spec := TopicSpec{Name: want.Name, ID: uuid.NewString(), Partitions: want.Partitions,
			Configs: configs, Generation: 1, ManagedBy: want.ManagedBy}
		err = CreateTopicSpec(fsys, clusterDir, spec)
		if errors.Is(err, fs.ErrNotExist) {
			err = createTopicsDir(fsys, clusterDir, err)
			if err == nil {
				err = CreateTopicSpec(fsys, clusterDir, spec)
			}
		}
		if err == nil {
			return spec, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return TopicSpec{}, err
		}
		// Created meanwhile (through Kafka, or by a second operator):
		// judge the winner like any existing spec.
		cur, err = ReadTopicSpec(fsys, clusterDir, want.Name)
	}
	if err != nil {
		return TopicSpec{}, err
	}
	switch {
	case cur.Deleted:
		return cur, fmt.Errorf("%w: %s (topic ID %s)", ErrTopicDeleting, cur.Name, cur.ID)
	case cur.ManagedBy == "" && !want.Adopt:
		return cur, fmt.Errorf("%w: %s exists (topic ID %s)", ErrTopicUnmanaged, cur.Name, cur.ID)
	case cur.ManagedBy != "" && cur.ManagedBy != want.ManagedBy:
		return cur, fmt.Errorf("%w: %s is declared by %s", ErrTopicManaged, cur.Name, cur.ManagedBy)
	case want.Partitions < cur.Partitions:
		return cur, fmt.Errorf("%w: topic %s has %d partitions; partitions can be added, not removed (asked for %d)",
			ErrInvalidPartitions, cur.Name, cur.Partitions, want.Partitions)
	}
	if cur.ManagedBy == want.ManagedBy && cur.Partitions == want.Partitions && maps.Equal(cur.Configs, configs) {
		return cur, nil
	}
	next := cur
	next.ManagedBy = want.ManagedBy
	next.Partitions = want.Partitions
	next.Configs = configs
	next.Generation = cur.Generation + 1
	if err := WriteTopicSpec(fsys, clusterDir, next); err != nil {
		return cur, err
	}
	return next, nil
}

// createTopicsDir makes the desired-state directory of a cluster directory
// no broker has started on yet (brokers make it at start), so that a
// declaration needs no running broker. A missing cluster directory is not
// made: that is a volume not mounted, and createErr is returned.
func createTopicsDir(fsys volume.FS, clusterDir string, createErr error) error {
	if _, err := fsys.Stat(clusterDir); err != nil {
		return createErr
	}
	if err := volume.MkdirAllSync(fsys, path.Join(clusterDir, SpecsDir)); err != nil {
		return fmt.Errorf("prepare desired topics: %w", err)
	}
	return nil
}

// DeleteManagedTopic asks for the incarnation id of topic name to be
// deleted (the topic-delete machine runs on a broker) and reports whether
// it is gone: its desired state no longer names id, which the machine's
// last step does after the data is purged. A spec managed by someone else
// than managedBy is not touched (ErrTopicManaged).
func DeleteManagedTopic(fsys volume.FS, clusterDir, name, id, managedBy string) (gone bool, err error) {
	cur, err := ReadTopicSpec(fsys, clusterDir, name)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if cur.ID != id {
		return true, nil
	}
	if cur.ManagedBy != managedBy {
		return false, fmt.Errorf("%w: %s is declared by %s", ErrTopicManaged, name, cur.ManagedBy)
	}
	if cur.Deleted {
		return false, nil
	}
	cur.Deleted = true
	cur.Generation++
	if err := WriteTopicSpec(fsys, clusterDir, cur); err != nil {
		return false, err
	}
	return false, nil
}
