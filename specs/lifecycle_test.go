package specs

// Topic lifecycle under crashes: topic-delete and directory-reclaim crashed
// at every step converge, a recreated topic shows nothing of its previous
// incarnation, and a delete waits out a segment held open on another NFS
// client (kaas-floorfs's silly rename) instead of logging and moving on.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// lifecycleArgs make a restarted broker take over quickly (one broker: the
// lease only delays its own restart).
var lifecycleArgs = []string{"--lease", "1s", "--heartbeat-interval", "100ms"}

// produceLifecycle produces the values to partition 0 of topic, acknowledged,
// with a client closed at once (a lingering client's metadata requests
// could auto-create a deleted topic).
func produceLifecycle(ctx context.Context, b *Broker, topic string, values []string) {
	GinkgoHelper()
	cl, err := kgo.NewClient(append(clientOpts(b), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()))...)
	Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)})
	}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	Expect(cl.ProduceSync(pctx, recs...).FirstErr()).To(Succeed(), "produce to %s", topic)
}

// readPartition0 reads partition 0 of topic from offset 0 until n records
// arrived, and returns them.
func readPartition0(ctx context.Context, b *Broker, topic string, n int) []*kgo.Record {
	GinkgoHelper()
	cl, err := kgo.NewClient(append(clientOpts(b),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))...)
	Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	var got []*kgo.Record
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for len(got) < n {
		fs := cl.PollFetches(rctx)
		Expect(rctx.Err()).NotTo(HaveOccurred(), "read %d of %d records of %s", len(got), n, topic)
		fs.EachError(func(t string, p int32, err error) {
			fmt.Fprintf(GinkgoWriter, "fetch %s/%d: %v\n", t, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	return got
}

// machineAt returns the status entry of kind for topic, or nil.
func machineAt(g Gomega, ctx SpecContext, dir, kind, topic string) *reconcileEntry {
	for _, e := range reconcileStatus(g, ctx, dir) {
		if e.Kind == kind && e.Object == topic {
			return &e
		}
	}
	return nil
}

// trashOf lists the trash entries of topic (any incarnation).
func trashOf(dir, topic string) []string {
	ents, _ := os.ReadDir(filepath.Join(dir, "trash"))
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), topic+"~") {
			out = append(out, e.Name())
		}
	}
	return out
}

// replaceDesired writes a new incarnation of topic into the desired state
// directly, temp file and rename, as an operator recreating its Topic
// resource (or a restored cluster directory) would: the old incarnation's
// directory is still on the volume, for directory-reclaim to clear.
func replaceDesired(dir, topic string) string {
	GinkgoHelper()
	id := uuid.NewString()
	b, err := json.Marshal(map[string]any{"name": topic, "id": id, "partitions": 1, "generation": 1})
	Expect(err).NotTo(HaveOccurred())
	p := filepath.Join(dir, "__cluster", "topics", topic+".json")
	tmp := p + ".spec-tmp"
	Expect(os.WriteFile(tmp, b, 0o644)).To(Succeed())
	Expect(os.Rename(tmp, p)).To(Succeed())
	return id
}

