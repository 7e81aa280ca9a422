package specs

// Spec 5: a full data volume. The data lives on a small tmpfs, the control
// plane (--cluster-dir: heartbeats, assignment, group coordinator shards) on
// another filesystem. Filling the data volume makes produce fail with the
// retriable KAFKA_STORAGE_ERROR and a message naming the full volume, while
// fetch, offset commits and fetches, metadata and the broker's heartbeat go
// on; once space is freed, produce works again without a restart, and every
// acknowledged record is readable exactly once.
//
//	go test ./specs/ -count=1 -ginkgo.label-filter=fullvolume -ginkgo.v
//
// It mounts a tmpfs, so it needs root (it skips otherwise).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fvProduceResult is the answer to one raw produce of one batch.
type fvProduceResult struct {
	code   int16
	msg    string
	offset int64
}

// fvProduce sends one single-record batch to partition 0 of topic with
// acks=all and returns the partition's answer; err is a transport error.
func fvProduce(ctx context.Context, cl *kgo.Client, topic, value string) (fvProduceResult, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = foRawBatch(value)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := req.RequestWith(rctx, cl)
	if err != nil {
		return fvProduceResult{}, err
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return fvProduceResult{}, fmt.Errorf("malformed produce response: %+v", r)
	}
	p := r.Topics[0].Partitions[0]
	res := fvProduceResult{code: p.ErrorCode, offset: p.BaseOffset}
	if p.ErrorMessage != nil {
		res.msg = *p.ErrorMessage
	}
	return res, nil
}

// fvFetchAll reads partition 0 of topic from offset 0 to end with raw
// fetches and returns the values by offset and the latency of each fetch.
func fvFetchAll(ctx context.Context, cl *kgo.Client, topic string, topicID [16]byte, end int64) (map[int64]string, []time.Duration, error) {
	got := map[int64]string{}
	var lat []time.Duration
	for off := int64(0); off < end; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 0
		req.MaxBytes = 4 << 20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = 0
		rp.FetchOffset = off
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := req.RequestWith(rctx, cl)
		cancel()
		if err != nil {
			return got, lat, err
		}
		lat = append(lat, time.Since(start))
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return got, lat, fmt.Errorf("malformed fetch response")
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return got, lat, fmt.Errorf("fetch at %d: %w", off, err)
		}
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: 0, KeepControlRecords: true}, &p, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			return got, lat, fmt.Errorf("decode fetch at %d: %w", off, fp.Err)
		}
		if len(fp.Records) == 0 {
			return got, lat, fmt.Errorf("fetch at %d (high watermark %d) returned nothing", off, p.HighWatermark)
		}
		for _, r := range fp.Records {
			if _, dup := got[r.Offset]; dup {
				return got, lat, fmt.Errorf("offset %d returned twice", r.Offset)
			}
			if r.Offset >= off {
				got[r.Offset] = string(r.Value)
				off = r.Offset + 1
			}
		}
	}
	return got, lat, nil
}

// fvFree is the space left on the filesystem holding dir.
func fvFree(dir string) int64 {
	var st syscall.Statfs_t
	Expect(syscall.Statfs(dir, &st)).To(Succeed())
	return int64(st.Bavail) * st.Bsize
}

// fvWriteFiller writes a file of n bytes (n rounded down to MiB) at name.
func fvWriteFiller(name string, n int64) {
	f, err := os.Create(name)
	Expect(err).NotTo(HaveOccurred())
	buf := make([]byte, 1<<20)
	for i := int64(0); i < n>>20; i++ {
		_, err := f.Write(buf)
		Expect(err).NotTo(HaveOccurred(), "writing the filler")
	}
	Expect(f.Sync()).To(Succeed())
	Expect(f.Close()).To(Succeed())
}

func fvErrName(code int16) string {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return fmt.Sprint(code)
}

