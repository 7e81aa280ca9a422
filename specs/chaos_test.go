package specs

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kgo"
)

// chaosValue is the payload for a unique key: the key itself, a separator and padding
// derived from it, so that a torn or mixed-up record is recognisable.
func chaosValue(key string) []byte {
	v := make([]byte, 0, len(key)+1+96)
	v = append(v, key...)
	v = append(v, '|')
	for i := range 96 {
		v = append(v, 'a'+byte((int(key[len(key)-1])+i)%26))
	}
	return v
}

// consumeUntil reads the given partitions of topic from the start with direct assignment
// until each partition p has delivered its record at offset ends[p]-1 (or has ends[p]==0).
// It fails on fetch errors or when nothing arrives for 30s.
func consumeUntil(ctx context.Context, b *Broker, topic string, ends map[int32]int64) map[int32][]*kgo.Record {
	GinkgoHelper()
	offsets := map[int32]kgo.Offset{}
	for p := range ends {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl := NewClient(b,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	got := map[int32][]*kgo.Record{}
	next := map[int32]int64{}
	done := func() bool {
		for p, e := range ends {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	for !done() {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			Fail(fmt.Sprintf("consume interrupted at %v of %v: %v", next, ends, ctx.Err()))
		}
		var errs []string
		fetches.EachError(func(t string, p int32, err error) {
			if err == context.DeadlineExceeded {
				return
			}
			errs = append(errs, fmt.Sprintf("%s/%d: %v", t, p, err))
		})
		Expect(errs).To(BeEmpty(), "fetch errors")
		n := 0
		fetches.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], r)
			next[r.Partition] = r.Offset + 1
			n++
		})
		if n == 0 {
			Fail(fmt.Sprintf("no records arrived for 30s; next offsets %v, end offsets %v", next, ends))
		}
	}
	return got
}

type chaosAck struct {
	Partition int32
	Offset    int64
}

type chaosSummary struct {
	Kills              int
	Producers          int
	Attempted          int64 // records handed to the clients
	Acknowledged       int   // promises that returned success
	FailedDeliveries   int   // promises that returned an error
	Consumed           int   // records read back
	Missing            int   // acknowledged but not read back
	Duplicates         int   // extra copies of a payload read back
	OffsetGaps         int   // breaks in per-partition offset contiguity
	Corrupt            int   // value does not match its key
	AckOffsetMismatch  int   // acknowledged at (p,o) but read back elsewhere
	UnackedButPresent  int   // read back though never acknowledged (allowed)
	StartOffsetNonZero int   // partitions whose log start offset is not 0
	EndOffsets         map[int32]int64
}

