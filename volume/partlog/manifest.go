package partlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
)

// manifest is the JSON document in manifestName(WriterEpoch). The writer of
// that epoch replaces it atomically (volume.WriteFileAtomic) at Open, at
// every roll, at every checkpoint round of Sync and at Close; no other
// writer touches it. Recovery uses the one with the highest writer epoch.
type manifest struct {
	Version int `json:"version"`
	// WriterEpoch is the epoch of the writer that wrote this manifest.
	WriterEpoch    int32             `json:"writerEpoch"`
	LogStartOffset int64             `json:"logStartOffset"`
	Epochs         []EpochEntry      `json:"epochs"`
	Segments       []manifestSegment `json:"segments"`
	// Checkpoint is a durable point in the last segment: recovery trusts
	// everything before it and scans only after it.
	Checkpoint checkpoint `json:"checkpoint"`
	// CleanerOffset is the log cleaner's first dirty offset (Kafka's
	// cleaner-offset checkpoint), written with the swap that made the
	// offsets below it clean, so the two never disagree. Readers clamp it
	// to the log's range.
	CleanerOffset int64 `json:"cleanerOffset,omitempty"`
}

// manifestSegment describes one segment. Sealed segments are trusted as
// described and never scanned; only the last segment may be unsealed.
type manifestSegment struct {
	Base  int64 `json:"base"`
	Epoch int32 `json:"epoch"`
	// Gen is a cleaned segment's generation (its name's .c<gen>), 0 for a
	// plain segment. A cleaned segment is sealed; its EndOffset is the
	// next segment's base, which its last batch may end before.
	Gen    int64 `json:"gen,omitempty"`
	Sealed bool  `json:"sealed,omitempty"`
	// EndOffset and Size are the sealed end: the offset after the last batch
	// and the byte size. Bytes beyond Size (a fenced writer's late appends)
	// are never read.
	EndOffset int64 `json:"endOffset,omitempty"`
	Size      int64 `json:"size,omitempty"`
	// MaxTimestamp is the largest batch max timestamp in the sealed segment
	// (-1 when unknown) and MaxTimestampOffset the last offset of that batch.
	MaxTimestamp       int64 `json:"maxTimestamp,omitempty"`
	MaxTimestampOffset int64 `json:"maxTimestampOffset,omitempty"`
	// MaxTimestampUnknown marks a segment adopted without a manifest whose
	// time index did not tell its max timestamp.
	MaxTimestampUnknown bool `json:"maxTimestampUnknown,omitempty"`
}

// id identifies the segment's files.
func (s manifestSegment) id() segID { return segID{base: s.Base, epoch: s.Epoch, gen: s.Gen} }

// version is the format version m is written with: version 1 unless it
// names a cleaned segment, so that a log never cleaned keeps the manifest
// every kaas reads, byte for byte.
func (m *manifest) version() int {
	for _, s := range m.Segments {
		if s.Gen != 0 {
			return manifestVersionCleaned
		}
	}
	return manifestVersion
}

// checkpoint is the durable state of the last segment as of a sync round.
type checkpoint struct {
	SegmentBase  int64 `json:"segmentBase"`
	SegmentEpoch int32 `json:"segmentEpoch"`
	// Position is a batch boundary at or before the durable end.
	Position   int64 `json:"position"`
	NextOffset int64 `json:"nextOffset"`
	// IndexEntries and TimeIndexEntries count the durable, valid entries of
	// the segment's index files; entries beyond them are rebuilt.
	IndexEntries     int64 `json:"indexEntries"`
	TimeIndexEntries int64 `json:"timeIndexEntries"`
	// MaxTimestamp (-1 when none) is the running max over the segment up to
	// Position, attained by the batch [MaxTimestampBase, MaxTimestampLast].
	MaxTimestamp     int64 `json:"maxTimestamp"`
	MaxTimestampBase int64 `json:"maxTimestampBase"`
	MaxTimestampLast int64 `json:"maxTimestampLast"`
	// FirstAppendUnixMilli is when the segment got its first append (by the
	// writer's clock), for age-based rolling; 0 if unknown or empty.
	FirstAppendUnixMilli int64 `json:"firstAppendUnixMilli,omitempty"`
}

// after reports whether c is a later durable point than o: later segment, or
// the same segment further along.
func (c checkpoint) after(o checkpoint) bool {
	if c.SegmentBase != o.SegmentBase || c.SegmentEpoch != o.SegmentEpoch {
		return c.SegmentBase > o.SegmentBase || (c.SegmentBase == o.SegmentBase && c.SegmentEpoch > o.SegmentEpoch)
	}
	return c.Position > o.Position
}

