package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/volume"
)

// ioTimeout bounds every client-side read and write so a broken server fails
// a test instead of hanging it. It is a safety net, not an assertion.
const ioTimeout = 20 * time.Second

type testBroker struct {
	addr string
	eng  *engine.Engine
	srv  *Server
	dir  string

	mu     sync.Mutex
	panics []string // "handler panicked" log lines

	stopOnce sync.Once
}

// shutdown stops the server once (tests may do it before the cleanup).
func (b *testBroker) shutdown(ctx context.Context) {
	b.stopOnce.Do(func() { b.srv.Shutdown(ctx) })
}

// pendingReplies reports whether some connection has a reply slot queued
// behind the one its writer is waiting on.
func (b *testBroker) pendingReplies() bool {
	b.srv.mu.Lock()
	defer b.srv.mu.Unlock()
	for c := range b.srv.conns {
		if len(c.replies) > 0 {
			return true
		}
	}
	return false
}

func (b *testBroker) panicked() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.panics...)
}

// startBroker runs an engine and a server on a temp dir and a 127.0.0.1
// listener; everything is stopped by t.Cleanup.
func startBroker(t testing.TB, tweak func(*Config)) *testBroker {
	t.Helper()
	return startBrokerWith(t, nil, tweak)
}

// startBrokerWith is startBroker with the engine's config tweaked too.
func startBrokerWith(t testing.TB, engTweak func(*engine.Config), tweak func(*Config)) *testBroker {
	t.Helper()
	b := &testBroker{dir: t.TempDir()}
	ecfg := engine.Config{FS: volume.OS(), DataDir: b.dir, AutoCreateTopics: true, DefaultPartitions: 1}
	if engTweak != nil {
		engTweak(&ecfg)
	}
	eng, err := engine.New(ecfg)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	b.eng = eng
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_ = eng.Run(ctx)
	}()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		<-runDone
		t.Fatalf("listen: %v", err)
	}
	b.addr = ln.Addr().String()
	logger := funcr.New(func(prefix, args string) {
		if strings.Contains(args, "handler panicked") {
			b.mu.Lock()
			b.panics = append(b.panics, args)
			b.mu.Unlock()
		}
	}, funcr.Options{})
	cfg := Config{Engine: eng, Logger: logger, Advertise: b.addr, MaxFrameBytes: 1 << 20}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := NewServer(cfg)
	if err != nil {
		_ = ln.Close()
		cancel()
		<-runDone
		t.Fatalf("NewServer: %v", err)
	}
	b.srv = srv
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		b.shutdown(sctx)
		scancel()
		if err := <-serveDone; err != nil {
			t.Errorf("Serve: %v", err)
		}
		cancel()
		<-runDone
		if p := b.panicked(); len(p) > 0 {
			t.Errorf("handlers panicked: %v", p)
		}
	})
	return b
}

// rawConn is a plain TCP connection speaking the protocol by hand.
type rawConn struct {
	t    testing.TB
	nc   net.Conn
	fmt  *kmsg.RequestFormatter
	corr int32
}

func (b *testBroker) dial(t testing.TB) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", b.addr, ioTimeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &rawConn{t: t, nc: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("wire-test"))}
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	_ = c.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// frame appends req, framed, at its set version; it returns the
// correlation ID used.
func (c *rawConn) frame(dst []byte, req kmsg.Request) ([]byte, int32) {
	c.corr++
	// AppendRequest writes the size as if dst were empty: frame alone.
	return append(dst, c.fmt.AppendRequest(nil, req, c.corr)...), c.corr
}

// send writes one request and returns its correlation ID.
func (c *rawConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	b, corr := c.frame(nil, req)
	c.write(b)
	return corr
}

