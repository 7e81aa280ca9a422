package partlog

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// scanBufSize is the chunk a headerScanner reads at a time: big enough to
// hold many small batches' headers, small enough to waste little on big ones.
const scanBufSize = 4096

var scanBufPool = sync.Pool{New: func() any { b := make([]byte, scanBufSize); return &b }}

// headerScanner walks the batch headers of a trusted (already validated and
// durable) region [pos, limit) of a segment with pread. Batches there may
// be cleaned ones (ParseStoredBatchHeader).
type headerScanner struct {
	r      io.ReaderAt
	name   string
	pos    int64 // position of the next header
	limit  int64
	buf    *[]byte
	bufPos int64 // file position of (*buf)[0]
	bufLen int   // valid bytes in *buf
}

func newHeaderScanner(r io.ReaderAt, name string, pos, limit int64) headerScanner {
	return headerScanner{r: r, name: name, pos: pos, limit: limit, buf: scanBufPool.Get().(*[]byte), bufPos: -1}
}

// release returns the scanner's buffer to the pool.
func (sc *headerScanner) release() {
	if sc.buf != nil {
		scanBufPool.Put(sc.buf)
		sc.buf = nil
	}
}

// next returns the next batch header and its position, or io.EOF at limit.
func (sc *headerScanner) next() (BatchHeader, int64, error) {
	if sc.pos >= sc.limit {
		return BatchHeader{}, 0, io.EOF
	}
	if sc.pos+BatchHeaderSize > sc.limit {
		return BatchHeader{}, 0, fmt.Errorf("%w: %s: partial batch header at position %d before end %d", ErrCorruptLog, sc.name, sc.pos, sc.limit)
	}
	if sc.bufPos < 0 || sc.pos < sc.bufPos || sc.pos+BatchHeaderSize > sc.bufPos+int64(sc.bufLen) {
		n := int(min(int64(len(*sc.buf)), sc.limit-sc.pos))
		if err := readFullAt(sc.r, (*sc.buf)[:n], sc.pos); err != nil {
			return BatchHeader{}, 0, fmt.Errorf("read %s at %d: %w", sc.name, sc.pos, err)
		}
		sc.bufPos, sc.bufLen = sc.pos, n
	}
	off := sc.pos - sc.bufPos
	h, err := ParseStoredBatchHeader((*sc.buf)[off : off+BatchHeaderSize])
	if err != nil {
		return h, 0, fmt.Errorf("%w: %s at position %d: %v", ErrCorruptLog, sc.name, sc.pos, err)
	}
	pos := sc.pos
	if pos+h.Size() > sc.limit {
		return h, 0, fmt.Errorf("%w: %s: batch at position %d runs past end %d", ErrCorruptLog, sc.name, pos, sc.limit)
	}
	sc.pos += h.Size()
	return h, pos, nil
}

// readFullAt fills b from position off, treating a short read as an error.
func readFullAt(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}
