package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/volume/partlog"
)

// conn is one client connection. Requests are read and dispatched in order
// by serve; each gets a reply slot queued to the writer, which sends the
// responses in request order (Kafka's per-connection ordering guarantee).
// A handler may finish its reply later (produce waiting for the shared
// fsync, fetch long-polling) while the next requests are read and
// dispatched: appends keep their order, durability waits overlap.
type conn struct {
	s       *Server
	nc      net.Conn
	ctx     context.Context
	cancel  context.CancelFunc
	replies chan *reply

	// readCtx ends when the connection stops reading (shutdown) or closes.
	readCtx  context.Context
	stopRead context.CancelFunc
	stopOnce sync.Once
	stopping chan struct{}

	clientID string
	zone     string // clientZone(clientID)
}

type reply struct {
	key      int16
	version  int16
	corr     int32
	zone     string // the client's zone, from its client.id (clientZone)
	flexible bool   // response header carries tags (never for ApiVersions)
	done     chan struct{}
	resp     kmsg.Response // nil: send nothing (acks=0 produce)
	fatal    error         // close the connection instead of answering
	// release, if set, runs once the response is written or dropped: the
	// response may reference pooled buffers or segment file ranges.
	release func()
	// refs, if not nil, makes resp (a *kmsg.FetchResponse) an answer whose
	// record sets are file ranges: one entry per partition in answer
	// order, a non-empty one replacing the partition's RecordBatches (see
	// appendFetchResponse). release releases them.
	refs []partlog.Ref
}

func (r *reply) finish(resp kmsg.Response) {
	r.resp = resp
	close(r.done)
}

func (r *reply) fail(err error) {
	r.fatal = err
	close(r.done)
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	readCtx, stopRead := context.WithCancel(ctx)
	return &conn{s: s, nc: nc, ctx: ctx, cancel: cancel, readCtx: readCtx, stopRead: stopRead,
		replies: make(chan *reply, s.cfg.MaxInFlight), stopping: make(chan struct{})}
}

// stopReading makes serve stop after the request it is reading; replies
// already queued are still written (graceful shutdown).
func (c *conn) stopReading() {
	c.stopOnce.Do(func() {
		close(c.stopping)
		c.stopRead()
		_ = c.nc.SetReadDeadline(time.Now())
	})
}

func (c *conn) serve() {
	log := c.s.log.WithValues("remote", c.nc.RemoteAddr().String())
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	err := c.readLoop()
	close(c.replies)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		select {
		case <-c.stopping:
		default:
			log.V(1).Info("closing connection", "reason", err.Error(), "clientID", c.clientID)
		}
	}
	<-writerDone
	c.cancel()
	_ = c.nc.Close()
}

func (c *conn) readLoop() error {
	var sizeBuf [4]byte
	for {
		select {
		case <-c.stopping:
			return nil
		case <-c.ctx.Done():
			return nil
		default:
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		// stopReading may have set its immediate deadline between the
		// check above and the line before, which just replaced it.
		select {
		case <-c.stopping:
			return nil
		default:
		}
		if _, err := io.ReadFull(c.nc, sizeBuf[:]); err != nil {
			return err
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size < 8 || size > c.s.cfg.MaxFrameBytes {
			return fmt.Errorf("frame of %d bytes is outside [8, %d]", size, c.s.cfg.MaxFrameBytes)
		}
		// Frames being read and dispatched share one memory budget
		// (queued.max.request.bytes): many clients announcing large frames
		// wait for each other instead of exhausting the broker's memory.
		if err := c.s.queued.Acquire(c.readCtx, int64(size)); err != nil {
			return nil // the connection is closing
		}
		err := c.readAndDispatch(int(size))
		c.s.queued.Release(int64(size))
		if err != nil {
			return err
		}
	}
}

func (c *conn) readAndDispatch(size int) error {
	// A started frame must arrive within FrameTimeout: a slow or
	// truncated sender cannot hold a connection's goroutine forever.
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
	buf := make([]byte, size)
	if _, err := io.ReadFull(c.nc, buf); err != nil {
		return fmt.Errorf("read frame body: %w", err)
	}
	return c.dispatch(buf)
}

// dispatch decodes one request and starts its handler.
func (c *conn) dispatch(frame []byte) (err error) {
	hdr, body, err := parseHeader(frame)
	if err != nil {
		return err
	}
	if hdr.clientID != nil && *hdr.clientID != c.clientID {
		c.clientID = *hdr.clientID
		c.zone = clientZone(c.clientID)
	}
	r := &reply{key: hdr.key, version: hdr.version, corr: hdr.corr, zone: c.zone, done: make(chan struct{})}
	h, known := handlers[kmsg.Key(hdr.key)]
	if !known {
		return fmt.Errorf("unsupported api key %d", hdr.key)
	}
	if hdr.version < h.min || hdr.version > h.max {
		if kmsg.Key(hdr.key) == kmsg.ApiVersions {
			// Clients probe with their newest version; answer v0 with
			// UNSUPPORTED_VERSION and our ranges so they can downgrade.
			r.version = 0
			c.replies <- r
			r.finish(apiVersionsResponse(0, unsupportedVersion))
			return nil
		}
		return fmt.Errorf("api key %d version %d is outside the supported %d-%d", hdr.key, hdr.version, h.min, h.max)
	}
	req := kmsg.RequestForKey(hdr.key)
	if req == nil {
		return fmt.Errorf("unknown api key %d", hdr.key)
	}
	req.SetVersion(hdr.version)
	r.flexible = req.IsFlexible() && kmsg.Key(hdr.key) != kmsg.ApiVersions
	if req.IsFlexible() {
		tr := &tagReader{src: body}
		kmsg.SkipTags(tr)
		if tr.bad {
			return errors.New("truncated request header tags")
		}
		body = tr.src
	}
	if err := req.ReadFrom(body); err != nil {
		return fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(hdr.key), hdr.version, err)
	}
	c.replies <- r
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error(fmt.Errorf("panic: %v", p), "handler panicked; closing connection", "key", hdr.key, "version", hdr.version, "stack", string(debug.Stack()))
			select {
			case <-r.done:
			default:
				r.fail(fmt.Errorf("handler panic: %v", p))
			}
			err = fmt.Errorf("handler panic: %v", p)
		}
	}()
	h.fn(c, req, r)
	return nil
}

