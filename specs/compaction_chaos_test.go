package specs

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// Compaction under the fault model, on the contract-floor filesystem:
// kaasverify sends keyed records and tombstones to a compacted topic whose
// small segments the brokers' cleaners rewrite all the time, while owners
// are killed, paused past their lease and power-cut. The checker's
// compaction checks (C1 the latest acknowledged value of every key
// survives, C2 a tombstoned key never comes back, C3 offsets never move)
// must hold; with the cleaner told to drop latest values (the negative
// control compact-drop-latest) they must fail.

// compactionLoad is a compacted topic whose cleaner always has work.
var compactionLoad = chaosLoad{
	topicConfigs: map[string]*string{
		"cleanup.policy":            ptr("compact"),
		"segment.bytes":             ptr("32768"),
		"segment.ms":                ptr("1000"),
		"min.cleanable.dirty.ratio": ptr("0.05"),
		"delete.retention.ms":       ptr("2000"),
	},
	verifierArgs: []string{"--compacted", "--keys", "60", "--tombstone-every", "10"},
}

// compactionArgs make every broker's cleaner look for work often.
var compactionArgs = []string{"--log-cleaner-backoff", "300ms"}

// compactionFaults kills an owner, pauses one past its lease (a zombie
// whose cleaning pass must be fenced), and power-cuts one's host, with
// the cleaners running throughout: one round of each, to keep the run
// short (the fault-model scenarios above repeat each fault alone).
func compactionFaults(ctx context.Context, c *chaosCluster) {
	b, _ := c.ownerOf(ctx, 0)
	By(fmt.Sprintf("SIGKILL broker %d while it cleans", b.ID))
	b.Kill9()
	c.faults++
	waitCtx(ctx, chaosLease+time.Second)
	c.restart(b)
	c.settle(ctx)

	b, _ = c.ownerOf(ctx, 1)
	By(fmt.Sprintf("SIGSTOP broker %d for 3 leases while it cleans", b.ID))
	b.Pause()
	c.faults++
	waitCtx(ctx, 3*chaosLease)
	b.Resume()
	c.settle(ctx)

	b, i := c.ownerOf(ctx, 2)
	By(fmt.Sprintf("power-cut host %d (broker %d) while it cleans", i+1, b.ID))
	c.powerCut(i)
	c.faults++
	waitCtx(ctx, chaosLease)
	c.restart(c.brokers[i])
	c.settle(ctx)
}

var _ = Describe("Compaction under kills, zombies and power cuts", Label("chaos", "floor", "slow", "compaction"), Ordered, func() {
	It("keeps the latest acknowledged value of every key and never brings a tombstoned key back", func(ctx SpecContext) {
		c := startChaosWith(ctx, "floor", compactionLoad, compactionArgs...)
		compactionFaults(ctx, c)
		waitCtx(ctx, 3*time.Second) // a last round of passes over the tails
		r := c.finish(ctx)
		expectClean("compaction", c, r)
		Expect(reportCount(r, "tombstones")).To(BeNumerically(">", 0), "no tombstone was sent")
		cleaned, err := filepath.Glob(filepath.Join(c.brokers[0].Dir, "topics", c.topic, "*", "*-e*.c*.log"))
		Expect(err).NotTo(HaveOccurred())
		Expect(cleaned).NotTo(BeEmpty(), "no cleaned segment in the topic's partitions: the cleaners did not run")
		fmt.Fprintf(GinkgoWriter, "%d cleaned segments in the topic's partitions\n", len(cleaned))
	}, SpecTimeout(8*time.Minute))

	It("negative control: a cleaner that drops latest values is caught", Label("negative"), func(ctx SpecContext) {
		// Many keys, so that most have their latest value in a sealed
		// segment the cleaner rewrites, not in the active one.
		load := compactionLoad
		load.verifierArgs = append(append([]string{}, load.verifierArgs...), "--keys", "5000")
		c := startChaosWith(ctx, "floor", load, append([]string{"--unsafe-negative-control=compact-drop-latest"}, compactionArgs...)...)
		waitCtx(ctx, 8*time.Second) // passes run over the sealed segments
		expectCaught("compaction", c, c.finish(ctx), "C1")
	}, SpecTimeout(6*time.Minute))
})
