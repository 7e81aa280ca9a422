package wire

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// promptly bounds the polls below: far below every timeout the broker
// could be waiting out instead (MaxWait, FrameTimeout), far above what the
// operation needs. A poll returns as soon as its condition holds.
const promptly = 5 * time.Second

// eventually polls cond until it holds or promptly passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(promptly)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v\n%s", what, promptly, strings.Join(connGoroutines(), "\n\n"))
		}
		time.Sleep(time.Millisecond)
	}
}

// flakyListener returns errs from Accept first, then the conns sent to it,
// then net.ErrClosed once closed.
type flakyListener struct {
	mu     sync.Mutex
	errs   []error
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	select {
	case nc := <-l.conns:
		return nc, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *flakyListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *flakyListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092} }

func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

// TestAcceptErrorsBackOff: accept failing with EMFILE, ENFILE, ENOBUFS,
// ENOMEM or ECONNABORTED does not end Serve: it backs off, retries, and
// serves the next connection.
func TestAcceptErrorsBackOff(t *testing.T) {
	b := startBroker(t, nil)
	srv, err := NewServer(Config{Engine: b.eng, Logger: b.srv.log, Advertise: b.addr})
	if err != nil {
		t.Fatal(err)
	}
	ln := &flakyListener{
		errs: []error{acceptErr(syscall.EMFILE), acceptErr(syscall.ENFILE), acceptErr(syscall.ENOBUFS),
			acceptErr(syscall.ENOMEM), acceptErr(syscall.ECONNABORTED), acceptErr(syscall.EMFILE)},
		conns: make(chan net.Conn, 1), closed: make(chan struct{}),
	}
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	client, server := net.Pipe()
	defer client.Close()
	ln.conns <- server
	c := &rawConn{t: t, nc: client, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("wire-test"))}
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		_, _, err := c.readFrame()
		if err != nil {
			t.Errorf("ApiVersions after accept errors: %v", err)
		}
	}()
	go func() {
		b, _ := c.frame(nil, kmsg.NewPtrApiVersionsRequest())
		_ = client.SetWriteDeadline(time.Now().Add(ioTimeout))
		_, _ = client.Write(b)
	}()
	select {
	case err := <-serveDone:
		t.Fatalf("Serve returned on a temporary accept error: %v", err)
	case <-answered:
	}
	srv.Shutdown(context.Background())
	if err := <-serveDone; err != nil {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
}

// TestConnectionLimits: a connection over max.connections or
// max.connections.per.ip is closed at once; once one closes, a new one is
// served.
func TestConnectionLimits(t *testing.T) {
	tests := []struct {
		name  string
		tweak func(*Config)
	}{
		{"max connections", func(c *Config) { c.MaxConnections = 2 }},
		{"max connections per IP", func(c *Config) { c.MaxConnectionsPerIP = 2 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, tc.tweak)
			first, second := b.dial(t), b.dial(t)
			first.do(kmsg.NewPtrApiVersionsRequest())
			second.do(kmsg.NewPtrApiVersionsRequest())
			over := b.dial(t)
			// The write may already fail: the broker closes at once.
			f, _ := over.frame(nil, kmsg.NewPtrApiVersionsRequest())
			_, _ = over.nc.Write(f)
			over.expectClosed()
			_ = first.nc.Close()
			eventually(t, "the closed connection is forgotten", func() bool {
				b.srv.mu.Lock()
				defer b.srv.mu.Unlock()
				return len(b.srv.conns) == 1
			})
			b.dial(t).do(kmsg.NewPtrApiVersionsRequest())
			if n := b.srv.rejectedConns.Load(); n != 1 {
				t.Fatalf("%d connections counted as rejected, want 1", n)
			}
		})
	}
}

// connGoroutines lists the stacks of the goroutines of connections and
// fetch long polls.
func connGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "wire.(*conn)") || strings.Contains(g, "wire.handleFetch") {
			found = append(found, g)
		}
	}
	return found
}

