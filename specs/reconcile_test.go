package specs

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// reconcileEntry is one row of `kaasctl reconcile-status -o json`.
type reconcileEntry struct {
	Kind      string `json:"kind"`
	Object    string `json:"object"`
	Desired   string `json:"desired"`
	State     string `json:"state"`
	Attempts  any    `json:"attempts"`
	LastError any    `json:"lastError"`
	Since     any    `json:"since"`
	Owner     any    `json:"owner"`
}

func (e reconcileEntry) String() string {
	return fmt.Sprintf("{kind=%s object=%s desired=%s state=%s attempts=%v lastError=%v}",
		e.Kind, e.Object, e.Desired, e.State, e.Attempts, e.LastError)
}

// reconcileStatus runs kaasctl reconcile-status against the data directory.
func reconcileStatus(g Gomega, ctx SpecContext, dir string) []reconcileEntry {
	out, err := Kaasctl(ctx, "reconcile-status", "--data", dir, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var entries []reconcileEntry
	g.Expect(json.Unmarshal([]byte(out), &entries)).To(Succeed(), "kaasctl output is not a JSON array of entries:\n%s", out)
	return entries
}

// objectIsPartition reports whether a status object names partition p of topic, e.g.
// "t-0", "t/0", "topics/t/0", "t:0" or "t[0]".
func objectIsPartition(object, topic string, p int) bool {
	re := regexp.MustCompile(`(^|[^a-z0-9._-])` + regexp.QuoteMeta(topic) + `([-/:.\[ ]|/partitions?/)` + fmt.Sprint(p) + `\]?$`)
	return re.MatchString(object)
}

// objectIsTopic reports whether a status object names the topic itself (possibly with a
// topic ID or incarnation suffix), e.g. "t", "topics/t", "t@<id>".
func objectIsTopic(object, topic string) bool {
	re := regexp.MustCompile(`(^|[^a-z0-9._-])` + regexp.QuoteMeta(topic) + `($|[^a-z0-9._-])`)
	return re.MatchString(object)
}

var _ = Describe("kaasctl reconcile-status", func() {
	It("shows partition-open machines serving after create and the topic-delete machine deleted after delete", func(ctx SpecContext) {
		const partitions = 3
		dir := GinkgoT().TempDir()
		b := StartBroker(dir)
		adm := NewAdmin(b)
		topic := UniqueName("reconcile")
		CreateTopic(ctx, adm, topic, partitions)

		By("waiting for every partition's partition-open machine to reach serving")
		Eventually(func(g Gomega) {
			entries := reconcileStatus(g, ctx, dir)
			for p := range partitions {
				var found []reconcileEntry
				for _, e := range entries {
					if e.Kind == "partition-open" && objectIsPartition(e.Object, topic, p) {
						found = append(found, e)
					}
				}
				g.Expect(found).NotTo(BeEmpty(), "no partition-open entry for %s partition %d in %v", topic, p, entries)
				for _, e := range found {
					g.Expect(e.State).To(Equal("serving"), "entry %v", e)
				}
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		By("deleting the topic via kadm")
		resp, err := adm.DeleteTopic(ctx, topic)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Err).NotTo(HaveOccurred(), "DeleteTopic: %s", resp.ErrMessage)

		By("waiting for the topic-delete machine to reach deleted")
		Eventually(func(g Gomega) {
			entries := reconcileStatus(g, ctx, dir)
			var found []reconcileEntry
			var kinds []string
			for _, e := range entries {
				kinds = append(kinds, e.Kind+":"+e.Object)
				if e.Kind == "topic-delete" && objectIsTopic(e.Object, topic) {
					found = append(found, e)
				}
			}
			g.Expect(found).NotTo(BeEmpty(), "no topic-delete entry for %s; entries: %s", topic, strings.Join(kinds, ", "))
			for _, e := range found {
				g.Expect(e.State).To(Equal("deleted"), "entry %v", e)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		By("the topic is gone from metadata")
		Eventually(func(g Gomega) {
			topics, err := adm.ListTopics(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(topics.Has(topic)).To(BeFalse())
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))
})

var _ = Describe("kaasctl reconcile-status while a topic delete fails", func() {
	It("shows the delete's attempts and last error, then deleted once the volume lets it finish", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		// The first 60 removals of files in the trash fail with EBUSY, as a
		// file held open on another NFS client would: the purge step fails
		// and is re-driven with backoff until the fault runs out.
		fault := fmt.Sprintf("Remove:%s/trash/*/*/*:EBUSY:60", dir)
		b := StartBroker(dir, WithBrokerArgs("--inject-faults", fault))
		adm := NewAdmin(b)
		topic := UniqueName("faileddelete")
		CreateTopic(ctx, adm, topic, 2)

		By("deleting the topic while its trash cannot be removed")
		// A short request timeout: the answer is REQUEST_TIMED_OUT while the
		// delete goes on, so the spec can watch it fail and recover.
		adm.SetTimeoutMillis(200)
		_, err := adm.DeleteTopic(ctx, topic)
		Expect(err).To(MatchError(kerr.RequestTimedOut))

		By("kaasctl shows the machine stuck at renamed, with attempts and the last error")
		var seen reconcileEntry
		Eventually(func(g Gomega) {
			var failing *reconcileEntry
			for _, e := range reconcileStatus(g, ctx, dir) {
				if e.Kind == "topic-delete" && objectIsTopic(e.Object, topic) {
					e := e
					failing = &e
				}
			}
			g.Expect(failing).NotTo(BeNil())
			g.Expect(failing.State).To(Equal("renamed"))
			g.Expect(failing.Attempts).To(BeNumerically(">=", 1))
			g.Expect(fmt.Sprint(failing.LastError)).To(And(ContainSubstring("purge"), ContainSubstring("device or resource busy")))
			seen = *failing
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())
		AddReportEntry("reconcile-status while the delete fails", seen.String())

		By("the delete converges by itself once removal works again")
		Eventually(func(g Gomega) {
			for _, e := range reconcileStatus(g, ctx, dir) {
				if e.Kind == "topic-delete" && objectIsTopic(e.Object, topic) {
					g.Expect(e.State).To(Equal("deleted"))
					g.Expect(e.LastError).To(BeEmpty())
					g.Expect(e.Attempts).To(BeNumerically(">=", 1))
					return
				}
			}
			g.Expect("no topic-delete entry").To(BeEmpty())
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		entries, err := Kaasctl(ctx, "reconcile-status", "--data", dir, "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("reconcile-status after a failing delete converged", entries)
	}, SpecTimeout(3*time.Minute))
})
