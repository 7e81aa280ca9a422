package specs

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kgo"
)

// sentRecord is what a producer handed to a client, kept to compare with what comes back.
type sentRecord struct {
	Key, Value []byte
	Headers    []kgo.RecordHeader
}

func headersString(hs []kgo.RecordHeader) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = fmt.Sprintf("%s=%q", h.Key, h.Value)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func sameHeaders(a, b []kgo.RecordHeader) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// consumeAll reads every partition of topic from the start with direct partition
// assignment until want[p] records have arrived on each partition p. It fails the spec
// on any fetch error.
func consumeAll(ctx context.Context, b *Broker, topic string, want map[int32]int) map[int32][]*kgo.Record {
	GinkgoHelper()
	offsets := map[int32]kgo.Offset{}
	for p := range want {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl := NewClient(b,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	got := map[int32][]*kgo.Record{}
	remaining := 0
	for _, n := range want {
		remaining += n
	}
	for remaining > 0 {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			Fail(fmt.Sprintf("consume interrupted with %d records still missing: %v", remaining, ctx.Err()))
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
			n++
		})
		if n == 0 {
			counts := map[int32]int{}
			for p, rs := range got {
				counts[p] = len(rs)
			}
			Fail(fmt.Sprintf("no records arrived for 30s; have per partition %v, want %v", counts, want))
		}
		remaining -= n
	}
	return got
}

// compareRecords checks that got holds exactly want in order, at offsets 0..n-1.
// It returns at most 20 human-readable problems.
func compareRecords(want map[int32][]sentRecord, got map[int32][]*kgo.Record) []string {
	var problems []string
	add := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	for p, ws := range want {
		gs := got[p]
		if len(gs) != len(ws) {
			add("partition %d: got %d records, want %d", p, len(gs), len(ws))
		}
		for i := 0; i < len(ws) && i < len(gs); i++ {
			w, g := ws[i], gs[i]
			if g.Offset != int64(i) {
				add("partition %d record #%d: offset %d, want %d", p, i, g.Offset, i)
			}
			if !bytes.Equal(g.Key, w.Key) {
				add("partition %d offset %d: key %q, want %q", p, g.Offset, g.Key, w.Key)
			}
			if !bytes.Equal(g.Value, w.Value) {
				add("partition %d offset %d: value %.60q (len %d), want %.60q (len %d)", p, g.Offset, g.Value, len(g.Value), w.Value, len(w.Value))
			}
			if !sameHeaders(g.Headers, w.Headers) {
				add("partition %d offset %d: headers %s, want %s", p, g.Offset, headersString(g.Headers), headersString(w.Headers))
			}
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			add("records arrived on unexpected partition %d", p)
		}
	}
	return problems
}

var _ = Describe("franz-go round trip", Label("clients"), func() {
	It("produces 100,000 keyed records with headers to 8 partitions and reads them back exactly, in order", func(ctx SpecContext) {
		const (
			total      = 100_000
			partitions = 8
		)
		b := StartBroker(GinkgoT().TempDir())
		adm := NewAdmin(b)
		topic := UniqueName("franz")
		CreateTopic(ctx, adm, topic, partitions)

		By("producing 100,000 records with explicit partitions, acks=all, idempotent")
		prod := NewClient(b,
			kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()),
		)
		want := map[int32][]sentRecord{}
		ackOffsets := map[int32][]int64{}
		var (
			mu      sync.Mutex
			errs    []string
			errored int
		)
		for i := range total {
			p := int32(i % partitions)
			idx := len(want[p])
			value := fmt.Appendf(nil, "value-%06d-p%d", i, p)
			if i%997 == 0 { // a few bigger values
				value = append(value, bytes.Repeat([]byte{byte('a' + i%26)}, 8<<10)...)
			}
			rec := sentRecord{
				Key:   fmt.Appendf(nil, "key-%06d", i),
				Value: value,
				Headers: []kgo.RecordHeader{
					{Key: "seq", Value: fmt.Appendf(nil, "%d", i)},
					{Key: "partition", Value: fmt.Appendf(nil, "%d", p)},
					{Key: "empty", Value: []byte{}},
				},
			}
			want[p] = append(want[p], rec)
			mu.Lock()
			ackOffsets[p] = append(ackOffsets[p], -1)
			mu.Unlock()
			r := &kgo.Record{Partition: p, Key: rec.Key, Value: rec.Value, Headers: rec.Headers}
			prod.Produce(ctx, r, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errored++
					if len(errs) < 10 {
						errs = append(errs, fmt.Sprintf("partition %d #%d: %v", p, idx, err))
					}
					return
				}
				ackOffsets[p][idx] = r.Offset
			})
		}
		Expect(prod.Flush(ctx)).To(Succeed())
		mu.Lock()
		Expect(errs).To(BeEmpty(), "%d produce errors", errored)
		var badAcks []string
		for p, offs := range ackOffsets {
			for i, o := range offs {
				if o != int64(i) && len(badAcks) < 20 {
					badAcks = append(badAcks, fmt.Sprintf("partition %d: record #%d acknowledged at offset %d, want %d", p, i, o, i))
				}
			}
		}
		mu.Unlock()
		Expect(badAcks).To(BeEmpty(), "acknowledged offsets must be contiguous from 0 in produce order")

		By("checking start and end offsets with ListOffsets")
		starts, err := adm.ListStartOffsets(ctx, topic)
		Expect(err).NotTo(HaveOccurred())
		Expect(starts.Error()).NotTo(HaveOccurred())
		ends, err := adm.ListEndOffsets(ctx, topic)
		Expect(err).NotTo(HaveOccurred())
		Expect(ends.Error()).NotTo(HaveOccurred())
		for p := range int32(partitions) {
			s, ok := starts.Lookup(topic, p)
			Expect(ok).To(BeTrue(), "start offset of partition %d", p)
			Expect(s.Offset).To(BeEquivalentTo(0), "start offset of partition %d", p)
			e, ok := ends.Lookup(topic, p)
			Expect(ok).To(BeTrue(), "end offset of partition %d", p)
			Expect(e.Offset).To(BeEquivalentTo(len(want[p])), "end offset of partition %d", p)
		}

		By("consuming every partition from the start with direct assignment")
		counts := map[int32]int{}
		for p, ws := range want {
			counts[p] = len(ws)
		}
		got := consumeAll(ctx, b, topic, counts)
		Expect(compareRecords(want, got)).To(BeEmpty())
	}, SpecTimeout(5*time.Minute))
})
