package states

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

// Record is the persisted progress of one machine for one object. It is also
// the reconcile status that kaasctl prints, read straight from the volume.
type Record struct {
	Kind      string    `json:"kind"`
	Object    string    `json:"object"`
	Desired   State     `json:"desired"`
	State     State     `json:"state"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"lastError"`
	Since     time.Time `json:"since"`
	Owner     string    `json:"owner"`
	// TopicID names the incarnation the record belongs to.
	TopicID string `json:"topicID,omitempty"`
	// Epoch is the leader epoch a partition was fenced and opened with.
	Epoch int32 `json:"epoch,omitempty"`
	// FencedFrom is the epoch the partition's fence held before this
	// opener claimed it (-1: no fence, a new partition), kept so that
	// recovery reads that writer's manifest even when a stale listing
	// hides it.
	FencedFrom *int32 `json:"fencedFrom,omitempty"`
	// Compact is a segment-compact pass's progress.
	Compact *CompactProgress `json:"compact,omitempty"`
}

// StatusDir is where records live under the cluster directory.
const StatusDir = "status"

// RecordPath is the file of one record: status/<kind>/<escaped object>.json.
// An object too long for that to fit NAME_MAX (a partition of a topic of
// 243 to 249 characters) is shortened by volume.FitName:
// <escaped object cut short>~<hash of it>.json. The record holds its
// object, so LoadAll reads it from there, and Load checks it.
func RecordPath(clusterDir, kind, object string) string {
	return path.Join(clusterDir, StatusDir, kind, volume.FitName(url.PathEscape(object), ".json"))
}

// Save writes rec atomically, after making its kind's directory exist
// durably (EnsureStatusDir).
func Save(fsys volume.FS, clusterDir string, rec *Record) error {
	if err := EnsureStatusDir(fsys, clusterDir, rec.Kind); err != nil {
		return err
	}
	return SaveInStatusDir(fsys, clusterDir, rec)
}

// EnsureStatusDir creates the directory of kind's records and makes its
// entry durable up the tree: without that, the first record of a kind (and
// every one after it) could vanish in a crash.
func EnsureStatusDir(fsys volume.FS, clusterDir, kind string) error {
	if err := volume.MkdirAllSync(fsys, path.Dir(RecordPath(clusterDir, kind, "x"))); err != nil {
		return fmt.Errorf("status dir for %s: %w", kind, err)
	}
	return nil
}

// SaveInStatusDir writes rec atomically into its kind's directory, which
// the caller has made durable with EnsureStatusDir (once per process is
// enough: it saves the directory syncs on every later record).
func SaveInStatusDir(fsys volume.FS, clusterDir string, rec *Record) error {
	return SaveInStatusDirVia(fsys, fsys, clusterDir, rec)
}

// SaveInStatusDirVia is SaveInStatusDir with the directory fsync after
// the rename through ds: a DirSyncer shares one between the records of a
// kind saved at once (thousands of partitions opened side by side).
//
// The record of a machine that saves only at its stops (SaveAtStops) is
// status, not progress: it is replaced without any fsync (a partition's
// open then costs one file fsync less, and shares no directory fsync with
// thousands of others), and a crash may lose it or leave it empty, which
// Load reads as no record.
func SaveInStatusDirVia(fsys volume.FS, ds volume.DirSync, clusterDir string, rec *Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode record %s %s: %w", rec.Kind, rec.Object, err)
	}
	p := RecordPath(clusterDir, rec.Kind, rec.Object)
	if statusOnly(rec.Kind) {
		return volume.WriteFileReplaced(fsys, p, b)
	}
	if err := volume.WriteFileRenamed(fsys, p, b); err != nil {
		return err
	}
	if err := ds.SyncDir(path.Dir(p)); err != nil {
		return fmt.Errorf("save record %s %s: sync dir: %w", rec.Kind, rec.Object, err)
	}
	return nil
}