var _ = Describe("crash safety under idempotent produce load", Label("slow", "chaos"), func() {
	It("loses no acknowledged record and duplicates none across repeated kill -9", func(ctx SpecContext) {
		const (
			producers  = 4
			partitions = 4
			// A bound in count, well above what 20 cycles produce: a restart after
			// kill -9 waits one lease before serving (another process might hold
			// the broker ID), and the 2,000 records each client buffers meanwhile
			// count too, so a cycle takes about 3,000 records per producer.
			maxPerProducer = 200_000
			perTick        = 10  // records per producer every 10ms: at most 1,000/s per producer
			acksPerCycle   = 300 // new acks required between two kills
		)
		kills := 20
		if v, err := strconv.Atoi(os.Getenv("KAAS_CHAOS_KILLS")); err == nil && v > 0 {
			kills = v
		}

		b := StartBroker(GinkgoT().TempDir())
		topic := UniqueName("chaos")
		CreateTopic(ctx, NewAdmin(b), topic, partitions)

		var (
			mu        sync.Mutex
			acked     = map[string]chaosAck{}
			failed    int
			failErrs  []string
			attempted atomic.Int64
			ackedN    atomic.Int64
			finished  atomic.Int32
			stop      = make(chan struct{})
			wg        sync.WaitGroup
			clients   []*kgo.Client
		)
		DeferCleanup(wg.Wait) // runs last: after the clients are closed, no producer goroutine remains
		By(fmt.Sprintf("starting %d idempotent acks=all producers", producers))
		for id := range producers {
			cl := NewClient(b,
				kgo.DefaultProduceTopic(topic),
				kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.MaxBufferedRecords(2000),
				kgo.ProducerLinger(2*time.Millisecond),
				kgo.RecordDeliveryTimeout(3*time.Minute),
			)
			clients = append(clients, cl)
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				defer finished.Add(1)
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for seq := range maxPerProducer {
					if seq%perTick == 0 {
						select {
						case <-stop:
							return
						case <-tick.C:
						}
					}
					key := fmt.Sprintf("p%02d-s%08d", id, seq)
					attempted.Add(1)
					cl.Produce(ctx, &kgo.Record{Key: []byte(key), Value: chaosValue(key)}, func(r *kgo.Record, err error) {
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							failed++
							if len(failErrs) < 10 {
								failErrs = append(failErrs, fmt.Sprintf("%s: %v", key, err))
							}
							return
						}
						acked[key] = chaosAck{r.Partition, r.Offset}
						ackedN.Add(1)
					})
				}
			}()
		}
		stopProducers := sync.OnceFunc(func() { close(stop) })
		DeferCleanup(stopProducers)

		waitProgress := func(what string) {
			GinkgoHelper()
			base := ackedN.Load()
			Eventually(func() bool {
				return ackedN.Load() >= base+acksPerCycle || finished.Load() == producers
			}).WithContext(ctx).WithTimeout(60*time.Second).Should(BeTrue(),
				"%s: fewer than %d records acknowledged in 60s (acked so far %d)", what, acksPerCycle, ackedN.Load())
		}

		for i := 1; i <= kills; i++ {
			waitProgress(fmt.Sprintf("before kill #%d", i))
			// Let the load run a random while longer, so kills land at varied points.
			time.Sleep(time.Duration(200+rand.IntN(1000)) * time.Millisecond)
			Expect(finished.Load()).To(BeZero(), "the load ran out before kill #%d (maxPerProducer too small)", i)
			fmt.Fprintf(GinkgoWriter, "chaos: kill -9 #%d (pid %d) with %d acknowledged, %d attempted\n",
				i, b.Pid(), ackedN.Load(), attempted.Load())
			b.Kill9()
			time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
			start := time.Now()
			b.Restart()
			fmt.Fprintf(GinkgoWriter, "chaos: restart #%d ready in %v\n", i, time.Since(start))
		}
		waitProgress("after the last restart")

		By("stopping the load and flushing every producer")
		stopProducers()
		wg.Wait()
		for i, cl := range clients {
			fctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			err := cl.Flush(fctx)
			cancel()
			Expect(err).NotTo(HaveOccurred(), "producer %d did not finish delivering within 3 minutes", i)
		}

		By("reading every partition back from the start")
		adm := NewAdmin(b)
		startOffs, err := adm.ListStartOffsets(ctx, topic)
		Expect(err).NotTo(HaveOccurred())
		Expect(startOffs.Error()).NotTo(HaveOccurred())
		endOffs, err := adm.ListEndOffsets(ctx, topic)
		Expect(err).NotTo(HaveOccurred())
		Expect(endOffs.Error()).NotTo(HaveOccurred())

		mu.Lock()
		defer mu.Unlock()
		sum := chaosSummary{
			Kills: kills, Producers: producers, Attempted: attempted.Load(),
			Acknowledged: len(acked), FailedDeliveries: failed, EndOffsets: map[int32]int64{},
		}
		for p := range int32(partitions) {
			s, ok := startOffs.Lookup(topic, p)
			Expect(ok).To(BeTrue())
			if s.Offset != 0 {
				sum.StartOffsetNonZero++
			}
			e, ok := endOffs.Lookup(topic, p)
			Expect(ok).To(BeTrue())
			sum.EndOffsets[p] = e.Offset
		}
		got := consumeUntil(ctx, b, topic, sum.EndOffsets)

		var problems []string
		note := func(format string, args ...any) {
			if len(problems) < 30 {
				problems = append(problems, fmt.Sprintf(format, args...))
			}
		}
		seen := map[string][]chaosAck{}
		for p, recs := range got {
			want := int64(0)
			for _, r := range recs {
				sum.Consumed++
				if r.Offset != want {
					sum.OffsetGaps++
					note("partition %d: offset %d follows %d", p, r.Offset, want-1)
				}
				want = r.Offset + 1
				key := string(r.Key)
				if !bytes.Equal(r.Value, chaosValue(key)) {
					sum.Corrupt++
					note("partition %d offset %d: value %.40q does not match key %q", p, r.Offset, r.Value, key)
				}
				seen[key] = append(seen[key], chaosAck{p, r.Offset})
			}
			if e := sum.EndOffsets[p]; want != e {
				note("partition %d: last offset read %d, end offset %d", p, want-1, e)
			}
		}
		for key, at := range seen {
			if len(at) > 1 {
				sum.Duplicates += len(at) - 1
				note("duplicate %s at %v", key, at)
			}
			if _, ok := acked[key]; !ok {
				sum.UnackedButPresent++
			}
		}
		missingKeys := []string{}
		for key, a := range acked {
			at, ok := seen[key]
			if !ok {
				sum.Missing++
				missingKeys = append(missingKeys, fmt.Sprintf("%s@%d/%d", key, a.Partition, a.Offset))
				continue
			}
			if at[0] != a {
				sum.AckOffsetMismatch++
				note("%s acknowledged at partition %d offset %d but read back at %v", key, a.Partition, a.Offset, at)
			}
		}
		sort.Strings(missingKeys)
		for _, k := range missingKeys[:min(len(missingKeys), 20)] {
			note("missing acknowledged record %s", k)
		}

		fmt.Fprintf(GinkgoWriter, "chaos summary: %+v\n", sum)
		if len(failErrs) > 0 {
			fmt.Fprintf(GinkgoWriter, "chaos: first delivery errors: %v\n", failErrs)
		}
		AddReportEntry("chaos summary", sum)

		Expect(sum.Acknowledged).To(BeNumerically(">", 0), "nothing was acknowledged")
		Expect(sum.Missing).To(BeZero(), "acknowledged records missing: %v", problems)
		Expect(sum.Duplicates).To(BeZero(), "duplicates: %v", problems)
		Expect(sum.OffsetGaps).To(BeZero(), "offset gaps: %v", problems)
		Expect(sum.StartOffsetNonZero).To(BeZero(), "log start offsets: %v", startOffs)
		Expect(sum.Corrupt).To(BeZero(), "corrupt records: %v", problems)
		Expect(sum.AckOffsetMismatch).To(BeZero(), "records not at their acknowledged offset: %v", problems)
		Expect(sum.FailedDeliveries).To(BeZero(), "the idempotent producers gave up on records: %v", failErrs)
	}, SpecTimeout(15*time.Minute))
})
