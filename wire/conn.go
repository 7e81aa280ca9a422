package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/wire/sasl"
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

	// listener is the listener the client connected through; sasl, on a
	// SASL listener, authenticates it; principal is who it is ("" while a
	// SASL client has not authenticated; on PLAINTEXT it is anonymous).
	listener  *Listener
	sasl      *sasl.Session
	principal string
	// aclName and aclIP are the principal and host ACLs are checked
	// against, kept once known (authorize.go).
	aclName, aclIP string
	// rawSASL: a SaslHandshake v0 succeeded, and the client's next frames
	// are bare SASL messages until the exchange ends.
	rawSASL bool

	clientID string
	zone     string     // clientZone(clientID)
	ip       netip.Addr // remoteIP, for max.connections.per.ip

	// frame is the budget charge of the frame being read; held counts the
	// bytes this connection holds in the budget (the frame being read and
	// those not yet answered); the writer signals drained when it gives
	// some back.
	frame   frameCharge
	held    atomic.Int64
	drained chan struct{}
	// muteUntil (Unix ns) holds the read loop after a throttled response
	// (KIP-219, quota_enforce.go).
	muteUntil atomic.Int64
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
	// charge is the request budget its frame holds until it is answered.
	charge int64
	// closeAfter, when set, holds the answer back this long, writes it and
	// closes the connection (a failed authentication, Kafka's
	// connection.failed.authentication.delay.ms).
	closeAfter time.Duration
	// raw, when set, is written as a bare size-prefixed frame instead of a
	// response (the SASL messages after a SaslHandshake v0).
	raw []byte
	// bare: r carries a bare SASL message, not the answer to a request.
	bare bool
	// refs, if not nil, makes resp (a *kmsg.FetchResponse) an answer whose
	// record sets are file ranges: one entry per partition in answer
	// order, a non-empty one replacing the partition's RecordBatches (see
	// appendFetchResponse). release releases them.
	refs []partlog.Ref
	// parts are the partitions of refs, entry by entry (nil where an
	// entry has none), whose fetched bytes are counted once written.
	parts []*dataplane.Partition
	// quotaUser and clientID are the client's quota entity when the
	// request was read; size is what a byte-rate quota meters it by: a
	// produce's frame, a fetch answer's record bytes (quota_enforce.go).
	quotaUser, clientID string
	size                int64
	// start is when the request was dispatched; spent is the handler time
	// the request_percentage quota meters: until finish for a handler
	// that answers at once; for one that goes async, until then plus what
	// it adds for its own work (not its waits). exempt requests are not
	// metered by it.
	start  time.Time
	spent  time.Duration
	async  bool
	exempt bool
}

func (r *reply) finish(resp kmsg.Response) {
	r.resp = resp
	if !r.async {
		r.spent = time.Since(r.start)
	}
	close(r.done)
}

func (r *reply) fail(err error) {
	r.fatal = err
	close(r.done)
}

func newConn(s *Server, nc net.Conn, l *Listener) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	readCtx, stopRead := context.WithCancel(ctx)
	return &conn{s: s, nc: nc, listener: l, ctx: ctx, cancel: cancel, readCtx: readCtx, stopRead: stopRead,
		replies: make(chan *reply, s.cfg.MaxInFlight), stopping: make(chan struct{}), drained: make(chan struct{}, 1),
		frame: frameCharge{idx: -1}}
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
	log := c.s.log.WithValues("remote", c.nc.RemoteAddr().String(), "listener", c.listener.Name)
	if err := c.start(); err != nil {
		log.V(1).Info("closing connection before its first request", "reason", err.Error())
		c.cancel()
		_ = c.nc.Close()
		return
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	err := c.readLoop()
	stopping := false
	select {
	case <-c.stopping:
		stopping = true
	default:
	}
	var rerr readError
	if !stopping && errors.As(err, &rerr) {
		// The client closed, reset, went silent or trickles: nobody
		// will read the answers. End its long polls and fsync waits at
		// once and free the socket, rather than keep the writer, the
		// handlers and the socket (CLOSE-WAIT) until MaxWait.
		c.cancel()
		_ = c.nc.Close()
	}
	close(c.replies)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !stopping {
		log.V(1).Info("closing connection", "reason", err.Error(), "clientID", c.clientID)
	}
	<-writerDone
	c.cancel()
	_ = c.nc.Close()
}