// TestClientCloseEndsLongPoll: a client that closes while its Fetch
// long-polls (MaxWait 2^31-1 ms) frees its connection, socket and
// goroutines at once, not at MaxWait.
func TestClientCloseEndsLongPoll(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "quiet", 1, nil)
	openConns := func() int {
		b.srv.mu.Lock()
		defer b.srv.mu.Unlock()
		return len(b.srv.conns)
	}
	others, otherGoroutines := openConns(), len(connGoroutines()) // createTopic's connection
	c := b.dial(t)
	c.send(fetchReq(12, "quiet", 0, -1, math.MaxInt32, 1))
	c.send(kmsg.NewPtrApiVersionsRequest())
	eventually(t, "the fetch long-polls", b.pendingReplies)
	_ = c.nc.Close()
	eventually(t, "the connection ends", func() bool { return openConns() == others })
	eventually(t, "its goroutines exit", func() bool { return len(connGoroutines()) == otherGoroutines })
}

// TestFetchMaxWaitCapped: MaxWait is capped by the broker (MaxFetchWait):
// a fetch asking to wait 2^31-1 ms is answered once the cap passes.
func TestFetchMaxWaitCapped(t *testing.T) {
	b := startBroker(t, func(c *Config) { c.MaxFetchWait = 50 * time.Millisecond })
	b.createTopic(t, "quiet", 1, nil)
	c := b.dial(t)
	if p := c.fetch(fetchReq(12, "quiet", 0, -1, math.MaxInt32, 1)); p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("capped long poll: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	def, err := NewServer(Config{Advertise: "127.0.0.1:9092"})
	if err != nil {
		t.Fatal(err)
	}
	if def.cfg.MaxFetchWait != 30*time.Second {
		t.Fatalf("default MaxFetchWait %v, want 30s", def.cfg.MaxFetchWait)
	}
}

// TestConnQueuedBytesBounded: a connection's requests hold the shared
// budget until answered, at most MaxConnQueuedBytes of it: the next frame
// is not read while a long poll holds the connection's share.
func TestConnQueuedBytesBounded(t *testing.T) {
	b := startBroker(t, func(c *Config) { c.MaxConnQueuedBytes = 2048 })
	b.createTopic(t, "quiet", 1, nil)
	c := b.dial(t)
	c.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID(strings.Repeat("x", 1200)))
	fetch := fetchReq(12, "quiet", 0, -1, math.MaxInt32, 1)
	fcorr := c.send(fetch)
	av := kmsg.NewPtrApiVersionsRequest()
	acorr := c.send(av)
	eventually(t, "the second frame waits for the connection's share", func() bool {
		return b.srv.connQueueWaits.Load() == 1
	})
	p := b.dial(t).produce(9, "quiet", makeBatch(batchOpts{}))
	if p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	if fp := c.read(fetch, fcorr).(*kmsg.FetchResponse).Topics[0].Partitions[0]; len(fp.RecordBatches) == 0 {
		t.Fatal("long poll woken without records")
	}
	c.read(av, acorr)
}

// TestAnnouncedFramesBlockNobody: six sockets announcing 100 MiB frames
// and sending nothing must not hold the request budget: another client's
// requests are answered at once.
func TestAnnouncedFramesBlockNobody(t *testing.T) {
	b := startBroker(t, func(c *Config) {
		c.MaxFrameBytes = 100 << 20
		c.MaxQueuedBytes = 512 << 20
		c.FrameTimeout = time.Minute
	})
	b.createTopic(t, "good", 1, nil)
	for range 6 {
		b.dial(t).write(sizePrefix(100 << 20))
	}
	eventually(t, "the six frames are announced", func() bool { return b.srv.budget.reading() == 6 })
	// A watchdog, not a timing assertion: a client left waiting is cut
	// off, and its read fails the test.
	c := b.dial(t)
	cut := time.AfterFunc(promptly, func() { _ = c.nc.Close() })
	defer cut.Stop()
	c.do(kmsg.NewPtrApiVersionsRequest())
	if p := c.produce(9, "good", makeBatch(batchOpts{})); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	if !cut.Stop() {
		t.Fatalf("a good client was not answered within %v while six frames were announced", promptly)
	}
}

