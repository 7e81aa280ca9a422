package wire

// Fetch response encoding with file ranges.
//
// A Fetch answer is mostly record batches that already sit, byte for byte,
// in segment files. appendFetchResponse encodes a kmsg.FetchResponse like
// its AppendTo (field by field, per version, flexible from v12), except that
// a partition whose record set is a partlog.Ref gets only the length prefix
// encoded: the ref's bytes are spliced in at that point when the answer is
// written (sendfile where the kernel allows, see writeFetch). The encoder
// mirrors kmsg v1.15.1's generated FetchResponse.AppendTo; a property test
// (fetch_encode_test.go) checks it against AppendTo byte for byte for every
// version, so a kmsg upgrade that changes the shape fails there.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// fileCut is a file range to splice into an encoded answer at byte at.
type fileCut struct {
	at  int
	ref partlog.Ref
}

// appendFetchResponse appends v's encoding to dst and returns it with the
// file ranges to splice in, in order (appended to cuts). refs, if not nil,
// holds one entry per partition in answer order (topic by topic); a
// non-empty entry replaces that partition's RecordBatches.
func appendFetchResponse(dst []byte, v *kmsg.FetchResponse, refs []partlog.Ref, cuts []fileCut) ([]byte, []fileCut) {
	version := v.Version
	flex := version >= 12
	if version >= 1 {
		dst = kbin.AppendInt32(dst, v.ThrottleMillis)
	}
	if version >= 7 {
		dst = kbin.AppendInt16(dst, v.ErrorCode)
		dst = kbin.AppendInt32(dst, v.SessionID)
	}
	dst = appendArrayLen(dst, len(v.Topics), flex)
	k := 0 // partition index across topics
	for ti := range v.Topics {
		t := &v.Topics[ti]
		if version <= 12 {
			if flex {
				dst = kbin.AppendCompactString(dst, t.Topic)
			} else {
				dst = kbin.AppendString(dst, t.Topic)
			}
		}
		if version >= 13 {
			dst = kbin.AppendUuid(dst, t.TopicID)
		}
		dst = appendArrayLen(dst, len(t.Partitions), flex)
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			dst = kbin.AppendInt32(dst, p.Partition)
			dst = kbin.AppendInt16(dst, p.ErrorCode)
			dst = kbin.AppendInt64(dst, p.HighWatermark)
			if version >= 4 {
				dst = kbin.AppendInt64(dst, p.LastStableOffset)
			}
			if version >= 5 {
				dst = kbin.AppendInt64(dst, p.LogStartOffset)
			}
			if version >= 4 {
				if flex {
					dst = kbin.AppendCompactNullableArrayLen(dst, len(p.AbortedTransactions), p.AbortedTransactions == nil)
				} else {
					dst = kbin.AppendNullableArrayLen(dst, len(p.AbortedTransactions), p.AbortedTransactions == nil)
				}
				for ai := range p.AbortedTransactions {
					a := &p.AbortedTransactions[ai]
					dst = kbin.AppendInt64(dst, a.ProducerID)
					dst = kbin.AppendInt64(dst, a.FirstOffset)
					if flex {
						dst = appendTagsWithCount(dst, &a.UnknownTags)
					}
				}
			}
			if version >= 11 {
				dst = kbin.AppendInt32(dst, p.PreferredReadReplica)
			}
			if k < len(refs) && refs[k].Len > 0 {
				n := refs[k].Len
				if flex {
					dst = kbin.AppendUvarint(dst, 1+uint32(n))
				} else {
					dst = kbin.AppendInt32(dst, int32(n))
				}
				cuts = append(cuts, fileCut{at: len(dst), ref: refs[k]})
			} else {
				dst = appendNullableBytes(dst, p.RecordBatches, flex)
			}
			k++
			if flex {
				dst = appendPartitionTags(dst, p)
			}
		}
		if flex {
			dst = appendTagsWithCount(dst, &t.UnknownTags)
		}
	}
	if flex {
		n := v.UnknownTags.Len()
		if len(v.Brokers) > 0 {
			n++
		}
		dst = kbin.AppendUvarint(dst, uint32(n))
		if len(v.Brokers) > 0 {
			dst = kbin.AppendUvarint(dst, 0)
			dst = appendSized(dst, func(dst []byte) []byte {
				dst = kbin.AppendCompactArrayLen(dst, len(v.Brokers))
				for i := range v.Brokers {
					b := &v.Brokers[i]
					dst = kbin.AppendInt32(dst, b.NodeID)
					dst = kbin.AppendCompactString(dst, b.Host)
					dst = kbin.AppendInt32(dst, b.Port)
					dst = kbin.AppendCompactNullableString(dst, b.Rack)
					dst = appendTagsWithCount(dst, &b.UnknownTags)
				}
				return dst
			})
		}
		dst = v.UnknownTags.AppendEach(dst)
	}
	return dst, cuts
}