// readError is a failure to read from the client (closed, reset, idle or
// too slow), as opposed to a request it sent that cannot be served.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }
func (e readError) Unwrap() error { return e.err }

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
		if !c.waitUnmuted() {
			return nil // the connection is closing
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		// stopReading may have set its immediate deadline between the
		// check above and the line before, which just replaced it.
		select {
		case <-c.stopping:
			return nil
		default:
		}
		if err := c.readSize(sizeBuf[:]); err != nil {
			return readError{err}
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if c.rawSASL {
			// A bare SASL message (after SaslHandshake v0) may be short.
			if size < 0 || size > c.maxFrame() {
				return fmt.Errorf("SASL message of %d bytes is outside [0, %d]", size, c.maxFrame())
			}
		} else if limit := c.maxFrame(); size < 8 || size > limit {
			return fmt.Errorf("frame of %d bytes is outside [8, %d]", size, limit)
		}
		if !c.waitForShare(int64(size)) {
			return nil // the connection is closing
		}
		frame, charge, err := c.readBody(int(size))
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil // the connection is closing
			}
			return err
		}
		if c.rawSASL {
			if err := c.rawToken(frame, charge); err != nil {
				return err
			}
			continue
		}
		if !c.waitUnmuted() { // muted while this frame arrived
			c.releaseCharge(charge)
			return nil
		}
		if err := c.dispatch(frame, charge); err != nil {
			return err
		}
	}
}

