package partlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/kaas-dev/kaas/volume"
)

// manifest is the JSON document in manifestName. It is replaced atomically
// (volume.WriteFileAtomic) by the writer at Open, at every roll, at every
// checkpoint round of Sync and at Close.
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
}

// manifestSegment describes one segment. Sealed segments are trusted as
// described and never scanned; only the last segment may be unsealed.
type manifestSegment struct {
	Base   int64 `json:"base"`
	Epoch  int32 `json:"epoch"`
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

// readManifest reads and decodes dir's manifest. It returns (nil, nil) when
// there is none.
func readManifest(fsys volume.FS, dir string) (*manifest, error) {
	name := path.Join(dir, manifestName)
	data, err := volume.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: decode %s: %v", ErrCorruptLog, name, err)
	}
	if m.Version != manifestVersion {
		return nil, fmt.Errorf("%w: %s has version %d, want %d", ErrCorruptLog, name, m.Version, manifestVersion)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorruptLog, name, err)
	}
	return &m, nil
}

// check verifies the manifest's internal consistency.
func (m *manifest) check() error {
	for i, s := range m.Segments {
		last := i == len(m.Segments)-1
		if !s.Sealed && !last {
			return fmt.Errorf("segment %s is not last but not sealed", segmentStem(s.Base, s.Epoch))
		}
		if i > 0 {
			prev := m.Segments[i-1]
			if prev.EndOffset != s.Base {
				return fmt.Errorf("segment %s starts at %d, previous ends at %d", segmentStem(s.Base, s.Epoch), s.Base, prev.EndOffset)
			}
		}
		if s.Sealed && (s.EndOffset < s.Base || s.Size < 0) {
			return fmt.Errorf("segment %s has sealed end %d/%d bytes", segmentStem(s.Base, s.Epoch), s.EndOffset, s.Size)
		}
	}
	for i := 1; i < len(m.Epochs); i++ {
		if m.Epochs[i].Epoch <= m.Epochs[i-1].Epoch || m.Epochs[i].StartOffset < m.Epochs[i-1].StartOffset {
			return fmt.Errorf("epoch history not increasing at entry %d", i)
		}
	}
	return nil
}

// writeManifest encodes m and replaces dir's manifest atomically.
func writeManifest(fsys volume.FS, dir string, m *manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	data = append(data, '\n')
	if err := volume.WriteFileAtomic(fsys, path.Join(dir, manifestName), data); err != nil {
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

// writeFence replaces dir's fence with epoch, atomically and durably.
func writeFence(fsys volume.FS, dir string, epoch int32) error {
	data := strconv.AppendInt(nil, int64(epoch), 10)
	data = append(data, '\n')
	if err := volume.WriteFileAtomic(fsys, path.Join(dir, fenceName), data); err != nil {
		return fmt.Errorf("write fence: %w", err)
	}
	return nil
}