// appendPartitionTags appends a v12+ partition's tagged fields: the known
// ones (DivergingEpoch 0, CurrentLeader 1, SnapshotID 2) when not default,
// then the unknown ones.
func appendPartitionTags(dst []byte, p *kmsg.FetchResponseTopicPartition) []byte {
	de, cl, sn := &p.DivergingEpoch, &p.CurrentLeader, &p.SnapshotID
	hasDE := de.Epoch != -1 || de.EndOffset != -1 || de.UnknownTags.Len() > 0
	hasCL := cl.LeaderID != -1 || cl.LeaderEpoch != -1 || cl.UnknownTags.Len() > 0
	hasSN := sn.EndOffset != -1 || sn.Epoch != -1 || sn.UnknownTags.Len() > 0
	n := p.UnknownTags.Len()
	for _, b := range [...]bool{hasDE, hasCL, hasSN} {
		if b {
			n++
		}
	}
	dst = kbin.AppendUvarint(dst, uint32(n))
	if hasDE {
		dst = kbin.AppendUvarint(dst, 0)
		dst = appendSized(dst, func(dst []byte) []byte {
			dst = kbin.AppendInt32(dst, de.Epoch)
			dst = kbin.AppendInt64(dst, de.EndOffset)
			return appendTagsWithCount(dst, &de.UnknownTags)
		})
	}
	if hasCL {
		dst = kbin.AppendUvarint(dst, 1)
		dst = appendSized(dst, func(dst []byte) []byte {
			dst = kbin.AppendInt32(dst, cl.LeaderID)
			dst = kbin.AppendInt32(dst, cl.LeaderEpoch)
			return appendTagsWithCount(dst, &cl.UnknownTags)
		})
	}
	if hasSN {
		dst = kbin.AppendUvarint(dst, 2)
		dst = appendSized(dst, func(dst []byte) []byte {
			dst = kbin.AppendInt64(dst, sn.EndOffset)
			dst = kbin.AppendInt32(dst, sn.Epoch)
			return appendTagsWithCount(dst, &sn.UnknownTags)
		})
	}
	return p.UnknownTags.AppendEach(dst)
}

// appendSized appends a tagged field's value prefixed by its uvarint size.
func appendSized(dst []byte, value func([]byte) []byte) []byte {
	at := len(dst)
	dst = value(dst)
	n := len(dst) - at
	var szb [5]byte
	sz := kbin.AppendUvarint(szb[:0], uint32(n))
	dst = append(dst, sz...) // grow by len(sz), then shift the value right
	copy(dst[at+len(sz):], dst[at:at+n])
	copy(dst[at:], sz)
	return dst
}

// appendTagsWithCount appends unknown tags with their count (a struct with
// no tagged fields of its own).
func appendTagsWithCount(dst []byte, t *kmsg.Tags) []byte {
	dst = kbin.AppendUvarint(dst, uint32(t.Len()))
	return t.AppendEach(dst)
}

func appendArrayLen(dst []byte, n int, flex bool) []byte {
	if flex {
		return kbin.AppendCompactArrayLen(dst, n)
	}
	return kbin.AppendArrayLen(dst, n)
}

func appendNullableBytes(dst, b []byte, flex bool) []byte {
	if flex {
		return kbin.AppendCompactNullableBytes(dst, b)
	}
	return kbin.AppendNullableBytes(dst, b)
}

// cutsPool recycles the cut lists of Fetch answers.
var cutsPool = sync.Pool{New: func() any { return new([]fileCut) }}

