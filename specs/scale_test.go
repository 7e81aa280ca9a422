package specs

// Issue 20: 10,000 partitions on three brokers. `kaasbench scale` (the same
// measurement `make scale` runs at 100,000) creates them in one
// CreateTopics, measures the idle cost, Metadata, a produce to every
// partition, then SIGKILLs one broker and times the takeover. The targets
// are the issue's; the bounds here leave room for a shared CI machine.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// scaleRun is what the spec reads of `kaasbench scale --json`.
type scaleRun struct {
	OK       bool     `json:"ok"`
	Failures []string `json:"failures"`
	Kaas     struct {
		Create struct {
			AnswerSeconds float64 `json:"answer_seconds"`
			TopicErrors   int     `json:"topic_errors"`
			Leaders       struct {
				Complete bool    `json:"complete"`
				Seconds  float64 `json:"seconds"`
			} `json:"leaders"`
		} `json:"create"`
		Idle struct {
			Brokers []struct {
				ID             int32    `json:"id"`
				Owned          int      `json:"owned"`
				CPUPercent     *float64 `json:"cpu_percent"`
				RSSBytes       *int64   `json:"rss_bytes"`
				FDs            *int     `json:"fds"`
				HeartbeatBytes *int64   `json:"heartbeat_bytes"`
			} `json:"brokers"`
			AssignmentBytes *int64 `json:"assignment_bytes"`
		} `json:"idle"`
		Metadata struct {
			Errors  int `json:"errors"`
			Latency struct {
				P50Ms float64 `json:"p50_ms"`
			} `json:"latency"`
		} `json:"metadata"`
		Produce struct {
			Acked   int     `json:"acked"`
			Failed  int     `json:"failed"`
			Seconds float64 `json:"seconds"`
		} `json:"produce"`
		Kill struct {
			Leaders struct {
				Complete bool    `json:"complete"`
				Seconds  float64 `json:"seconds"`
			} `json:"leaders"`
			Acked        bool    `json:"acked"`
			AckedSeconds float64 `json:"acked_seconds"`
		} `json:"kill"`
	} `json:"kaas"`
}

var _ = Describe("10,000 partitions on three brokers", Label("cluster", "slow", "scale"), func() {
	It("creates them, holds them idle at a cost that does not grow with them, produces to each and takes over a killed broker's", func(ctx SpecContext) {
		const topics, partitions = 100, 100
		bench := goBuild(ctx, "./cmd/kaasbench", filepath.Join(GinkgoT().TempDir(), "kaasbench"))
		dirs := SharedDataDirs(3)
		var brokers []*Broker
		for i, d := range dirs {
			brokers = append(brokers, StartBroker(d, WithBrokerID(i+1)))
		}
		var addrs, admins, pids []string
		for _, b := range brokers {
			addrs = append(addrs, b.Addr)
			admins = append(admins, b.AdminAddr)
			pids = append(pids, strconv.Itoa(b.Pid()))
		}
		args := []string{"scale", "--brokers", strings.Join(addrs, ","), "--admin", strings.Join(admins, ","),
			"--pids", strings.Join(pids, ","), "--data", dirs[0],
			"--topics", strconv.Itoa(topics), "--partitions", strconv.Itoa(partitions),
			"--idle", "10s", "--metadata-requests", "20", "--kill", "2",
			"--create-timeout", "3m", "--takeover-timeout", "2m", "--produce-timeout", "2m", "--json"}
		By("kaasbench " + strings.Join(args, " "))
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, bench, args...)
		cmd.Stdout, cmd.Stderr = &out, GinkgoWriter
		runErr := cmd.Run()
		var run scaleRun
		Expect(json.Unmarshal(out.Bytes(), &run)).To(Succeed(), "kaasbench scale output (%v):\n%s", runErr, out.String())
		Expect(run.Failures).To(BeEmpty())
		Expect(runErr).NotTo(HaveOccurred())
		k := run.Kaas

		report := []string{
			fmt.Sprintf("CreateTopics of %d partitions → leader in Metadata for all: %.1f s", topics*partitions, k.Create.Leaders.Seconds),
			fmt.Sprintf("Metadata for all, p50: %.1f ms", k.Metadata.Latency.P50Ms),
			fmt.Sprintf("a produce to every partition: %d acked in %.1f s", k.Produce.Acked, k.Produce.Seconds),
			fmt.Sprintf("kill -9 of broker 2 → every leader on a survivor: %.1f s; every partition acked again: %.1f s", k.Kill.Leaders.Seconds, k.Kill.AckedSeconds),
		}
		for _, b := range k.Idle.Brokers {
			report = append(report, fmt.Sprintf("broker %d idle: %d owned, CPU %.1f %%, %d fds, RSS %d MiB, heartbeat %d B",
				b.ID, b.Owned, deref(b.CPUPercent), deref(b.FDs), deref(b.RSSBytes)>>20, deref(b.HeartbeatBytes)))
		}
		AddReportEntry("scale", strings.Join(report, "\n"))

		By("every partition created, with a leader in every broker's Metadata, soon after")
		Expect(k.Create.TopicErrors).To(BeZero())
		Expect(k.Create.Leaders.Complete).To(BeTrue())
		Expect(k.Create.Leaders.Seconds).To(BeNumerically("<", 90), "target 10 s on a quiet machine")

		By("idle: heartbeats of a fixed size, at most 1.5 fds per owned partition, little CPU")
		Expect(k.Idle.Brokers).To(HaveLen(3))
		for _, b := range k.Idle.Brokers {
			Expect(b.HeartbeatBytes).NotTo(BeNil())
			Expect(*b.HeartbeatBytes).To(BeNumerically("<=", 16<<10), "broker %d's heartbeat", b.ID)
			Expect(b.FDs).NotTo(BeNil())
			Expect(float64(*b.FDs)).To(BeNumerically("<=", 1.5*float64(b.Owned)+64), "broker %d's fds for %d partitions", b.ID, b.Owned)
			Expect(b.CPUPercent).NotTo(BeNil())
			Expect(*b.CPUPercent).To(BeNumerically("<", 15), "broker %d idle (target 3 %% on a quiet machine)", b.ID)
		}

		By("Metadata for all 10,000 partitions, and a produce to each")
		Expect(k.Metadata.Errors).To(BeZero())
		Expect(k.Metadata.Latency.P50Ms).To(BeNumerically("<=", 200))
		Expect(k.Produce.Failed).To(BeZero())
		Expect(k.Produce.Acked).To(Equal(topics * partitions))

		By("after kill -9 of one broker, every partition served by a survivor and acked again")
		Expect(k.Kill.Leaders.Complete).To(BeTrue())
		Expect(k.Kill.Acked).To(BeTrue())
		Expect(k.Kill.AckedSeconds).To(BeNumerically("<", 90), "target 10 s on a quiet machine")
	})
})

func deref[T int | int64 | float64](p *T) T {
	if p == nil {
		return 0
	}
	return *p
}
