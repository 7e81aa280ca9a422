package partlog

import (
	"fmt"
	"path"
	"strings"
)

// On-disk layout of one partition directory. Every name the package reads or
// writes is built from, and parsed back with, the format strings below.
//
//	<dir>/fence                               the writer's leader epoch, decimal, written atomically
//	<dir>/manifest-e<epoch>.json              segment list, epoch history, checkpoint, written atomically
//	                                          by the writer of that epoch only
//	<dir>/manifest.json                       legacy single manifest: read (adopted) and then removed
//	<dir>/<base:%020d>-e<epoch>.log           segment: RecordBatch v2 bytes, back to back
//	<dir>/<base:%020d>-e<epoch>.index         sparse offset index, indexEntrySize-byte entries
//	<dir>/<base:%020d>-e<epoch>.timeindex     sparse time index, timeIndexEntrySize-byte entries
//	<dir>/<base:%020d>-e<epoch>.c<gen>.log    cleaned segment (and its .index, .timeindex): written
//	                                          by the log cleaner of epoch's writer, generation gen
//
// The epoch in a segment name is the leader epoch of the writer that created
// it. A new leader never appends to a segment created under another epoch, so
// late writes of a fenced writer land beyond the sealed end recorded in the
// manifest, where nobody reads.
//
// A cleaned segment replaces, in its writer's manifest, sealed segments
// whose records it keeps a part of (docs/volume.md, Layout): its base is
// its first input's base, epoch is the cleaning writer's, and gen numbers
// that writer's cleaned outputs, so a name is never written twice and a
// zombie's outputs never collide with its successor's. Its batches may hold
// fewer records than offsets, and it may end before the next segment's
// base: readers go on with the next segment.
//
// The epoch in a manifest name is the epoch of its writer, and each writer
// writes (replaces) only its own epoch's manifest, so a fenced writer whose
// manifest write lands late can never replace a newer writer's manifest: it
// only rewrites a file recovery no longer chooses (the highest epoch wins).
const (
	// fenceName holds the leader epoch of the partition's current writer.
	fenceName = "fence"
	// manifestFormat names the manifest written by one epoch's writer,
	// replaced with WriteFileAtomic by that writer only. It is also the
	// format the name is parsed back with.
	manifestFormat = "manifest-e%d.json"
	// legacyManifestName is the single manifest of directories written
	// before manifests carried the epoch. It is still read, and removed once
	// a manifest of the new form is durable.
	legacyManifestName = "manifest.json"

	// segmentStemFormat is the name of a segment without its extension:
	// zero-padded base offset (so names sort by offset) and creator epoch.
	segmentStemFormat = "%020d-e%d"
	// segmentExt, indexExt and timeIndexExt complete the stem.
	segmentExt   = ".log"
	indexExt     = ".index"
	timeIndexExt = ".timeindex"
	// segmentScanFormat parses a segment file name back.
	segmentScanFormat = segmentStemFormat + segmentExt
	// cleanedStemFormat is the stem of a cleaned segment: a segment stem
	// and the generation. The plain parser refuses it, so recovery never
	// adopts one as a newer epoch's segment.
	cleanedStemFormat = segmentStemFormat + ".c%d"
	cleanedScanFormat = cleanedStemFormat + segmentExt

	// indexEntrySize: relative offset uint32, file position uint32, big-endian.
	indexEntrySize = 8
	// timeIndexEntrySize: max timestamp int64, relative offset uint32, big-endian.
	timeIndexEntrySize = 12

	// manifestVersion is the format version written to the manifest, and
	// manifestVersionCleaned the one written while it names a cleaned
	// segment: a kaas that knows only version 1 refuses such a manifest
	// rather than read a cleaned segment's entry as a plain one.
	manifestVersion        = 1
	manifestVersionCleaned = 2
)

// segID identifies a segment's files: base offset, the epoch of the writer
// that created them and, for a cleaned segment, its generation (0: plain).
type segID struct {
	base  int64
	epoch int32
	gen   int64
}

// stem returns the segment's name without extension.
func (id segID) stem() string {
	if id.gen == 0 {
		return segmentStem(id.base, id.epoch)
	}
	return fmt.Sprintf(cleanedStemFormat, id.base, id.epoch, id.gen)
}

// paths returns the paths of the segment and its two index files in dir.
func (id segID) paths(dir string) (log, index, timeIndex string) {
	stem := path.Join(dir, id.stem())
	return stem + segmentExt, stem + indexExt, stem + timeIndexExt
}

// segmentStem returns the stem (name without extension) of the segment with
// the given base offset created under epoch.
func segmentStem(base int64, epoch int32) string {
	return fmt.Sprintf(segmentStemFormat, base, epoch)
}

// parseSegmentName parses a base name produced by segmentStem+segmentExt. It
// rejects names that do not round-trip exactly, so that "1-e1.log" or a
// temp file is never mistaken for a segment.
func parseSegmentName(name string) (base int64, epoch int32, ok bool) {
	if !strings.HasSuffix(name, segmentExt) {
		return 0, 0, false
	}
	if _, err := fmt.Sscanf(name, segmentScanFormat, &base, &epoch); err != nil {
		return 0, 0, false
	}
	if base < 0 || epoch < 0 || segmentStem(base, epoch)+segmentExt != name {
		return 0, 0, false
	}
	return base, epoch, true
}

// parseCleanedSegmentName parses a base name produced by segID.stem (with a
// generation above 0) + segmentExt, rejecting names that do not round-trip
// exactly.
func parseCleanedSegmentName(name string) (segID, bool) {
	var id segID
	if !strings.HasSuffix(name, segmentExt) {
		return id, false
	}
	if _, err := fmt.Sscanf(name, cleanedScanFormat, &id.base, &id.epoch, &id.gen); err != nil {
		return segID{}, false
	}
	if id.base < 0 || id.epoch < 0 || id.gen <= 0 || id.stem()+segmentExt != name {
		return segID{}, false
	}
	return id, true
}

// parseAnySegmentFile parses the name of any of a plain or cleaned
// segment's three files (a stem plus segmentExt, indexExt or timeIndexExt).
func parseAnySegmentFile(name string) (segID, bool) {
	for _, ext := range []string{segmentExt, indexExt, timeIndexExt} {
		stem, found := strings.CutSuffix(name, ext)
		if !found {
			continue
		}
		if base, epoch, ok := parseSegmentName(stem + segmentExt); ok {
			return segID{base: base, epoch: epoch}, true
		}
		return parseCleanedSegmentName(stem + segmentExt)
	}
	return segID{}, false
}

// manifestName returns the base name of the manifest written by epoch.
func manifestName(epoch int32) string {
	return fmt.Sprintf(manifestFormat, epoch)
}

// parseManifestName parses a base name produced by manifestName, rejecting
// names that do not round-trip exactly (a temp file, "manifest-e01.json").
func parseManifestName(name string) (epoch int32, ok bool) {
	if _, err := fmt.Sscanf(name, manifestFormat, &epoch); err != nil {
		return 0, false
	}
	if epoch < 0 || manifestName(epoch) != name {
		return 0, false
	}
	return epoch, true
}