var _ = Describe("Topic lifecycle under crashes", Label("lifecycle"), func() {
	It("converges from a crash at every step of topic-delete and directory-reclaim; nothing of the old incarnation is readable through the new one", func(ctx SpecContext) {
		type step struct{ kind, state string }
		var steps []step
		for _, s := range []string{"released", "renamed", "purged", "deleted"} {
			steps = append(steps, step{"topic-delete", s})
		}
		for _, s := range []string{"released", "renamed", "reclaimed"} {
			steps = append(steps, step{"directory-reclaim", s})
		}
		dir := GinkgoT().TempDir()
		topics := make([]string, len(steps))
		for i, st := range steps {
			topics[i] = UniqueName(strings.ReplaceAll(st.kind+"-"+st.state, "directory-", ""))
		}
		armed := func(i int) []string {
			if i >= len(steps) {
				return lifecycleArgs
			}
			return append(append([]string{}, lifecycleArgs...), "--crash-at-step", steps[i].kind+":"+steps[i].state+":"+topics[i])
		}
		b := StartBroker(dir, WithBrokerArgs(armed(0)...))
		started := time.Now()
		for i, st := range steps {
			topic := topics[i]
			stepStart := time.Now()
			By(fmt.Sprintf("%s: incarnation 1 of %s, then a crash once %s is recorded", st.kind, topic, st.state))
			adm := NewAdmin(b)
			CreateTopic(ctx, adm, topic, 1)
			old := []string{"inc1-a", "inc1-b", "inc1-c"}
			produceLifecycle(ctx, b, topic, old)
			switch st.kind {
			case "topic-delete":
				adm.SetTimeoutMillis(200)
				_, _ = adm.DeleteTopic(ctx, topic) // the broker may die before it answers
			case "directory-reclaim":
				replaceDesired(dir, topic)
			}
			Expect(b.waitExit(30*time.Second)).To(BeTrue(), "the broker did not crash at %s %s; log tail:\n%s", st.kind, st.state, b.LogTail(4096))
			Expect(b.exitState().ExitCode()).To(Equal(2), "exit at the crash step")
			Expect(b.LogTail(8192)).To(ContainSubstring("crash at step: " + st.kind + " " + topic + " reached " + st.state))

			By("restarting (armed for the next step): the machine converges to its end")
			b.ExtraArgs = armed(i + 1)
			b.start()
			end := map[string]string{"topic-delete": "deleted", "directory-reclaim": "reclaimed"}[st.kind]
			Eventually(func(g Gomega) {
				e := machineAt(g, ctx, dir, st.kind, topic)
				g.Expect(e).NotTo(BeNil())
				g.Expect(e.State).To(Equal(end), "entry %v", e)
				g.Expect(e.LastError).To(BeEmpty())
			}).WithContext(ctx).WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

			By("incarnation 2 starts empty at offset 0")
			adm = NewAdmin(b)
			if st.kind == "topic-delete" {
				Eventually(func(g Gomega) {
					topics, err := adm.ListTopics(ctx)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(topics.Has(topic)).To(BeFalse())
				}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
				CreateTopic(ctx, adm, topic, 1)
			}
			fresh := []string{"inc2-x", "inc2-y"}
			produceLifecycle(ctx, b, topic, fresh)
			got := readPartition0(ctx, b, topic, len(fresh))
			Expect(got).To(HaveLen(len(fresh)))
			Expect(got[0].Offset).To(BeEquivalentTo(0), "the new incarnation's first offset")
			for j, r := range got {
				Expect(string(r.Value)).To(Equal(fresh[j]), "record at offset %d", r.Offset)
			}
			Expect(trashOf(dir, topic)).To(BeEmpty(), "the old incarnation's trash")
			AddReportEntry(fmt.Sprintf("%s crashed at %s", st.kind, st.state), time.Since(stepStart).Round(time.Millisecond).String())
		}
		AddReportEntry("all crash steps", time.Since(started).Round(time.Millisecond).String())
		out, err := Kaasctl(ctx, "reconcile-status", "--data", dir)
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("reconcile-status at the end", out)
	}, SpecTimeout(2*time.Minute))
})

var _ = Describe("Topic delete while another host holds a segment open", Label("lifecycle", "floor"), func() {
	It("keeps retrying the purge, with attempts and the last error in the status, and completes once the handle closes", func(ctx SpecContext) {
		floor := StartFloor(2)
		name := UniqueName("lifecycle")
		brokerDir, holderDir := filepath.Join(floor.Mounts[0], name), filepath.Join(floor.Mounts[1], name)
		Expect(os.MkdirAll(brokerDir, 0o755)).To(Succeed())
		b := StartBroker(brokerDir, WithBrokerArgs(lifecycleArgs...))
		adm := NewAdmin(b)
		topic := UniqueName("held")
		CreateTopic(ctx, adm, topic, 1)
		produceLifecycle(ctx, b, topic, []string{"a", "b", "c"})

		By("another host opens a segment of the topic, through its own mount")
		var seg string
		Eventually(func(g Gomega) {
			matches, err := filepath.Glob(filepath.Join(holderDir, "topics", topic, "0", "*.log"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(matches).NotTo(BeEmpty())
			seg = matches[0]
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		f, err := os.Open(seg)
		Expect(err).NotTo(HaveOccurred())
		holder := exec.Command("sleep", "120")
		holder.ExtraFiles = []*os.File{f} // fd 3 of the holder
		Expect(holder.Start()).To(Succeed())
		Expect(f.Close()).To(Succeed()) // only the holder has it open now
		holderDone := make(chan struct{})
		go func() { _ = holder.Wait(); close(holderDone) }()
		DeferCleanup(func() {
			_ = holder.Process.Kill()
			<-holderDone
		})

		By("deleting the topic: the purge fails and is re-driven, visibly")
		adm.SetTimeoutMillis(200)
		_, _ = adm.DeleteTopic(ctx, topic)
		var first *reconcileEntry
		Eventually(func(g Gomega) {
			e := machineAt(g, ctx, brokerDir, "topic-delete", topic)
			g.Expect(e).NotTo(BeNil())
			g.Expect(e.State).To(Equal("renamed"))
			g.Expect(e.Attempts).To(BeNumerically(">=", 2))
			g.Expect(fmt.Sprint(e.LastError)).To(And(ContainSubstring("purge"), ContainSubstring("directory not empty"), ContainSubstring(".nfs")))
			first = e
		}).WithContext(ctx).WithTimeout(15 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		AddReportEntry("status while the handle is open", first.String())
		Expect(floor.Status()).To(ContainSubstring(".nfs"), "floorfs lists the silly-renamed segment")
		Eventually(func(g Gomega) {
			e := machineAt(g, ctx, brokerDir, "topic-delete", topic)
			g.Expect(e).NotTo(BeNil())
			g.Expect(e.State).To(Equal("renamed"))
			g.Expect(e.Attempts).To(BeNumerically(">", first.Attempts), "attempts keep growing")
		}).WithContext(ctx).WithTimeout(15 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

		By("closing the handle: the delete completes within seconds")
		Expect(holder.Process.Kill()).To(Succeed())
		<-holderDone
		closed := time.Now()
		Eventually(func(g Gomega) {
			e := machineAt(g, ctx, brokerDir, "topic-delete", topic)
			g.Expect(e).NotTo(BeNil())
			g.Expect(e.State).To(Equal("deleted"))
			g.Expect(e.LastError).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(15 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		AddReportEntry("delete completed after the handle closed", time.Since(closed).Round(time.Millisecond).String())
		Expect(trashOf(filepath.Join(floor.Backing, name), topic)).To(BeEmpty())
		var st struct {
			Hidden []string `json:"hidden"`
		}
		Expect(json.Unmarshal([]byte(floor.Status()), &st)).To(Succeed())
		Expect(st.Hidden).To(BeEmpty())
	}, SpecTimeout(90*time.Second))
})