// manifestFile is one manifest found in a partition directory.
type manifestFile struct {
	name   string // base name
	epoch  int32  // writer epoch: from the name, or from the contents for the legacy name
	legacy bool
	m      *manifest // decoded, once read
}

// manifestSet is what loadManifests found in a partition directory.
type manifestSet struct {
	// m is the manifest recovery uses: of those that decode, the one with
	// the highest writer epoch (nil if none).
	m *manifest
	// name is m's base name.
	name string
	// names are the base names of every manifest file found, m's included,
	// decodable or not: the ones a new writer removes once its own is durable.
	names []string
	// maxEpoch is the highest writer epoch named by any manifest file found
	// (-1 if none): an undecodable one still tells that its epoch wrote.
	// It is set even when loadManifests fails.
	maxEpoch int32
}

// loadManifests finds the partition's manifests and decodes the one with the
// highest writer epoch. Candidates are the manifest names in entries (a
// listing of dir), the legacy manifest.json, and the manifests of the probe
// epochs, opened directly whether listed or not: a listing may be stale on a
// shared filesystem, open is not (the caller passes the epoch it found in the
// fence, whose writer is the likeliest to have written the newest manifest).
//
// A manifest that does not decode is skipped in favour of the next older one
// (recovery then adopts the newer epochs' segment files from the listing, see
// Log.newerSegments); if none decodes, the error wraps ErrCorruptLog. A file
// that vanishes between listing and open was removed by a newer writer and
// is skipped. Other read errors are returned: an unreadable manifest is never
// taken as absent.
func loadManifests(fsys volume.FS, dir string, entries []fs.DirEntry, log logr.Logger, probe ...int32) (manifestSet, error) {
	set := manifestSet{maxEpoch: -1}
	var files []*manifestFile
	seen := map[string]bool{}
	add := func(f *manifestFile) {
		if !seen[f.name] {
			seen[f.name] = true
			files = append(files, f)
		}
	}
	for _, e := range entries {
		if epoch, ok := parseManifestName(e.Name()); ok {
			add(&manifestFile{name: e.Name(), epoch: epoch})
			set.maxEpoch = max(set.maxEpoch, epoch)
		}
	}
	for _, epoch := range probe {
		if epoch >= 0 {
			add(&manifestFile{name: manifestName(epoch), epoch: epoch})
		}
	}
	// The legacy manifest's epoch is in its contents: read it first.
	legacy := &manifestFile{name: legacyManifestName, epoch: -1, legacy: true}
	var corrupt error
	m, err := readManifestFile(fsys, path.Join(dir, legacy.name), -1)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		legacy = nil
	case errors.Is(err, ErrCorruptLog):
		log.Info("skipping a legacy manifest that does not decode", "file", legacyManifestName, "err", err.Error())
		corrupt = err
		set.names = append(set.names, legacy.name)
		legacy = nil
	case err != nil:
		return set, err
	default:
		legacy.epoch, legacy.m = m.WriterEpoch, m
		add(legacy)
	}

	// Highest epoch first; at one epoch the epoch-named file (written by a
	// newer binary, so later) before the legacy one.
	sort.SliceStable(files, func(i, j int) bool {
		if files[i].epoch != files[j].epoch {
			return files[i].epoch > files[j].epoch
		}
		return !files[i].legacy && files[j].legacy
	})
	for _, f := range files {
		if f.m == nil {
			m, err := readManifestFile(fsys, path.Join(dir, f.name), f.epoch)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				continue // never written (a probe) or removed by a newer writer
			case errors.Is(err, ErrCorruptLog):
				log.Info("skipping a manifest that does not decode; an older one and the newer segment files are used instead", "file", f.name, "err", err.Error())
				set.names = append(set.names, f.name)
				set.maxEpoch = max(set.maxEpoch, f.epoch)
				if corrupt == nil {
					corrupt = err
				}
				continue
			case err != nil:
				return set, err
			}
			f.m = m
		}
		set.names = append(set.names, f.name)
		set.maxEpoch = max(set.maxEpoch, f.epoch)
		if set.m == nil {
			set.m, set.name = f.m, f.name
		}
	}
	if set.m == nil && corrupt != nil {
		return set, corrupt
	}
	return set, nil
}

// readManifest returns the manifest recovery would use in dir (see
// loadManifests), or nil when there is none. It writes nothing.
func readManifest(fsys volume.FS, dir string, probe ...int32) (*manifest, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	set, err := loadManifests(fsys, dir, entries, logr.Discard(), probe...)
	return set.m, err
}