var _ = Describe("Spec 5: a full data volume", Label("fullvolume", "privileged"), func() {
	It("refuses produce with a retriable error while fetch, commits and heartbeats go on, and resumes once space is freed", func(ctx SpecContext) {
		if os.Geteuid() != 0 {
			Skip("mounting a size-limited tmpfs needs root")
		}
		mnt := GinkgoT().TempDir()
		if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=48m,mode=0755"); err != nil {
			Skip(fmt.Sprintf("cannot mount a tmpfs at %s (%v): this spec needs root and mount permission", mnt, err))
		}
		// Registered before the broker's cleanup, so it runs after the
		// broker has stopped (cleanups run last-in first-out).
		DeferCleanup(func() {
			if err := syscall.Unmount(mnt, 0); err != nil {
				_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
			}
		})
		dataDir := filepath.Join(mnt, "data")
		clusterDir := filepath.Join(GinkgoT().TempDir(), "cluster")
		Expect(os.MkdirAll(clusterDir, 0o755)).To(Succeed())

		b := StartBroker(dataDir, WithBrokerArgs("--cluster-dir", clusterDir))
		cl := NewClient(b)
		adm := kadm.NewClient(cl)
		topic := UniqueName("full")
		segBytes := "1048576"
		createTopicWithConfigs(ctx, adm, topic, 1, map[string]*string{"segment.bytes": &segBytes})
		group := UniqueName("full-group")
		md0, err := adm.Metadata(ctx, topic)
		Expect(err).NotTo(HaveOccurred())
		topicID := md0.Topics[topic].ID

		// Warm up: the group's coordinator shard (on the cluster dir) loads.
		Eventually(func(g Gomega) {
			resp, err := adm.CommitOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: -1}))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resp.Error()).NotTo(HaveOccurred())
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())

		By("filling the data volume with a filler file, leaving about 8 MiB")
		filler := filepath.Join(mnt, "filler")
		fvWriteFiller(filler, fvFree(mnt)-8<<20)
		fmt.Fprintf(GinkgoWriter, "free on the data volume after the filler: %d bytes\n", fvFree(mnt))

		By("producing 64 KiB records until the volume is full")
		pad := strings.Repeat("x", 64<<10)
		acked := map[string]int64{} // value -> offset
		var refused []string
		var firstErr fvProduceResult
		fillStart := time.Now()
		for i := 0; ; i++ {
			Expect(i).To(BeNumerically("<", 1000), "the volume never filled")
			v := fmt.Sprintf("ok-%05d-%s", i, pad)
			res, err := fvProduce(ctx, cl, topic, v)
			Expect(err).NotTo(HaveOccurred())
			if res.code == 0 {
				acked[v] = res.offset
				continue
			}
			firstErr = res
			refused = append(refused, v)
			break
		}
		fillTime := time.Since(fillStart)
		Expect(firstErr.code).To(Equal(kerr.KafkaStorageError.Code), "first produce error: %s %q", fvErrName(firstErr.code), firstErr.msg)
		Expect(kerr.IsRetriable(kerr.ErrorForCode(firstErr.code))).To(BeTrue())
		Expect(firstErr.msg).To(ContainSubstring("no space left"), "the error message names the full volume")
		fmt.Fprintf(GinkgoWriter, "volume full after %d acknowledged records (%v): %s: %s\n", len(acked), fillTime, fvErrName(firstErr.code), firstErr.msg)
		Expect(len(acked)).To(BeNumerically(">", 16), "records acknowledged before the volume filled")

		By("while full: produce keeps failing with KAFKA_STORAGE_ERROR")
		for i := range 5 {
			v := fmt.Sprintf("refused-%d-%s", i, pad)
			res, err := fvProduce(ctx, cl, topic, v)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.code).To(Equal(kerr.KafkaStorageError.Code), "%s %q", fvErrName(res.code), res.msg)
			refused = append(refused, v)
		}

		By("while full: every acknowledged record is fetched")
		var end int64
		for _, o := range acked {
			end = max(end, o+1)
		}
		fullFetchStart := time.Now()
		got, lat, err := fvFetchAll(ctx, cl, topic, topicID, end)
		fullFetchTime := time.Since(fullFetchStart)
		Expect(err).NotTo(HaveOccurred())
		for v, o := range acked {
			Expect(got[o]).To(Equal(v), "acknowledged record at offset %d", o)
		}
		slices.Sort(lat)

		By("while full: a group commits offsets and fetches them back (coordinator on the cluster dir)")
		commitStart := time.Now()
		resp, err := adm.CommitOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: end - 1}))
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Error()).NotTo(HaveOccurred())
		commitTime := time.Since(commitStart)
		fetched, err := adm.FetchOffsets(ctx, group)
		Expect(err).NotTo(HaveOccurred())
		o, ok := fetched.Lookup(topic, 0)
		Expect(ok).To(BeTrue())
		Expect(o.Err).NotTo(HaveOccurred())
		Expect(o.At).To(Equal(end))

		By("while full: metadata, DescribeCluster and the heartbeat go on, and the broker keeps the partition")
		hbPath := filepath.Join(clusterDir, "brokers", fmt.Sprintf("%d.json", b.ID))
		hb0, err := os.ReadFile(hbPath)
		Expect(err).NotTo(HaveOccurred(), "heartbeat file on the cluster dir")
		Eventually(func(g Gomega) {
			hb, err := os.ReadFile(hbPath)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(hb).NotTo(Equal(hb0), "the heartbeat advances")
		}).WithContext(ctx).WithTimeout(15 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		md, err := adm.Metadata(ctx, topic)
		Expect(err).NotTo(HaveOccurred())
		Expect(md.Topics[topic].Err).NotTo(HaveOccurred())
		Expect(md.Topics[topic].Partitions[0].Leader).To(Equal(int32(b.ID)))
		dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
		Expect(err).NotTo(HaveOccurred())
		Expect(dc.ErrorCode).To(BeZero())
		Expect(dc.Brokers).To(HaveLen(1))
		res, err := fvProduce(ctx, cl, topic, "refused-after-heartbeat-"+pad)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.code).To(Equal(kerr.KafkaStorageError.Code), "still the storage error, not a leadership change: %s", fvErrName(res.code))
		refused = append(refused, "refused-after-heartbeat-"+pad)
		Expect(b.Running()).To(BeTrue())

		By("freeing space: produce resumes without a restart")
		Expect(os.Remove(filler)).To(Succeed())
		freed := time.Now()
		failedAfterFree := 0
		var resumeAfter time.Duration
		for i := 0; ; i++ {
			Expect(time.Since(freed)).To(BeNumerically("<", 15*time.Second), "produce did not resume")
			v := fmt.Sprintf("after-%05d-%s", i, pad)
			res, err := fvProduce(ctx, cl, topic, v)
			Expect(err).NotTo(HaveOccurred())
			if res.code == 0 {
				acked[v] = res.offset
				resumeAfter = time.Since(freed)
				break
			}
			failedAfterFree++
			refused = append(refused, v)
			time.Sleep(20 * time.Millisecond)
		}
		for i := range 20 {
			v := fmt.Sprintf("more-%05d-%s", i, pad)
			res, err := fvProduce(ctx, cl, topic, v)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.code).To(BeZero(), "%s %q", fvErrName(res.code), res.msg)
			acked[v] = res.offset
		}

		By("every acknowledged record is readable exactly once, and no refused one is")
		end = 0
		for _, o := range acked {
			end = max(end, o+1)
		}
		got, _, err = fvFetchAll(ctx, cl, topic, topicID, end)
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(HaveLen(len(acked)), "records in the log vs acknowledged")
		seen := map[string]int{}
		for _, v := range got {
			seen[v]++
		}
		for v, o := range acked {
			Expect(got[o]).To(Equal(v), "acknowledged record at offset %d", o)
			Expect(seen[v]).To(Equal(1))
		}
		for _, v := range refused {
			Expect(seen[v]).To(BeZero(), "a refused record is in the log: %.20s", v)
		}

		failedProduces := len(refused)
		report := fmt.Sprintf("acknowledged before full: %d records of 64 KiB in %v; failed produces: %d (%d after space was freed); "+
			"time from freeing space to the first acknowledged produce: %v; fetch latency while full over %d fetches: p50 %v max %v "+
			"(all %d records in %v); offset commit while full: %v; first error: %s %q",
			len(acked)-21, fillTime.Round(time.Millisecond), failedProduces, failedAfterFree,
			resumeAfter.Round(time.Millisecond), len(lat), lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond),
			len(got), fullFetchTime.Round(time.Millisecond), commitTime.Round(time.Microsecond), fvErrName(firstErr.code), firstErr.msg)
		fmt.Fprintln(GinkgoWriter, report)
		AddReportEntry("full data volume", report)
		AddReportEntry("time from freeing space to the first successful produce", resumeAfter)
		AddReportEntry("failed produces", failedProduces)
		AddReportEntry("fetch latency while full (max)", lat[len(lat)-1])
	})
})
