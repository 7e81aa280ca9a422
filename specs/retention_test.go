package specs

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// dirUsage is what a partition directory holds on disk.
type dirUsage struct {
	files      int   // segment (.log) files
	sizeBytes  int64 // sum of every file's size (os.Stat)
	blockBytes int64 // sum of every file's allocated blocks (du)
}

func (u dirUsage) String() string {
	return fmt.Sprintf("%d segments, %d KiB (size), %d KiB (blocks)", u.files, u.sizeBytes>>10, u.blockBytes>>10)
}

// measureDir sums the files of dir by size and by allocated blocks.
func measureDir(dir string) dirUsage {
	GinkgoHelper()
	ents, err := os.ReadDir(dir)
	Expect(err).NotTo(HaveOccurred())
	var u dirUsage
	for _, e := range ents {
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil || fi.IsDir() {
			continue // removed meanwhile
		}
		if strings.HasSuffix(e.Name(), ".log") {
			u.files++
		}
		u.sizeBytes += fi.Size()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			u.blockBytes += st.Blocks * 512
		}
	}
	return u
}

// deletedButOpen lists the files under dir the process pid holds open
// although they were deleted (their space is not freed until closed).
func deletedButOpen(pid int, dir string) []string {
	GinkgoHelper()
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(fdDir)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if strings.HasPrefix(target, dir) && strings.HasSuffix(target, " (deleted)") {
			out = append(out, target)
		}
	}
	return out
}

// randomValue returns n random (incompressible) bytes.
func randomValue(n int) []byte {
	b := make([]byte, n)
	_, _ = crand.Read(b)
	return b
}

// rawFetchCode fetches one partition from offset with a raw Fetch request
// and returns the partition's error code.
func rawFetchCode(ctx context.Context, cl *kgo.Client, topic string, topicID [16]byte, offset int64) int16 {
	GinkgoHelper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = 0
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.ErrorCode).To(BeZero())
	Expect(resp.Topics).To(HaveLen(1))
	Expect(resp.Topics[0].Partitions).To(HaveLen(1))
	return resp.Topics[0].Partitions[0].ErrorCode
}