// readFrame reads one response frame: correlation ID and the rest.
func (c *rawConn) readFrame() (int32, []byte, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return 0, nil, fmt.Errorf("response frame of %d bytes", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.nc, buf); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

// read reads the response to a request of req's kind and version.
func (c *rawConn) read(req kmsg.Request, wantCorr int32) kmsg.Response {
	c.t.Helper()
	corr, body, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("read %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	if corr != wantCorr {
		c.t.Fatalf("correlation ID %d, want %d", corr, wantCorr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		if len(body) == 0 || body[0] != 0 {
			c.t.Fatalf("flexible response header: want empty tags, got % x", body[:min(len(body), 4)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// do sends req and reads its response.
func (c *rawConn) do(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	return c.read(req, c.send(req))
}

// expectClosed reads until the server closes the connection; any response
// frame on the way is a failure. It waits for EOF (or a reset), never for
// a fixed time.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	buf := make([]byte, 512)
	n, err := io.ReadFull(c.nc, buf[:4])
	if err == nil {
		m, _ := c.nc.Read(buf)
		c.t.Fatalf("server answered (% x %x) instead of closing", buf[:4], buf[:m])
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("server kept the connection open for %v (%d bytes read)", ioTimeout, n)
	}
	// io.EOF, io.ErrUnexpectedEOF or ECONNRESET: closed.
}

// checkServing asserts the broker still serves other connections: a raw
// ApiVersions round trip and a kgo client's request.
func (b *testBroker) checkServing(t testing.TB) {
	t.Helper()
	c := b.dial(t)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "wire-test", "1"
	resp := c.do(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(handlers) {
		t.Fatalf("ApiVersions after bad input: code %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
	_ = c.nc.Close()

	cl := b.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	mresp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("kgo metadata after bad input: %v", err)
	}
	if len(mresp.Brokers) != 1 || mresp.Brokers[0].Port != b.srv.plaintext.port {
		t.Fatalf("kgo metadata after bad input: brokers %+v", mresp.Brokers)
	}
}

func (b *testBroker) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr), kgo.WithLogger(nil)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic (waiting until it is served) and fails the
// test on any error.
func (b *testBroker) createTopic(t testing.TB, name string, partitions int32, configs map[string]string) {
	t.Helper()
	c := b.dial(t)
	resp := c.do(createTopicsReq(7, false, name, partitions, configs)).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: %+v", name, resp.Topics)
	}
	if _, err := b.eng.Partition(name, 0); err != nil {
		t.Fatalf("create %s: partition 0 not served after CreateTopics answered: %v", name, err)
	}
}

func createTopicsReq(version int16, validateOnly bool, name string, partitions int32, configs map[string]string) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = version
	req.TimeoutMillis = 15000
	req.ValidateOnly = validateOnly
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, -1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		c.Value = &v
		t.Configs = append(t.Configs, c)
	}
	req.Topics = append(req.Topics, t)
	return req
}

// batchOpts describes a RecordBatch v2 to build.
type batchOpts struct {
	pid     int64 // -1: not idempotent
	epoch   int16
	seq     int32
	ts      int64 // first timestamp; record i has ts+i
	attrs   int16
	values  []string
	padding int // extra bytes added to the first value
}

// makeBatch builds a valid, uncompressed RecordBatch v2.
func makeBatch(o batchOpts) []byte {
	if len(o.values) == 0 {
		o.values = []string{"v"}
	}
	if o.pid == 0 && o.epoch == 0 && o.seq == 0 {
		o.pid, o.epoch, o.seq = -1, -1, -1
	}
	var recs []byte
	for i, v := range o.values {
		if i == 0 && o.padding > 0 {
			v += strings.Repeat("x", o.padding)
		}
		var r []byte
		r = append(r, 0)                          // attributes
		r = binary.AppendVarint(r, int64(i))      // timestamp delta
		r = binary.AppendVarint(r, int64(i))      // offset delta
		r = binary.AppendVarint(r, -1)            // null key
		r = binary.AppendVarint(r, int64(len(v))) // value
		r = append(r, v...)
		r = binary.AppendVarint(r, 0) // no headers
		recs = binary.AppendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	n := int32(len(o.values))
	b := make([]byte, 0, 61+len(recs))
	b = binary.BigEndian.AppendUint64(b, 0)                       // base offset
	b = binary.BigEndian.AppendUint32(b, uint32(49+len(recs)))    // batch length
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)              // partition leader epoch
	b = append(b, 2)                                              // magic
	b = binary.BigEndian.AppendUint32(b, 0)                       // crc, below
	b = binary.BigEndian.AppendUint16(b, uint16(o.attrs))         // attributes
	b = binary.BigEndian.AppendUint32(b, uint32(n-1))             // last offset delta
	b = binary.BigEndian.AppendUint64(b, uint64(o.ts))            // first timestamp
	b = binary.BigEndian.AppendUint64(b, uint64(o.ts+int64(n-1))) // max timestamp
	b = binary.BigEndian.AppendUint64(b, uint64(o.pid))
	b = binary.BigEndian.AppendUint16(b, uint16(o.epoch))
	b = binary.BigEndian.AppendUint32(b, uint32(o.seq))
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = append(b, recs...)
	fixCRC(b)
	return b
}

func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}

func produceReq(version int16, acks int16, topic string, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = acks
	req.TimeoutMillis = 15000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition = partition
	p.Records = records
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// produce sends one batch with acks=-1 and returns the partition's answer.
func (c *rawConn) produce(version int16, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	resp := c.do(produceReq(version, -1, topic, 0, records)).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("produce response shape: %+v", resp.Topics)
	}
	return resp.Topics[0].Partitions[0]
}

func fetchReq(version int16, topic string, offset int64, leaderEpoch int32, maxWaitMs, minBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = -1
	req.MaxWaitMillis = maxWaitMs
	req.MinBytes = minBytes
	req.MaxBytes = 1 << 20
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition = 0
	p.FetchOffset = offset
	p.CurrentLeaderEpoch = leaderEpoch
	p.PartitionMaxBytes = 1 << 20
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func (c *rawConn) fetch(req *kmsg.FetchRequest) kmsg.FetchResponseTopicPartition {
	c.t.Helper()
	resp := c.do(req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("fetch response shape: code %d %+v", resp.ErrorCode, resp.Topics)
	}
	return resp.Topics[0].Partitions[0]
}

// batchBases lists the base offsets and record counts of the batches in a
// fetched record set.
func batchBases(t testing.TB, recs []byte) (bases []int64, counts []int32) {
	t.Helper()
	for len(recs) > 0 {
		if len(recs) < 61 {
			t.Fatalf("%d trailing bytes in a record set", len(recs))
		}
		size := int(int32(binary.BigEndian.Uint32(recs[8:]))) + 12
		if size > len(recs) {
			t.Fatalf("batch of %d bytes in %d", size, len(recs))
		}
		bases = append(bases, int64(binary.BigEndian.Uint64(recs)))
		counts = append(counts, int32(binary.BigEndian.Uint32(recs[57:])))
		recs = recs[size:]
	}
	return bases, counts
}
