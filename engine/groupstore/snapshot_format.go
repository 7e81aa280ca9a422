package groupstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
)

// A snapshot file is the compacted table as of a log offset:
//
//	header (36 bytes, big-endian)
//	  magic "KGSS" | version u16 | flags u16 (0) | offset i64 | epoch i32
//	  | shard i32 | count u32 | body length u64
//	body: count entries
//	  offset i64 (of the key's last write) | key length u32 | key
//	  | value length u32 | value
//	crc u32: CRC-32C of header and body
//
// A file that is short, long, or fails the CRC is rejected as a whole.
// Name: <offset %020d>-e<epoch>.snapshot, the same offset and epoch as the
// header (both are checked).
const (
	snapshotMagic      = "KGSS"
	snapshotVersion    = 1
	snapshotHeaderSize = 36
	snapshotExt        = ".snapshot"
	snapshotNameFormat = "%020d-e%d" + snapshotExt
)

// castagnoli is the CRC-32C table of the snapshot checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var errBadSnapshot = errors.New("bad group-store snapshot")

// snapshotHeader is a decoded snapshot header.
type snapshotHeader struct {
	Offset  int64 // log end covered: the next offset after the table's records
	Epoch   int32 // leader epoch of the writer
	Shard   int32
	Count   uint32
	BodyLen uint64
}

// SnapshotName is the file name of the snapshot as of offset written by
// epoch's owner.
func SnapshotName(offset int64, epoch int32) string {
	return fmt.Sprintf(snapshotNameFormat, offset, epoch)
}

// parseSnapshotName parses a name made by SnapshotName, rejecting names
// that do not round-trip exactly (temp files, "1-e1.snapshot").
func parseSnapshotName(name string) (offset int64, epoch int32, ok bool) {
	if !strings.HasSuffix(name, snapshotExt) || strings.HasPrefix(name, ".") {
		return 0, 0, false
	}
	if _, err := fmt.Sscanf(name, snapshotNameFormat, &offset, &epoch); err != nil {
		return 0, 0, false
	}
	if offset < 0 || epoch < 0 || SnapshotName(offset, epoch) != name {
		return 0, 0, false
	}
	return offset, epoch, true
}

// encodeSnapshot serialises t as of offset. It runs under the append lock:
// one allocation, sized from the table's byte count.
func (t *table) encodeSnapshot(shard int32, offset int64, epoch int32) []byte {
	size := snapshotHeaderSize + int(t.bytes) + len(t.m)*16 + 4
	b := make([]byte, snapshotHeaderSize, size)
	be := binary.BigEndian
	for k, e := range t.m {
		b = be.AppendUint64(b, uint64(e.offset))
		b = be.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
		b = be.AppendUint32(b, uint32(len(e.value)))
		b = append(b, e.value...)
	}
	putSnapshotHeader(b, snapshotHeader{Offset: offset, Epoch: epoch, Shard: shard,
		Count: uint32(len(t.m)), BodyLen: uint64(len(b) - snapshotHeaderSize)})
	return be.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func putSnapshotHeader(b []byte, h snapshotHeader) {
	be := binary.BigEndian
	copy(b, snapshotMagic)
	be.PutUint16(b[4:], snapshotVersion)
	be.PutUint16(b[6:], 0)
	be.PutUint64(b[8:], uint64(h.Offset))
	be.PutUint32(b[16:], uint32(h.Epoch))
	be.PutUint32(b[20:], uint32(h.Shard))
	be.PutUint32(b[24:], h.Count)
	be.PutUint64(b[28:], h.BodyLen)
}

// EncodeSnapshot returns the snapshot file of recs as of offset, written by
// epoch's owner of shard: recs in log order, each given an offset below
// offset, tombstones dropped. The store writes its own snapshots; this is
// for tools and tests that need to forge one.
func EncodeSnapshot(shard int32, offset int64, epoch int32, recs []Record) []byte {
	t := newTable()
	for i, r := range recs {
		t.put(r.Key, r.Value, max(offset-int64(len(recs)-i), 0))
	}
	return t.encodeSnapshot(shard, offset, epoch)
}

// decodeSnapshot checks the whole file (length, version, CRC) and then
// calls fn with every entry; key and value alias b.
func decodeSnapshot(b []byte, fn func(key, value []byte, offset int64)) (snapshotHeader, error) {
	var h snapshotHeader
	if len(b) < snapshotHeaderSize+4 {
		return h, fmt.Errorf("%w: %d bytes", errBadSnapshot, len(b))
	}
	be := binary.BigEndian
	if string(b[:4]) != snapshotMagic {
		return h, fmt.Errorf("%w: magic %q", errBadSnapshot, b[:4])
	}
	if v := be.Uint16(b[4:]); v != snapshotVersion {
		return h, fmt.Errorf("%w: version %d", errBadSnapshot, v)
	}
	h = snapshotHeader{
		Offset: int64(be.Uint64(b[8:])), Epoch: int32(be.Uint32(b[16:])), Shard: int32(be.Uint32(b[20:])),
		Count: be.Uint32(b[24:]), BodyLen: be.Uint64(b[28:]),
	}
	if h.BodyLen != uint64(len(b)-snapshotHeaderSize-4) {
		return h, fmt.Errorf("%w: body length %d in a %d-byte file", errBadSnapshot, h.BodyLen, len(b))
	}
	end := len(b) - 4
	if crc := crc32.Checksum(b[:end], castagnoli); crc != be.Uint32(b[end:]) {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", errBadSnapshot, be.Uint32(b[end:]), crc)
	}
	if h.Offset < 0 || h.Epoch < 0 {
		return h, fmt.Errorf("%w: offset %d, epoch %d", errBadSnapshot, h.Offset, h.Epoch)
	}
	body := b[snapshotHeaderSize:end]
	for i := uint32(0); i < h.Count; i++ {
		if len(body) < 12 {
			return h, fmt.Errorf("%w: entry %d truncated", errBadSnapshot, i)
		}
		off := int64(be.Uint64(body))
		kl := be.Uint32(body[8:])
		body = body[12:]
		if uint64(kl)+4 > uint64(len(body)) {
			return h, fmt.Errorf("%w: entry %d key truncated", errBadSnapshot, i)
		}
		key := body[:kl:kl]
		vl := be.Uint32(body[kl:])
		body = body[kl+4:]
		if uint64(vl) > uint64(len(body)) {
			return h, fmt.Errorf("%w: entry %d value truncated", errBadSnapshot, i)
		}
		if off < 0 || off >= h.Offset {
			return h, fmt.Errorf("%w: entry %d at offset %d, snapshot offset %d", errBadSnapshot, i, off, h.Offset)
		}
		fn(key, body[:vl:vl], off)
		body = body[vl:]
	}
	if len(body) != 0 {
		return h, fmt.Errorf("%w: %d bytes after %d entries", errBadSnapshot, len(body), h.Count)
	}
	return h, nil
}