// async runs fn in its own goroutine, with the same panic safety.
func (c *conn) async(r *reply, fn func()) {
	go func() {
		defer func() {
			if p := recover(); p != nil {
				c.s.log.Error(fmt.Errorf("panic: %v", p), "handler panicked; closing connection", "key", r.key, "stack", string(debug.Stack()))
				select {
				case <-r.done:
				default:
					r.fail(fmt.Errorf("handler panic: %v", p))
				}
			}
		}()
		fn()
	}()
}

func (c *conn) writeLoop() {
	broken := false
	for r := range c.replies {
		<-r.done
		if !broken {
			broken = !c.writeReply(r)
		}
		if r.release != nil {
			r.release()
		}
	}
}

// respBufPool recycles the buffers responses are encoded into. A Fetch
// answer is up to tens of MiB: a fresh buffer per answer, grown by doubling
// and dropped afterwards, cost far more in page faults and GC than the copy
// itself (measured with kaasbench's catch-up consume). The pool drops idle
// buffers at GC, so an idle connection pins nothing.
var respBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// writeReply encodes and writes r's response; false means the connection
// is broken (and closed).
func (c *conn) writeReply(r *reply) bool {
	if r.fatal != nil {
		c.cancel()
		_ = c.nc.Close()
		return false
	}
	if r.resp == nil {
		return true
	}
	bp := respBufPool.Get().(*[]byte)
	defer respBufPool.Put(bp)
	r.resp.SetVersion(r.version)
	buf := append((*bp)[:0], 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint32(buf, uint32(r.corr))
	if r.flexible {
		buf = append(buf, 0) // empty header tags
	}
	var err error
	if fr, ok := r.resp.(*kmsg.FetchResponse); ok && r.refs != nil {
		cp := cutsPool.Get().(*[]fileCut)
		var cuts []fileCut
		buf, cuts = appendFetchResponse(buf, fr, r.refs, (*cp)[:0])
		*bp = buf[:0]
		err = c.writePieces(buf, cuts)
		clear(cuts) // drop the file references before pooling
		*cp = cuts[:0]
		cutsPool.Put(cp)
	} else {
		buf = r.resp.AppendTo(buf)
		*bp = buf[:0]
		binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		_, err = c.nc.Write(buf)
	}
	if err != nil {
		c.cancel()
		_ = c.nc.Close()
		return false
	}
	return true
}

type header struct {
	key, version int16
	corr         int32
	clientID     *string
}

// parseHeader reads the fixed part of a request header (v1: key, version,
// correlation ID, nullable client ID); flexible tags are skipped by dispatch
// once the version is known.
func parseHeader(b []byte) (header, []byte, error) {
	var h header
	if len(b) < 10 {
		return h, nil, errors.New("request header is truncated")
	}
	h.key = int16(binary.BigEndian.Uint16(b[0:]))
	h.version = int16(binary.BigEndian.Uint16(b[2:]))
	h.corr = int32(binary.BigEndian.Uint32(b[4:]))
	n := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if n >= 0 {
		if int(n) > len(b) {
			return h, nil, errors.New("request header client id is truncated")
		}
		s := string(b[:n])
		h.clientID = &s
		b = b[n:]
	}
	return h, b, nil
}

// tagReader adapts a byte slice to kmsg.TagReader.
type tagReader struct {
	src []byte
	bad bool
}

func (t *tagReader) Ok() bool { return !t.bad }

func (t *tagReader) Uvarint() uint32 {
	var v uint32
	for i := 0; i < 5; i++ {
		if len(t.src) == 0 {
			t.bad = true
			return 0
		}
		c := t.src[0]
		t.src = t.src[1:]
		v |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v
		}
	}
	t.bad = true
	return 0
}

func (t *tagReader) Span(n int) []byte {
	if n < 0 || n > len(t.src) {
		t.bad = true
		t.src = nil
		return nil
	}
	s := t.src[:n]
	t.src = t.src[n:]
	return s
}