// statusOnly reports whether kind's machine saves its record only at its
// stops (Definition.SaveAtStops).
func statusOnly(kind string) bool {
	for _, d := range Machines {
		if d.Kind == kind {
			return d.SaveAtStops
		}
	}
	return false
}

// Load reads one record; a missing record is (nil, nil), and so is a
// status-only record (statusOnly) that a crash left empty or partial.
func Load(fsys volume.FS, clusterDir, kind, object string) (*Record, error) {
	rec, err := readRecord(fsys, RecordPath(clusterDir, kind, object), statusOnly(kind))
	if err != nil {
		return nil, fmt.Errorf("record %s %s: %w", kind, object, err)
	}
	if rec == nil {
		return nil, nil
	}
	if rec.Object != "" && rec.Object != object {
		// A file name is not an identity: never hand out another
		// object's record.
		return nil, fmt.Errorf("record %s %s: the file holds the record of %q", kind, object, rec.Object)
	}
	return rec, nil
}

// readRecord reads the record file p; a missing one is (nil, nil), and so
// is one that does not decode when tolerant (a status-only record written
// without fsync).
func readRecord(fsys volume.FS, p string, tolerant bool) (*Record, error) {
	b, err := volume.ReadFile(fsys, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		if tolerant {
			return nil, nil
		}
		return nil, fmt.Errorf("decode %s: %w", p, err)
	}
	return &rec, nil
}

// Forget removes a record; a missing record is success.
func Forget(fsys volume.FS, clusterDir, kind, object string) error {
	p := RecordPath(clusterDir, kind, object)
	err := fsys.Remove(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("forget record %s %s: %w", kind, object, err)
	}
	// Make the removal durable (also when an earlier attempt removed it but
	// crashed before syncing), or the record comes back after a crash.
	if err := fsys.SyncDir(path.Dir(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("forget record %s %s: sync: %w", kind, object, err)
	}
	return nil
}

// LoadAll reads every record, sorted by kind then object. Temp files left by
// an interrupted atomic write are skipped.
func LoadAll(fsys volume.FS, clusterDir string) ([]Record, error) {
	root := path.Join(clusterDir, StatusDir)
	kinds, err := fsys.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list status: %w", err)
	}
	var out []Record
	for _, k := range kinds {
		if !k.IsDir() {
			continue
		}
		recs, err := LoadKind(fsys, clusterDir, k.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Object < out[j].Object
	})
	return out, nil
}

// LoadKind reads every record of one kind, sorted by object. The object
// comes from the record itself (a shortened file name does not name it);
// a record written without one (none is) falls back to the file name.
func LoadKind(fsys volume.FS, clusterDir, kind string) ([]Record, error) {
	dir := path.Join(clusterDir, StatusDir, kind)
	files, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list status %s: %w", kind, err)
	}
	var out []Record
	tolerant := statusOnly(kind)
	for _, f := range files {
		name := f.Name()
		if volume.IsTempName(name) || path.Ext(name) != ".json" {
			continue
		}
		rec, err := readRecord(fsys, path.Join(dir, name), tolerant)
		if err != nil {
			return nil, fmt.Errorf("record %s %s: %w", kind, name, err)
		}
		if rec == nil {
			continue // removed since the listing, or left empty by a crash
		}
		if rec.Object == "" {
			object, err := url.PathUnescape(strings.TrimSuffix(name, ".json"))
			if err != nil {
				continue
			}
			rec.Object = object
		}
		if rec.Kind == "" {
			rec.Kind = kind
		}
		out = append(out, *rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Object < out[j].Object })
	return out, nil
}

// NewRecord is a new record of machine d for object at its initial state,
// desiring its end state, owned by owner since now. topicID names the
// incarnation the record belongs to ("" for objects that have none, such as
// coordinator shards).
func (d Definition) NewRecord(object, topicID, owner string, now time.Time) *Record {
	return &Record{Kind: d.Kind, Object: object, Desired: d.End, State: d.Initial,
		TopicID: topicID, Since: now.UTC(), Owner: owner}
}
