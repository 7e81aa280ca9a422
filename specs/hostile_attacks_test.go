package specs

// The attacks of the hostile-client spec (fault model T11, issue 15). Each
// runs until ctx ends and returns counters that say what it did and what
// the broker answered; none of them asserts: the spec checks the broker.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// hostileTarget is what the attacks aim at.
type hostileTarget struct {
	addr      string
	topic     string // poison, bombs, PID floods, long polls
	fillTopic string // holds a few MiB for duplicate-partition fetches
	endOffset int64  // topic partition 0's end before the attacks (long polls wait there)
	maxConns  int    // the broker's --max-connections (0: none)
	perIP     int    // the broker's --max-connections-per-ip (0: none)
	fetchMax  int64  // the broker's --fetch-max-bytes
	maxPIDs   int    // the broker's --max-producers-per-partition
	poisons   []poison
	bombs     []poison
	// rate paces the flooding attacks: connections or requests per second
	// over all their workers (0: as fast as they go).
	rate       int
	pacer      <-chan time.Time
	sourceTurn int
	mu         sync.Mutex
}

// pace waits for the flood's next turn; false once ctx ends.
func (t *hostileTarget) pace(ctx context.Context) bool {
	if t.pacer == nil {
		return ctx.Err() == nil
	}
	select {
	case <-t.pacer:
		return true
	case <-ctx.Done():
		return false
	}
}

// startPacing makes pace tick rate times a second until ctx ends.
func (t *hostileTarget) startPacing(ctx context.Context) {
	if t.rate <= 0 {
		return
	}
	tick := time.NewTicker(time.Second / time.Duration(t.rate))
	t.pacer = tick.C
	go func() {
		<-ctx.Done()
		tick.Stop()
	}()
}

// source picks the next hostile source address.
func (t *hostileTarget) source() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sourceTurn++
	return hostileSources[t.sourceTurn%len(hostileSources)]
}

// counters is what an attack did, by name.
type counters struct {
	mu sync.Mutex
	m  map[string]int64
}

func newCounters() *counters { return &counters{m: map[string]int64{}} }

func (c *counters) add(k string, n int64) {
	c.mu.Lock()
	c.m[k] += n
	c.mu.Unlock()
}

func (c *counters) max(k string, n int64) {
	c.mu.Lock()
	c.m[k] = max(c.m[k], n)
	c.mu.Unlock()
}

func (c *counters) get(k string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *counters) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.m))
	for k := range c.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c.m[k]))
	}
	return strings.Join(parts, " ")
}

// attack is one hostile behaviour.
type attack struct {
	name string
	run  func(ctx context.Context, t *hostileTarget, c *counters)
}

var hostileAttacks = []attack{
	{"garbage frames", attackGarbage},
	{"slowloris", attackSlowloris},
	{"announced giant frames", attackGiantFrames},
	{"fd exhaustion", attackFDExhaustion},
	{"long-poll leak", attackLongPollLeak},
	{"duplicate-partition fetch", attackDuplicateFetch},
	{"poison batches", attackPoison},
	{"compression bombs", attackBombs},
	{"producer-ID flood", attackPIDFlood},
}

// workers runs n copies of fn until ctx ends, each call paced by t.
func workers(ctx context.Context, t *hostileTarget, n int, fn func(ctx context.Context, i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t.pace(ctx) {
				fn(ctx, i)
			}
		}()
	}
	wg.Wait()
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// holdUntil keeps conns open until ctx ends, then counts how many the
// broker had closed and closes the rest.
func holdUntil(ctx context.Context, conns []*hostileConn, c *counters) {
	<-ctx.Done()
	for _, hc := range conns {
		if hc.waitClosed(time.Millisecond) {
			c.add("closed by broker", 1)
		}
		hc.close()
	}
}

