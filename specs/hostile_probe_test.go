package specs

// What the hostile-client spec measures: a good producer's latency per
// phase, the broker process's RSS and open fds, a good consumer's errors,
// and a strict read-back of every stored batch.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/volume/records/recordstest"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// ---------------------------------------------------------------------------
// Good producer: one acks=all record at a time, latency recorded by phase.

type latencyProbe struct {
	*ledgerProducer
	mu       sync.Mutex
	phase    string
	samples  map[string][]time.Duration
	inFlight time.Time // start of the produce in flight, zero if none
	inPhase  string
	stopped  atomic.Bool
	done     chan struct{}
}

func startLatencyProbe(ctx context.Context, b *Broker, topic string) *latencyProbe {
	GinkgoHelper()
	p := &latencyProbe{
		ledgerProducer: &ledgerProducer{ackLedger: newAckLedger(), topics: []string{topic}, partitions: 1,
			errs: newClientErrorLog(), loop: make(chan struct{})},
		phase: "setup", samples: map[string][]time.Duration{}, done: make(chan struct{}),
	}
	cl := NewClient(b, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(90*time.Second),
		kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithLogger(p.errs))
	go func() {
		defer GinkgoRecover()
		defer close(p.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for seq := 0; !p.stopped.Load() && ctx.Err() == nil; seq++ {
			<-tick.C
			v := fmt.Sprintf("probe-%09d", seq)
			p.mu.Lock()
			start, phase := time.Now(), p.phase
			p.inFlight, p.inPhase = start, phase
			p.mu.Unlock()
			r := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)})[0]
			d := time.Since(start)
			p.mu.Lock()
			p.inFlight = time.Time{}
			p.samples[phase] = append(p.samples[phase], d)
			p.mu.Unlock()
			if r.Err != nil {
				p.failMu.Lock()
				p.failed = append(p.failed, fmt.Sprintf("%s: %v", v, r.Err))
				p.failMu.Unlock()
				continue
			}
			p.add(tp{topic, 0}, r.Record.Offset, v)
		}
	}()
	return p
}

func (p *latencyProbe) setPhase(name string) {
	p.mu.Lock()
	p.phase = name
	p.mu.Unlock()
}

// latencies returns the samples of phase, counting a produce of that phase
// still in flight with its latency so far (a stalled produce must count).
func (p *latencyProbe) latencies(phase string) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := slices.Clone(p.samples[phase])
	if !p.inFlight.IsZero() && p.inPhase == phase {
		out = append(out, time.Since(p.inFlight))
	}
	slices.Sort(out)
	return out
}

func (p *latencyProbe) stop(ctx context.Context) {
	GinkgoHelper()
	p.stopped.Store(true)
	Eventually(p.done).WithContext(ctx).WithTimeout(2 * time.Minute).Should(BeClosed())
}

// ---------------------------------------------------------------------------
// The broker process

// procStats reads VmRSS (bytes) and the open fd count of pid.
func procStats(pid int) (rss int64, fds int, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, perr := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if perr != nil {
				return 0, 0, fmt.Errorf("VmRSS %q: %w", v, perr)
			}
			rss = kb << 10
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, err
	}
	return rss, len(ents), nil
}

// cpuTime is the user+system CPU time pid has used (clock ticks of 10 ms).
func cpuTime(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields after it.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// peakSampler records the highest RSS and fd count of pid, every 50 ms.
type peakSampler struct {
	pid      int
	mu       sync.Mutex
	rss      int64
	fds      int
	stopOnce sync.Once
	quit     chan struct{}
	done     chan struct{}
}

func samplePeaks(pid int) *peakSampler {
	s := &peakSampler{pid: pid, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *peakSampler) sample() {
	rss, fds, err := procStats(s.pid)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.rss, s.fds = max(s.rss, rss), max(s.fds, fds)
	s.mu.Unlock()
}

// stop ends sampling and returns the peaks.
func (s *peakSampler) stop() (rss int64, fds int) {
	s.stopOnce.Do(func() { close(s.quit) })
	<-s.done
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rss, s.fds
}

// ---------------------------------------------------------------------------
// Good consumer: reads the attacked topics from the start the whole time;
// a franz-go consumer surfaces corrupt batches as fetch errors.

type goodConsumer struct {
	mu      sync.Mutex
	errs    []string
	records atomic.Int64
	done    chan struct{}
}

func startGoodConsumer(ctx context.Context, b *Broker, topics []string, partitions int32) *goodConsumer {
	GinkgoHelper()
	g := &goodConsumer{done: make(chan struct{})}
	cl := NewClient(b, kgo.ConsumePartitions(fromStart(topics, partitions)),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.MaxDecompressBatchBytes(64<<20))
	go func() {
		defer close(g.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(t string, p int32, err error) {
				if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
					return
				}
				g.mu.Lock()
				if len(g.errs) < 50 {
					g.errs = append(g.errs, fmt.Sprintf("%s/%d: %v", t, p, err))
				}
				g.mu.Unlock()
			})
			g.records.Add(int64(fs.NumRecords()))
		}
	}()
	return g
}

func (g *goodConsumer) errors() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.errs)
}

// ---------------------------------------------------------------------------
// Strict read-back: every stored batch must decode with franz-go and have
// exactly the records its header announces, at contiguous offsets.

// readBackStrict fetches partition of topic from 0 to its high watermark
// with raw Fetch requests and strict-decodes every batch.
func readBackStrict(addr, topic string, partition int32, within time.Duration) (batchesEnd int64, problems []string, err error) {
	c, err := dialHostile(addr, "127.0.0.1")
	if err != nil {
		return 0, nil, err
	}
	defer c.close()
	deadline := time.Now().Add(within)
	var offset int64
	for time.Now().Before(deadline) {
		req := fetchRequest(topic, partition, offset, 1, 0)
		req.MaxBytes = 8 << 20
		req.Topics[0].Partitions[0].PartitionMaxBytes = 4 << 20
		if err := c.send(req); err != nil {
			return offset, problems, err
		}
		resp, err := c.read(req, 30*time.Second)
		if err != nil {
			return offset, problems, err
		}
		fr := resp.(*kmsg.FetchResponse)
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
			return offset, problems, fmt.Errorf("fetch %s/%d: %d topics", topic, partition, len(fr.Topics))
		}
		rp := &fr.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 {
			return offset, problems, fmt.Errorf("fetch %s/%d at %d: error code %d", topic, partition, offset, rp.ErrorCode)
		}
		next, ps := recordstest.StrictDecode(topic, rp, offset, 64<<20)
		problems = append(problems, ps...)
		if next >= rp.HighWatermark {
			return next, problems, nil
		}
		if next == offset {
			return offset, append(problems, fmt.Sprintf("%s/%d: no progress at offset %d (hwm %d)", topic, partition, offset, rp.HighWatermark)), nil
		}
		offset = next
	}
	return offset, problems, fmt.Errorf("read-back of %s/%d did not finish within %v", topic, partition, within)
}