// TestFetchAmplification: a partition named many times in one Fetch is
// answered once, and the answer is capped by the broker's fetch.max.bytes
// (FetchMaxBytes) whatever the request's MaxBytes; the first partition's
// first batch is whole even when larger (KIP-74), later partitions never
// exceed the cap.
func TestFetchAmplification(t *testing.T) {
	b := startBroker(t, func(c *Config) { c.FetchMaxBytes = 1500 })
	b.createTopic(t, "amp", 2, nil)
	c := b.dial(t)
	for p := range int32(2) {
		for range 2 {
			resp := c.do(produceReq(9, -1, "amp", p, makeBatch(batchOpts{padding: 1000}))).(*kmsg.ProduceResponse)
			if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("produce to %d: %d", p, code)
			}
		}
	}
	part, err := b.eng.Partition("amp", 0)
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.MustParse(part.TopicID)
	batch := len(makeBatch(batchOpts{padding: 1000}))
	request := func(version int16, partitions []int32) *kmsg.FetchRequest {
		req := fetchReq(version, "amp", 0, -1, 0, 0)
		req.MaxBytes = math.MaxInt32
		req.Topics[0].TopicID = id
		req.Topics[0].Partitions = nil
		for _, p := range partitions {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = p, -1, 1<<20
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
		}
		return req
	}
	two := func(n int) []int32 {
		ps := make([]int32, n)
		for i := range ps {
			ps[i] = int32(i % 2)
		}
		return ps
	}
	tests := []struct {
		name       string
		version    int16
		partitions []int32
		want       map[int32]int // record bytes answered per partition
	}{
		{"one partition named 200 times", 12, make([]int32, 200), map[int32]int{0: batch}},
		{"one partition named 200 times, by topic ID", 13, make([]int32, 200), map[int32]int{0: batch}},
		{"two partitions named 100 times each", 12, two(200), map[int32]int{0: batch, 1: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := c.do(request(tc.version, tc.partitions)).(*kmsg.FetchResponse)
			got := map[int32]int{}
			entries, total := 0, 0
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 {
						t.Fatalf("partition %d: error %d", rp.Partition, rp.ErrorCode)
					}
					entries++
					got[rp.Partition] += len(rp.RecordBatches)
					total += len(rp.RecordBatches)
				}
			}
			if entries != len(tc.want) || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("%d partition entries, bytes %v (%d in all); want %v", entries, got, total, tc.want)
			}
		})
	}
	t.Run("first batch larger than the cap", func(t *testing.T) {
		small := startBroker(t, func(c *Config) { c.FetchMaxBytes = 100 })
		small.createTopic(t, "amp", 1, nil)
		sc := small.dial(t)
		for range 2 {
			if p := sc.produce(9, "amp", makeBatch(batchOpts{padding: 1000})); p.ErrorCode != 0 {
				t.Fatalf("produce: %d", p.ErrorCode)
			}
		}
		req := fetchReq(12, "amp", 0, -1, 0, 0)
		req.MaxBytes = math.MaxInt32
		if p := sc.fetch(req); len(p.RecordBatches) != batch {
			t.Fatalf("%d bytes answered, want the first batch whole (%d)", len(p.RecordBatches), batch)
		}
	})
}

// TestIdleTimeoutSparesAWaitingClient: a client with a request still
// unanswered (a long poll here) is waiting for the broker, not idle: the
// idle timeout closes its connection only once nothing is outstanding.
func TestIdleTimeoutSparesAWaitingClient(t *testing.T) {
	const idle = 100 * time.Millisecond
	b := startBroker(t, func(c *Config) { c.IdleTimeout = idle })
	b.createTopic(t, "waits", 1, nil)
	c := b.dial(t)
	// A long poll of six idle timeouts on an empty partition.
	p := c.fetch(fetchReq(12, "waits", 0, -1, int32(6*idle/time.Millisecond), 1))
	if p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("long poll answered code %d with %d bytes, want an empty answer", p.ErrorCode, len(p.RecordBatches))
	}
	// Nothing outstanding now: the idle timeout applies.
	c.expectClosed()
}