// garbageFrames are frames no decoder may choke on: bad sizes, unknown
// keys and versions, and counts that claim far more than the frame holds.
func garbageFrames() [][]byte {
	hdr := func(key, version int16, flexible bool) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 7) // correlation ID
		b = binary.BigEndian.AppendUint16(b, uint16(len("g")))
		b = append(b, 'g')
		if flexible {
			b = append(b, 0) // no header tags
		}
		return b
	}
	framed := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	var out [][]byte
	out = append(out,
		binary.BigEndian.AppendUint32(nil, 0xffffffff),               // size -1
		binary.BigEndian.AppendUint32(nil, 0x80000000),               // size MinInt32
		append(binary.BigEndian.AppendUint32(nil, 0x7fffffff), 0, 3), // size MaxInt32, 2 bytes
		binary.BigEndian.AppendUint32(nil, 0),                        // empty frame
		framed([]byte{0, 18, 0}),                                     // 3-byte frame
		framed(hdr(999, 0, false)),                                   // unknown key
		framed(hdr(-1, 0, false)),                                    // negative key
		framed(hdr(int16(kmsg.Metadata), 99, false)),                 // unknown version
		framed(hdr(int16(kmsg.ApiVersions), -5, false)),              // negative version
		// Metadata v4 whose topic array claims 2^31-1 entries.
		framed(binary.BigEndian.AppendUint32(hdr(int16(kmsg.Metadata), 4, false), 0x7fffffff)),
		// Produce v7: transactional ID null, acks, timeout, 2^31-1 topics.
		framed(binary.BigEndian.AppendUint32(append(hdr(int16(kmsg.Produce), 7, false), 0xff, 0xff, 0xff, 0xff, 0, 0, 0x27, 0x10), 0x7fffffff)),
		// Fetch v11 with 2^31-1 topics.
		framed(binary.BigEndian.AppendUint32(append(hdr(int16(kmsg.Fetch), 11, false),
			0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff), 0x7fffffff)),
		// Metadata v9 (flexible header v2) with 2*10^7 header tags.
		framed(binary.AppendUvarint(hdr(int16(kmsg.Metadata), 9, false), 20_000_000)),
		// ApiVersions v3 with a compact client software name of 2^31 bytes.
		framed(binary.AppendUvarint(hdr(int16(kmsg.ApiVersions), 3, true), 1<<31)),
		// Metadata v12 with a compact topic array of 2^31 entries.
		framed(binary.AppendUvarint(hdr(int16(kmsg.Metadata), 12, true), 1<<31)),
	)
	return out
}

func attackGarbage(ctx context.Context, t *hostileTarget, c *counters) {
	frames := garbageFrames()
	workers(ctx, t, 4, func(ctx context.Context, i int) {
		var frame []byte
		if n := mrand.IntN(len(frames) + 2); n < len(frames) {
			frame = frames[n]
		} else {
			frame = randomBytes(1 + mrand.IntN(512))
		}
		hc, err := dialHostile(t.addr, t.source())
		if err != nil {
			c.add("dial errors", 1)
			time.Sleep(10 * time.Millisecond)
			return
		}
		defer hc.close()
		if hc.write(frame) != nil {
			c.add("write errors", 1)
			return
		}
		c.add("frames", 1)
		if hc.waitClosed(time.Second) {
			c.add("closed by broker", 1)
		} else {
			c.add("left open", 1)
		}
	})
}

// attackSlowloris opens connections that announce the largest frame and
// then send it at one byte a second.
func attackSlowloris(ctx context.Context, t *hostileTarget, c *counters) {
	var conns []*hostileConn
	for range 16 {
		hc, err := dialHostile(t.addr, t.source())
		if err != nil {
			c.add("dial errors", 1)
			continue
		}
		conns = append(conns, hc)
	}
	c.add("connections", int64(len(conns)))
	// A quarter dribble the size prefix itself; the rest announce 100 MiB
	// at once and then dribble the body.
	stream := binary.BigEndian.AppendUint32(nil, 100<<20)
	stream = append(stream, binary.BigEndian.AppendUint16(nil, uint16(kmsg.Produce))...)
	stream = append(stream, 0, 7, 0, 0, 0, 1, 0, 1, 'g')
	pos := make([]int, len(conns))
	for j, hc := range conns {
		if j%4 != 0 {
			_ = hc.write(stream[:4])
			pos[j] = 4
		}
	}
	for {
		for j, hc := range conns {
			if hc.write(stream[pos[j]:pos[j]+1]) == nil {
				c.add("bytes", 1)
			}
			if pos[j]++; pos[j] == len(stream) {
				pos[j] = 4
			}
		}
		select {
		case <-ctx.Done():
			holdUntil(ctx, conns, c)
			return
		case <-time.After(time.Second):
		}
	}
}