// readSize reads the next frame's size under the idle deadline. A client
// that sends nothing while a request of its own is still unanswered (a
// CreateTopics waiting for thousands of partitions, a long poll) is
// waiting for kaas, not idle: its deadline starts again, as long as no byte
// of the next frame has arrived.
func (c *conn) readSize(buf []byte) error {
	for {
		n, err := io.ReadFull(c.nc, buf)
		var ne net.Error
		if err == nil || n > 0 || !errors.As(err, &ne) || !ne.Timeout() || c.held.Load() == 0 {
			return err
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		// After the deadline, as in readLoop: stopReading's immediate
		// deadline must not be replaced by this one.
		select {
		case <-c.stopping:
			return err
		default:
		}
	}
}

// waitForShare waits until this connection may take size more bytes of the
// request budget (MaxConnQueuedBytes; a connection holding nothing may
// always read one frame). False means the connection is closing.
func (c *conn) waitForShare(size int64) bool {
	limit := c.s.cfg.MaxConnQueuedBytes
	counted := false
	for {
		held := c.held.Load()
		if held == 0 || held+size <= limit {
			return true
		}
		if !counted {
			c.s.connQueueWaits.Add(1)
			counted = true
		}
		select {
		case <-c.drained:
		case <-c.readCtx.Done():
			return false
		}
	}
}

// Frame bodies are read into a buffer that grows as bytes arrive, charged
// to the request budget as it grows: first firstChunk bytes, then growing
// by chunkGrowth each time it fills. A frame announced and never sent
// holds firstChunk; one that trickles, at most chunkGrowth times what it
// sent. A frame of firstChunk bytes or less, most requests, is one
// allocation and one charge, as before.
const (
	firstChunk  = 4 << 10
	chunkGrowth = 16
)

// readBody reads a frame body of size bytes and returns it with the budget
// it holds. A started frame must arrive within FrameTimeout (plus the time
// it waited for the budget): a slow or truncated sender cannot hold a
// connection's goroutine, or budget, for long. An error other than
// context.Canceled (closing) is a readError; the budget is given back.
func (c *conn) readBody(size int) ([]byte, int64, error) {
	f := &c.frame
	f.size, f.held = int64(size), 0
	deadline := time.Now().Add(c.s.cfg.FrameTimeout)
	_ = c.nc.SetReadDeadline(deadline)
	var buf []byte
	for len(buf) < size {
		want := min(size, max(firstChunk, len(buf)*chunkGrowth))
		if int64(want) > f.held {
			before := f.held
			waited, err := c.s.budget.charge(c.readCtx, f, int64(want))
			c.held.Add(f.held - before)
			if err != nil {
				c.held.Add(-c.s.budget.drop(f))
				return nil, 0, err
			}
			if waited > 0 {
				// Waiting for memory is not the sender's slowness.
				deadline = deadline.Add(waited)
				_ = c.nc.SetReadDeadline(deadline)
			}
			want = int(f.held) // all of it, when only that was safe
		}
		buf = slices.Grow(buf, want-len(buf))
		n, err := io.ReadFull(c.nc, buf[len(buf):want])
		buf = buf[:len(buf)+n]
		if err != nil {
			c.held.Add(-c.s.budget.drop(f))
			return nil, 0, readError{fmt.Errorf("read frame body (%d of %d bytes): %w", len(buf), size, err)}
		}
	}
	charge := f.held
	f.held = 0 // the reply (or dispatch) owns it now
	return buf, charge, nil
}

// releaseCharge gives back the budget of a frame answered or given up.
func (c *conn) releaseCharge(n int64) {
	if n == 0 {
		return
	}
	c.s.budget.release(n)
	c.held.Add(-n)
	select {
	case c.drained <- struct{}{}:
	default:
	}
}

// dispatch decodes one request and starts its handler. The frame's budget
// charge goes with the reply queued for it (the writer gives it back once
// the answer is written) or is given back here.
func (c *conn) dispatch(frame []byte, charge int64) (err error) {
	defer func() { c.releaseCharge(charge) }()
	hdr, body, err := parseHeader(frame)
	if err != nil {
		return err
	}
	if hdr.clientID != nil && *hdr.clientID != c.clientID {
		c.clientID = *hdr.clientID
		c.zone = clientZone(c.clientID)
	}
	if err := c.saslGate(hdr.key); err != nil {
		return err
	}
	c.notePrincipal()
	r := &reply{key: hdr.key, version: hdr.version, corr: hdr.corr, zone: c.zone, done: make(chan struct{}),
		quotaUser: quotaUser(c.aclPrincipal()), clientID: c.clientID, start: time.Now()}
	if kmsg.Key(hdr.key) == kmsg.Produce {
		r.size = int64(len(frame))
	}
	h, known := handlers[kmsg.Key(hdr.key)]
	if !known {
		return fmt.Errorf("unsupported api key %d", hdr.key)
	}
	if hdr.version < h.min || hdr.version > h.max {
		if kmsg.Key(hdr.key) == kmsg.ApiVersions {
			// Clients probe with their newest version; answer v0 with
			// UNSUPPORTED_VERSION and our ranges so they can downgrade.
			r.version = 0
			r.charge, charge = charge, 0
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
	r.charge, charge = charge, 0
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
	if refusal := c.interBrokerRefusal(req); refusal != nil {
		r.finish(refusal)
		return nil
	}
	r.exempt = quotaExempt(req)
	h.fn(c, req, r)
	return nil
}

// async runs fn in its own goroutine, with the same panic safety. The
// handler time metered so far ends here; fn adds its own work to r.spent.
func (c *conn) async(r *reply, fn func()) {
	r.async, r.spent = true, time.Since(r.start)
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
		if m := c.s.metrics; m != nil && !r.bare {
			m.answered(r, !broken)
		}
		if r.release != nil {
			r.release()
		}
		c.releaseCharge(r.charge)
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
	if r.closeAfter > 0 && !c.holdBack(r.closeAfter) {
		return false
	}
	if r.raw == nil && !c.applyQuotas(r) {
		return false
	}
	if r.raw != nil {
		return c.writeRaw(r)
	}
	if r.resp == nil {
		return c.closeIfAsked(r)
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
	return c.closeIfAsked(r)
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
