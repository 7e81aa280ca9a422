package specs

// The volume check on real GlusterFS mounts: strict mounts (client caching
// off, .ci/gluster up) keep the contract; mounts with stock caching
// (.ci/gluster up-cached) break close-to-open, and kaasctl and a starting
// broker say so.
//
//	KAAS_SPECS_MOUNTS=$(.ci/gluster up 2) KAAS_SPECS_CACHED_MOUNTS=$(.ci/gluster up-cached 2) \
//	  go test ./specs/ -ginkgo.label-filter=volume-check

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// mountPair returns the first two mounts named by env, or skips.
func mountPair(env string) (string, string) {
	GinkgoHelper()
	mounts := strings.FieldsFunc(os.Getenv(env), func(r rune) bool { return r == ',' })
	if len(mounts) < 2 {
		Skip(env + " does not name two mounts of one volume")
	}
	return mounts[0], mounts[1]
}

// freshDirs makes one fresh directory on the volume and returns it as seen
// through each mount; it is removed at cleanup.
func freshDirs(a, b string) (string, string) {
	GinkgoHelper()
	name := UniqueName("volcheck")
	Expect(os.MkdirAll(filepath.Join(a, name), 0o755)).To(Succeed())
	DeferCleanup(func() { _ = os.RemoveAll(filepath.Join(a, name)) })
	return filepath.Join(a, name), filepath.Join(b, name)
}

var _ = Describe("Volume check", Label("gluster", "volume-check"), func() {
	BeforeEach(func() {
		if os.Getenv("KAAS_SPECS_MOUNTS") == "" || os.Getenv("KAAS_SPECS_CACHED_MOUNTS") == "" {
			Skip("needs KAAS_SPECS_MOUNTS (strict mounts) and KAAS_SPECS_CACHED_MOUNTS (stock caching): see .ci/gluster")
		}
	})

	It("passes on strict GlusterFS mounts, across the two mounts", func(ctx SpecContext) {
		a, b := freshDirs(mountPair("KAAS_SPECS_MOUNTS"))
		start := time.Now()
		out, err := Kaasctl(ctx, "check-volume", "--data", a, "--peer", b)
		fmt.Fprintf(GinkgoWriter, "check-volume took %v:\n%s", time.Since(start), out)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("close-to-open"))
		Expect(out).NotTo(ContainSubstring("FAIL"))
	})

	It("fails naming close-to-open on mounts with stock client caching", func(ctx SpecContext) {
		a, b := freshDirs(mountPair("KAAS_SPECS_CACHED_MOUNTS"))
		out, err := Kaasctl(ctx, "check-volume", "--data", a, "--peer", b)
		fmt.Fprintf(GinkgoWriter, "check-volume on cached mounts:\n%s", out)
		Expect(err).To(HaveOccurred(), "check-volume passed on a caching mount:\n%s", out)
		Expect(out).To(ContainSubstring("close-to-open: a reader"))
		Expect(out).To(ContainSubstring("read the previous contents"))
		Expect(out).To(MatchRegexp(`close-to-open\s+close-to-open\s+FAIL`))
	})

	It("refuses to start a second broker on a caching mount while a first runs on the other", func(ctx SpecContext) {
		a, b := freshDirs(mountPair("KAAS_SPECS_CACHED_MOUNTS"))
		first := StartBroker(a, WithBrokerID(1))
		Expect(first.Running()).To(BeTrue())

		By("starting broker 2 on the other mount: it must exit non-zero naming close-to-open")
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, bins.Broker, "--data", b, "--id", "2",
			"--listen", freeAddr(), "--admin", freeAddr())
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		err := cmd.Run()
		fmt.Fprintf(GinkgoWriter, "broker 2:\n%s", logs.String())
		var exit *exec.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), "broker 2 did not exit with a status: %v\n%s", err, logs.String())
		Expect(exit.ExitCode()).NotTo(Equal(0))
		Expect(logs.String()).To(ContainSubstring("refusing to start"))
		Expect(logs.String()).To(ContainSubstring("close-to-open across hosts"))
		Expect(first.Running()).To(BeTrue(), "the first broker must keep running")
	})
})