// attackGiantFrames opens sockets that each send a 4-byte prefix of
// 100 MiB (the default frame cap) and nothing more.
func attackGiantFrames(ctx context.Context, t *hostileTarget, c *counters) {
	var conns []*hostileConn
	for range 8 {
		hc, err := dialHostile(t.addr, t.source())
		if err != nil {
			c.add("dial errors", 1)
			continue
		}
		if hc.write(binary.BigEndian.AppendUint32(nil, 100<<20)) == nil {
			c.add("announced MiB", 100)
		}
		conns = append(conns, hc)
	}
	holdUntil(ctx, conns, c)
}

// attackFDExhaustion opens more idle connections than the broker allows,
// from every hostile source, and holds them.
func attackFDExhaustion(ctx context.Context, t *hostileTarget, c *counters) {
	limit := t.maxConns
	if limit == 0 {
		limit = 200
	}
	perSource := limit/len(hostileSources) + 60
	var (
		mu    sync.Mutex
		conns []*hostileConn
		wg    sync.WaitGroup
	)
	for _, src := range hostileSources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perSource {
				if ctx.Err() != nil {
					return
				}
				hc, err := dialHostile(t.addr, src)
				if err != nil {
					c.add("dial errors", 1)
					continue
				}
				mu.Lock()
				conns = append(conns, hc)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	c.add("dialed", int64(len(conns)))
	holdUntil(ctx, conns, c)
}

// attackLongPollLeak connects, sends a Fetch waiting up to MaxWait 2^31-1
// ms at the end of the partition, and closes at once, over and over.
func attackLongPollLeak(ctx context.Context, t *hostileTarget, c *counters) {
	workers(ctx, t, 6, func(ctx context.Context, i int) {
		hc, err := dialHostile(t.addr, t.source())
		if err != nil {
			c.add("dial errors", 1)
			time.Sleep(5 * time.Millisecond)
			return
		}
		if hc.send(fetchRequest(t.topic, 0, t.endOffset, 1, 0x7fffffff)) == nil {
			c.add("cycles", 1)
		}
		hc.close()
	})
}

// attackDuplicateFetch sends Fetches naming one partition 200 times and
// notes how large a response the broker announces.
func attackDuplicateFetch(ctx context.Context, t *hostileTarget, c *counters) {
	workers(ctx, t, 2, func(ctx context.Context, i int) {
		hc, err := dialHostile(t.addr, t.source())
		if err != nil {
			c.add("dial errors", 1)
			time.Sleep(10 * time.Millisecond)
			return
		}
		defer hc.close()
		if hc.send(fetchRequest(t.fillTopic, 0, 0, 200, 0)) != nil {
			c.add("write errors", 1)
			return
		}
		n, err := hc.readSize(10 * time.Second)
		if err != nil {
			c.add("read errors", 1)
			return
		}
		c.add("fetches", 1)
		c.max("largest response bytes", n)
	})
}

// sendAndCount produces batch to partition and counts the answer by
// error code under name.
func sendAndCount(hc *hostileConn, t *hostileTarget, partition int32, name string, batch []byte, c *counters) error {
	req := produceRequest(t.topic, partition, batch)
	if err := hc.send(req); err != nil {
		return err
	}
	resp, err := hc.read(req, 30*time.Second)
	if err != nil {
		return err
	}
	pr := resp.(*kmsg.ProduceResponse)
	code := int16(-1000)
	if len(pr.Topics) == 1 && len(pr.Topics[0].Partitions) == 1 {
		code = pr.Topics[0].Partitions[0].ErrorCode
	}
	switch {
	case code == 0 && name == "":
		c.add("acknowledged", 1)
	case code == 0:
		c.add("ACCEPTED "+name, 1)
	default:
		c.add(fmt.Sprintf("refused(%d)", code), 1)
	}
	return nil
}

func attackPoison(ctx context.Context, t *hostileTarget, c *counters) {
	producing(ctx, t, c, 1, func(i int) (string, []byte) {
		p := t.poisons[i%len(t.poisons)]
		return p.name, p.batch
	})
}

// bombTurns is how many of the flood's turns each bomb takes. A bomb is a
// request of up to 1 MiB, so at the full rate the attack is a loopback
// bandwidth flood (500 MB/s here), which on two shared cores measures the
// harness's own copying, and which bandwidth quotas, not record
// validation, answer. What the attack checks is that a bomb costs the
// broker no memory and stalls nobody.
const bombTurns = 10

func attackBombs(ctx context.Context, t *hostileTarget, c *counters) {
	producing(ctx, t, c, 1, func(i int) (string, []byte) {
		for range bombTurns - 1 {
			if !t.pace(ctx) {
				break
			}
		}
		p := t.bombs[i%len(t.bombs)]
		return p.name, p.batch
	})
}

// producing sends the batches next returns to partition 0 of the target,
// one at a time on one connection per worker, until ctx ends.
func producing(ctx context.Context, t *hostileTarget, c *counters, n int, next func(i int) (string, []byte)) {
	workers(ctx, &hostileTarget{}, n, func(ctx context.Context, w int) {
		hc, err := dialHostile(t.addr, t.source())
		if err != nil {
			c.add("dial errors", 1)
			time.Sleep(10 * time.Millisecond)
			return
		}
		defer hc.close()
		for i := 0; t.pace(ctx); i++ {
			name, batch := next(i)
			if err := sendAndCount(hc, t, 0, name, batch, c); err != nil {
				c.add("connection errors", 1)
				return
			}
		}
	})
}

// attackPIDFlood produces valid idempotent batches, each under a made-up
// producer ID and epoch, to partition 1 of the target.
func attackPIDFlood(ctx context.Context, t *hostileTarget, c *counters) {
	records := goodRecords(1, "pid-flood")
	workers(ctx, &hostileTarget{}, 2, func(ctx context.Context, w int) {
		hc, err := dialHostile(t.addr, t.source())
		if err != nil {
			c.add("dial errors", 1)
			time.Sleep(10 * time.Millisecond)
			return
		}
		defer hc.close()
		for t.pace(ctx) {
			s := plainBatch(0, 1)
			s.pid, s.epoch, s.seq = 1<<40+mrand.Int64N(1<<40), int16(mrand.IntN(1<<15)), 0
			if err := sendAndCount(hc, t, 1, "", rawBatch(s, records), c); err != nil {
				c.add("connection errors", 1)
				return
			}
			c.add("producer IDs sent", 1)
		}
	})
}

// describeProducers answers how many producers partition of topic tracks.
func describeProducers(addr, topic string, partition int32) (int, error) {
	hc, err := dialHostile(addr, "127.0.0.1")
	if err != nil {
		return 0, err
	}
	defer hc.close()
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	if err := hc.send(req); err != nil {
		return 0, err
	}
	resp, err := hc.read(req, 10*time.Second)
	if err != nil {
		return 0, err
	}
	dr := resp.(*kmsg.DescribeProducersResponse)
	if len(dr.Topics) != 1 || len(dr.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("DescribeProducers: %d topics", len(dr.Topics))
	}
	p := dr.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return 0, fmt.Errorf("DescribeProducers: error code %d", p.ErrorCode)
	}
	return len(p.ActiveProducers), nil
}