// writePieces writes one response frame: buf is the encoded frame with a
// 4-byte placeholder for the size, and cuts are the file ranges to splice
// into it. Ranges of files with a descriptor go out with sendfile(2) when
// the connection is a TCP socket (under TCP_CORK, so the small runs of
// encoded fields between them do not leave as packets of their own);
// the others are read into a buffer and written with the encoded bytes in
// one writev. Without a TCP socket (TLS) it is all one buffer, one Write
// (writeCopied). An error leaves a partial frame behind: the caller closes the
// connection.
func (c *conn) writePieces(buf []byte, cuts []fileCut) error {
	total := int64(len(buf) - 4)
	for _, ct := range cuts {
		total += int64(ct.ref.Len)
	}
	if total > math.MaxInt32 {
		return fmt.Errorf("fetch answer of %d bytes does not fit a frame", total)
	}
	binary.BigEndian.PutUint32(buf, uint32(total))
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.IdleTimeout))

	var rc syscall.RawConn
	if tc, ok := c.nc.(*net.TCPConn); ok && sendfileSupported {
		if raw, err := tc.SyscallConn(); err == nil {
			rc = raw
		}
	}
	if rc == nil {
		return c.writeCopied(buf, cuts, int(total))
	}
	// Ranges copied through memory go to mat, sized up front so that the
	// slices pend holds into it stay valid.
	matLen := 0
	for _, ct := range cuts {
		if !canSendfile(rc, ct.ref) {
			matLen += ct.ref.Len
		}
	}
	var mat []byte
	if matLen > 0 {
		mp := respBufPool.Get().(*[]byte)
		defer respBufPool.Put(mp)
		*mp = slices.Grow((*mp)[:0], matLen)
		mat = (*mp)[:0]
	}

	pend := make(net.Buffers, 0, 2*len(cuts)+1)
	flush := func() error {
		if len(pend) == 0 {
			return nil
		}
		b := pend
		_, err := b.WriteTo(c.nc)
		pend = pend[:0]
		return err
	}
	corked := false
	prev := 0
	for _, ct := range cuts {
		pend = append(pend, buf[prev:ct.at])
		prev = ct.at
		ref := ct.ref
		if canSendfile(rc, ref) {
			if !corked {
				corked = setCork(rc, true) == nil // an optimisation only
			}
			if err := flush(); err != nil {
				return err
			}
			sent, err := sendFile(rc, ref.File, ref.File.(volume.Fder), ref.Pos, ref.Len)
			if err == nil {
				continue
			}
			if !errors.Is(err, errSendfileUnsupported) || sent > 0 {
				return err
			}
			// The kernel cannot sendfile from this file: copy it instead.
			b := make([]byte, ref.Len)
			if err := readFullAt(ref.File, b, ref.Pos); err != nil {
				return err
			}
			pend = append(pend, b)
			continue
		}
		at := len(mat)
		mat = mat[:at+ref.Len]
		if err := readFullAt(ref.File, mat[at:], ref.Pos); err != nil {
			return err
		}
		pend = append(pend, mat[at:])
	}
	pend = append(pend, buf[prev:])
	if err := flush(); err != nil {
		return err
	}
	if corked {
		// Pushes the frame's last partial packet. Should it fail, the
		// kernel still sends it within 200ms: not worth the connection.
		_ = setCork(rc, false)
	}
	return nil
}

// writeCopied writes a frame none of whose ranges can go out with
// sendfile (a TLS connection, which encrypts in user space, or one without
// a socket): the whole frame is laid out in one buffer and written with one
// Write. Written piece by piece, each run of encoded fields between two
// ranges would leave as a TLS record (and a write) of its own, a few dozen
// bytes long; in one buffer every record but the last is full (see
// BenchmarkWritePiecesTLS).
func (c *conn) writeCopied(buf []byte, cuts []fileCut, total int) error {
	fp := respBufPool.Get().(*[]byte)
	defer respBufPool.Put(fp)
	out := slices.Grow((*fp)[:0], 4+total)
	prev := 0
	for _, ct := range cuts {
		out = append(out, buf[prev:ct.at]...)
		prev = ct.at
		at := len(out)
		out = out[:at+ct.ref.Len]
		if err := readFullAt(ct.ref.File, out[at:], ct.ref.Pos); err != nil {
			return err
		}
	}
	out = append(out, buf[prev:]...)
	*fp = out[:0]
	_, err := c.nc.Write(out)
	return err
}

// canSendfile reports whether ref can go out with sendfile on rc.
func canSendfile(rc syscall.RawConn, ref partlog.Ref) bool {
	if rc == nil {
		return false
	}
	_, ok := ref.File.(volume.Fder)
	return ok
}

// errSendfileUnsupported: sendfile refused the file (EINVAL, ENOSYS,
// EOPNOTSUPP); the range is copied instead when nothing was sent yet.
var errSendfileUnsupported = errors.New("sendfile not supported for this file")

// readFullAt fills b from f at off, a short read being an error.
func readFullAt(f io.ReaderAt, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read %d bytes at %d: %w", len(b), off, err)
}
