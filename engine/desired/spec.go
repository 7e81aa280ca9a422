package desired

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/kaas-dev/kaas/volume"
)

// TopicSpec is the desired state of one topic: one small file per topic under
// <cluster>/topics/, written atomically by the Kafka admin APIs (and later by
// the Kubernetes operator). Only the reconciler turns it into directories.
type TopicSpec struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"` // UUID; a new one for every incarnation
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	// Deleted asks for the topic-delete machine to run for this ID.
	Deleted bool `json:"deleted,omitempty"`
	// Generation grows with every change to the spec.
	Generation int64 `json:"generation"`
	// ManagedBy names the declaration outside Kafka that owns this topic
	// (a Kubernetes Topic resource: "kubernetes/<namespace>/<name>/<uid>");
	// empty for a topic created through the Kafka API. The Kafka admin
	// APIs do not change or delete a managed topic (ErrTopicManaged).
	ManagedBy string `json:"managedBy,omitempty"`
}

// SpecsDir is the directory under the cluster directory that holds one
// desired-state file per topic.
const SpecsDir = "topics"

// SpecPath is the desired-state file of the topic name.
func SpecPath(clusterDir, name string) string {
	return path.Join(clusterDir, SpecsDir, name+".json")
}

// WriteTopicSpec stores a spec atomically, then bumps the version.
func WriteTopicSpec(fsys volume.FS, clusterDir string, spec TopicSpec) error {
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode topic %s: %w", spec.Name, err)
	}
	if err := volume.WriteFileAtomic(fsys, SpecPath(clusterDir, spec.Name), b); err != nil {
		return fmt.Errorf("write desired topic %s: %w", spec.Name, err)
	}
	return BumpVersion(fsys, clusterDir)
}

// CreateTopicSpec stores the spec of a new topic by exclusive create: if
// the name already has a spec the error satisfies errors.Is(err,
// fs.ErrExist) (which is not proof the other spec is complete: re-read it).
func CreateTopicSpec(fsys volume.FS, clusterDir string, spec TopicSpec) error {
	if err := createSpec(fsys, fsys, clusterDir, spec); err != nil {
		return err
	}
	return BumpVersion(fsys, clusterDir)
}

// CreateTopicSpecs is CreateTopicSpec for many topics at once: the
// exclusive creates run side by side, sharing their directory's fsyncs,
// and the version is bumped once after all of them (so also when some
// failed). errs[i] is spec i's outcome; err is the bump's.
func CreateTopicSpecs(fsys volume.FS, clusterDir string, specs []TopicSpec) (errs []error, err error) {
	errs = make([]error, len(specs))
	ds := volume.NewDirSyncer(fsys)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, spec := range specs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = createSpec(fsys, ds, clusterDir, spec)
		}()
	}
	wg.Wait()
	return errs, BumpVersion(fsys, clusterDir)
}

func createSpec(fsys volume.FS, ds volume.DirSync, clusterDir string, spec TopicSpec) error {
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode topic %s: %w", spec.Name, err)
	}
	if err := volume.CreateExclusiveFileVia(fsys, ds, SpecPath(clusterDir, spec.Name), b); err != nil {
		return fmt.Errorf("create desired topic %s: %w", spec.Name, err)
	}
	return nil
}

// ReadTopicSpec reads one spec; absent is fs.ErrNotExist.
func ReadTopicSpec(fsys volume.FS, clusterDir, name string) (TopicSpec, error) {
	b, err := volume.ReadFile(fsys, SpecPath(clusterDir, name))
	if err != nil {
		return TopicSpec{}, err
	}
	var s TopicSpec
	if err := json.Unmarshal(b, &s); err != nil {
		return TopicSpec{}, fmt.Errorf("decode desired topic %s: %w: %w", name, ErrTornSpec, err)
	}
	return s, nil
}

// ErrTornSpec is a spec file that does not parse: the exclusive create of
// a topic whose creator crashed before its data was synced. It is no
// desired state: listings leave it out.
var ErrTornSpec = errors.New("torn desired-state file")

// RemoveTopicSpec removes a spec if it still names topicID.
func RemoveTopicSpec(fsys volume.FS, clusterDir, name, topicID string) error {
	s, err := ReadTopicSpec(fsys, clusterDir, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.ID != topicID {
		return nil // a new incarnation owns the name now
	}
	p := SpecPath(clusterDir, name)
	if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove desired topic %s: %w", name, err)
	}
	if err := fsys.SyncDir(path.Dir(p)); err != nil {
		return err
	}
	return BumpVersion(fsys, clusterDir)
}

// ListTopicSpecs reads every spec, sorted by name.
func ListTopicSpecs(fsys volume.FS, clusterDir string) ([]TopicSpec, error) {
	dir := path.Join(clusterDir, SpecsDir)
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list desired topics: %w", err)
	}
	var out []TopicSpec
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || volume.IsTempName(n) || !strings.HasSuffix(n, ".json") {
			continue
		}
		s, err := ReadTopicSpec(fsys, clusterDir, strings.TrimSuffix(n, ".json"))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrTornSpec) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// reservedTopics are Kafka's internal topics. Their state lives in the
// coordinator shards here, and WriteTxnMarkers names a shard as a
// partition of __consumer_offsets, so no data topic may take these names.
// (Clients such as sarama ask Metadata for them when a coordinator is not
// available; auto-creating them would make ordinary topics of them.)
var reservedTopics = map[string]bool{"__consumer_offsets": true, "__transaction_state": true}

// IsReservedTopic reports whether name belongs to Kafka's internal topics,
// which clients cannot create.
func IsReservedTopic(name string) bool { return reservedTopics[name] }

// ValidTopicName applies Kafka's rules: 1-249 characters of [a-zA-Z0-9._-],
// not "." or "..", and not one of Kafka's internal topics.
func ValidTopicName(name string) error {
	if name == "" {
		return errors.New("topic name is empty")
	}
	if len(name) > 249 {
		return fmt.Errorf("topic name is %d characters, the limit is 249", len(name))
	}
	if name == "." || name == ".." {
		return fmt.Errorf("topic name %q is not allowed", name)
	}
	if reservedTopics[name] {
		return fmt.Errorf("%s is Kafka's internal topic: kaas keeps that state in its coordinator shards, and the name stays reserved for them", name)
	}
	for _, c := range name {
		ok := c == '.' || c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !ok {
			return fmt.Errorf("topic name %q contains %q: only ASCII letters, digits, '.', '_' and '-' are allowed", name, c)
		}
	}
	return nil
}

// ValidateTopic checks what a new or declared topic asks for: its name,
// its partition count (1 to MaxPartitions) and its configs, with the
// errors the front end maps to Kafka codes.
func ValidateTopic(name string, partitions int32, configs map[string]string) error {
	if err := ValidTopicName(name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidTopic, err)
	}
	if partitions < 1 || partitions > MaxPartitions {
		return fmt.Errorf("%w: %d (must be between 1 and %d)", ErrInvalidPartitions, partitions, MaxPartitions)
	}
	if err := ValidateTopicConfigs(configs); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return nil
}