var _ = Describe("Retention", Label("retention"), func() {
	It("Retention by time and by size frees the bytes on disk while a consumer is reading", func(ctx SpecContext) {
		const (
			segmentBytes   = 64 << 10
			retentionBytes = 256 << 10
			recordBytes    = 1 << 10
			total          = 16 * retentionBytes / recordBytes // records: 16x the retention
			perTick        = 8                                 // records every 20ms: 400 KiB/s
		)
		dir := GinkgoT().TempDir()
		b := StartBroker(dir, WithBrokerArgs("--retention-check-interval", "1s"))
		adm := NewAdmin(b)
		str := func(s string) *string { return &s }

		// --- by size -------------------------------------------------------
		sized := UniqueName("ret-size")
		createTopicWithConfigs(ctx, adm, sized, 1, map[string]*string{
			"segment.bytes":   str(fmt.Sprint(segmentBytes)),
			"retention.bytes": str(fmt.Sprint(retentionBytes)),
		})
		partDir := filepath.Join(dir, "topics", sized, "0")
		Expect(partDir).To(BeADirectory())

		By(fmt.Sprintf("producing %d KiB steadily (16x retention.bytes) while a consumer reads from the start", total*recordBytes>>10))
		// Uncompressed random values: what is produced is what lands on disk.
		prod := NewClient(b, kgo.DefaultProduceTopic(sized), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
		var produced atomic.Int64
		prodDone := make(chan error, 1)
		go func() {
			defer GinkgoRecover()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for sent := 0; sent < total; {
				select {
				case <-ctx.Done():
					prodDone <- ctx.Err()
					return
				case <-tick.C:
				}
				recs := make([]*kgo.Record, 0, perTick)
				for i := 0; i < perTick && sent < total; i++ {
					recs = append(recs, &kgo.Record{Value: randomValue(recordBytes)})
					sent++
				}
				if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					prodDone <- err
					return
				}
				produced.Add(int64(len(recs)))
			}
			prodDone <- nil
		}()

		cons := NewClient(b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{sized: {0: kgo.NewOffset().AtStart()}}),
			kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		var consumed, lastOffset atomic.Int64
		lastOffset.Store(-1)
		consCtx, stopConsumer := context.WithCancel(ctx)
		var consWG sync.WaitGroup
		consWG.Add(1)
		go func() {
			defer GinkgoRecover()
			defer consWG.Done()
			for consCtx.Err() == nil {
				fs := cons.PollFetches(consCtx)
				fs.EachRecord(func(r *kgo.Record) {
					consumed.Add(1)
					lastOffset.Store(r.Offset)
				})
			}
		}()
		DeferCleanup(func() { stopConsumer(); consWG.Wait() })

		var maxUsage dirUsage
		samples := 0
		sample := func() {
			u := measureDir(partDir)
			if u.sizeBytes > maxUsage.sizeBytes {
				maxUsage = u
			}
			Expect(deletedButOpen(b.Pid(), partDir)).To(BeEmpty(), "the broker holds deleted segment files open: their space is not freed")
			samples++
		}
		// While producing: the directory stays bounded by retention.bytes,
		// the active segment, and what one or two check intervals add.
		// (Two seconds of production: a pass every second, and a segment
		// is deletable only once rolled.)
		bound := int64(retentionBytes + 2*segmentBytes + 2*1000/20*perTick*recordBytes)
	producing:
		for {
			select {
			case err := <-prodDone:
				Expect(err).NotTo(HaveOccurred())
				break producing
			case <-time.After(100 * time.Millisecond):
				sample()
				Expect(maxUsage.sizeBytes).To(BeNumerically("<=", bound), "partition directory grew to %v (bound %d KiB) after %d KiB produced",
					maxUsage, bound>>10, produced.Load()*recordBytes>>10)
			}
		}
		Expect(produced.Load()).To(BeEquivalentTo(total))
		GinkgoWriter.Printf("produced %d KiB; largest directory seen %v over %d samples\n", total*recordBytes>>10, maxUsage, samples)

		By("waiting for the consumer to reach the end, and retention to settle")
		Eventually(func() int64 { return lastOffset.Load() }).WithContext(ctx).WithTimeout(20*time.Second).
			Should(BeEquivalentTo(total-1), "the consumer reads up to the last record")
		Expect(consumed.Load()).To(BeNumerically(">", 0))
		Eventually(func(g Gomega) {
			u := measureDir(partDir)
			g.Expect(u.sizeBytes).To(BeNumerically("<=", retentionBytes+3*segmentBytes), "%v", u)
			g.Expect(u.blockBytes).To(BeNumerically("<=", retentionBytes+4*segmentBytes), "%v", u)
			g.Expect(deletedButOpen(b.Pid(), partDir)).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		// The log start moves with the passes (one a second), so it is
		// polled too: the last pass may have run before the last roll.
		var start kadm.ListedOffset
		Eventually(func(g Gomega) {
			starts, err := adm.ListStartOffsets(ctx, sized)
			g.Expect(err).NotTo(HaveOccurred())
			var ok bool
			start, ok = starts.Lookup(sized, 0)
			g.Expect(ok).To(BeTrue())
			g.Expect(start.Err).NotTo(HaveOccurred())
			g.Expect(start.Offset).To(BeNumerically(">", int64(total-(retentionBytes+2*segmentBytes)/recordBytes)), "log start after retention by size")
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		GinkgoWriter.Printf("by size: log start %d of %d records; directory %v\n", start.Offset, total, measureDir(partDir))

		// --- by time -------------------------------------------------------
		timed := UniqueName("ret-time")
		createTopicWithConfigs(ctx, adm, timed, 1, map[string]*string{
			"segment.bytes": str(fmt.Sprint(segmentBytes)),
			"retention.ms":  str("2000"),
		})
		timedDir := filepath.Join(dir, "topics", timed, "0")
		By("producing 256 KiB to a topic with retention.ms=2000, then nothing")
		tprod := NewClient(b, kgo.DefaultProduceTopic(timed), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
		const timedRecords = retentionBytes / recordBytes
		for i := 0; i < timedRecords; i += 32 {
			recs := make([]*kgo.Record, 0, 32)
			for j := 0; j < 32; j++ {
				recs = append(recs, &kgo.Record{Value: randomValue(recordBytes)})
			}
			Expect(tprod.ProduceSync(ctx, recs...).FirstErr()).To(Succeed())
		}
		Expect(measureDir(timedDir).files).To(BeNumerically(">=", 4), "several segments before retention")

		By("waiting for the log start to reach the log end and every segment file to go")
		Eventually(func(g Gomega) {
			starts, err := adm.ListStartOffsets(ctx, timed)
			g.Expect(err).NotTo(HaveOccurred())
			s, ok := starts.Lookup(timed, 0)
			g.Expect(ok).To(BeTrue())
			g.Expect(s.Err).NotTo(HaveOccurred())
			g.Expect(s.Offset).To(BeEquivalentTo(timedRecords))
			u := measureDir(timedDir)
			g.Expect(u.files).To(Equal(1), "only the new, empty active segment: %v", u)
			g.Expect(u.blockBytes).To(BeNumerically("<", 64<<10), "%v", u)
			g.Expect(deletedButOpen(b.Pid(), timedDir)).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(15 * time.Second).Should(Succeed())
		ends, err := adm.ListEndOffsets(ctx, timed)
		Expect(err).NotTo(HaveOccurred())
		end, _ := ends.Lookup(timed, 0)
		Expect(end.Offset).To(BeEquivalentTo(timedRecords))

		By("fetching below the new log start: OFFSET_OUT_OF_RANGE")
		md, err := adm.Metadata(ctx, timed)
		Expect(err).NotTo(HaveOccurred())
		Expect(rawFetchCode(ctx, NewClient(b), timed, md.Topics[timed].ID, 0)).To(BeEquivalentTo(1), "OFFSET_OUT_OF_RANGE")
		Expect(rawFetchCode(ctx, NewClient(b), timed, md.Topics[timed].ID, timedRecords)).To(BeZero(), "fetching at the log start works")
	}, NodeTimeout(90*time.Second))
})