// readManifestFile reads and decodes one manifest file. A missing file gives
// an error wrapping fs.ErrNotExist. When epoch >= 0 the manifest must have
// been written by that epoch (the epoch in its name).
func readManifestFile(fsys volume.FS, name string, epoch int32) (*manifest, error) {
	data, err := volume.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: decode %s: %v", ErrCorruptLog, name, err)
	}
	if m.Version != manifestVersion && m.Version != manifestVersionCleaned {
		return nil, fmt.Errorf("%w: %s has version %d, want %d or %d", ErrCorruptLog, name, m.Version, manifestVersion, manifestVersionCleaned)
	}
	if epoch >= 0 && m.WriterEpoch != epoch {
		return nil, fmt.Errorf("%w: %s was written by epoch %d", ErrCorruptLog, name, m.WriterEpoch)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorruptLog, name, err)
	}
	return &m, nil
}

// check verifies the manifest's internal consistency.
func (m *manifest) check() error {
	if m.Version < m.version() {
		return fmt.Errorf("version %d names cleaned segments", m.Version)
	}
	for i, s := range m.Segments {
		last := i == len(m.Segments)-1
		stem := s.id().stem()
		if !s.Sealed && !last {
			return fmt.Errorf("segment %s is not last but not sealed", stem)
		}
		if s.Gen < 0 || (s.Gen > 0 && !s.Sealed) {
			return fmt.Errorf("segment %s: generation %d, sealed %v", stem, s.Gen, s.Sealed)
		}
		if i > 0 {
			prev := m.Segments[i-1]
			if prev.EndOffset != s.Base {
				return fmt.Errorf("segment %s starts at %d, previous ends at %d", stem, s.Base, prev.EndOffset)
			}
		}
		if s.Sealed && (s.EndOffset < s.Base || s.Size < 0) {
			return fmt.Errorf("segment %s has sealed end %d/%d bytes", stem, s.EndOffset, s.Size)
		}
	}
	for i := 1; i < len(m.Epochs); i++ {
		if m.Epochs[i].Epoch <= m.Epochs[i-1].Epoch || m.Epochs[i].StartOffset < m.Epochs[i-1].StartOffset {
			return fmt.Errorf("epoch history not increasing at entry %d", i)
		}
	}
	return nil
}

// writeManifest encodes m, with the version its segments need, and
// replaces the manifest of m.WriterEpoch atomically. Only the writer of that
// epoch calls it: a fenced writer's late write replaces its own, superseded
// manifest, never a newer writer's.
func writeManifest(fsys volume.FS, dir string, m *manifest) error {
	m.Version = m.version()
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	data = append(data, '\n')
	if err := volume.WriteFileAtomic(fsys, path.Join(dir, manifestName(m.WriterEpoch)), data); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// readFence opens and reads dir's fence file (Open + read, never Stat: on a
// shared filesystem only open guarantees fresh contents). It returns -1 when
// there is no fence.
func readFence(fsys volume.FS, dir string) (int32, error) {
	name := path.Join(dir, fenceName)
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("open fence: %w", err)
	}
	var buf [32]byte
	n, rerr := io.ReadFull(f, buf[:])
	cerr := f.Close()
	if rerr != nil && !errors.Is(rerr, io.ErrUnexpectedEOF) && !errors.Is(rerr, io.EOF) {
		return 0, fmt.Errorf("read fence %s: %w", name, rerr)
	}
	if cerr != nil {
		return 0, fmt.Errorf("close fence %s: %w", name, cerr)
	}
	epoch, err := strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 32)
	if err != nil || epoch < 0 {
		// Written atomically, so unparseable means damaged: refuse rather
		// than guess who owns the partition.
		return 0, fmt.Errorf("%w: fence %s holds %q", ErrCorruptLog, name, buf[:n])
	}
	return int32(epoch), nil
}

// writeFence replaces dir's fence with epoch atomically, and durably if
// syncDir (otherwise the caller fsyncs dir before it relies on the fence).
func writeFence(fsys volume.FS, dir string, epoch int32, syncDir bool) error {
	data := strconv.AppendInt(nil, int64(epoch), 10)
	data = append(data, '\n')
	name := path.Join(dir, fenceName)
	write := volume.WriteFileAtomic
	if !syncDir {
		write = volume.WriteFileRenamed
	}
	if err := write(fsys, name, data); err != nil {
		return fmt.Errorf("write fence: %w", err)
	}
	return nil
}
