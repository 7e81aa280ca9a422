package specs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// kcatPath finds kcat (or the older kafkacat name); it fails, never skips, when missing.
func kcatPath() string {
	GinkgoHelper()
	for _, name := range []string{"kcat", "kafkacat"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Fail("kcat is not installed (not found in PATH). .ci/run installs it (apt-get install -y kcat); " +
		"on a developer machine run `apt-get update && apt-get install -y kcat`.")
	return ""
}

// runKcat runs kcat with stdin (may be nil), returns stdout; stderr goes to GinkgoWriter.
func runKcat(ctx context.Context, stdin io.Reader, args ...string) string {
	GinkgoHelper()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, kcatPath(), args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	fmt.Fprintf(GinkgoWriter, "$ kcat %s\n", strings.Join(args, " "))
	err := cmd.Run()
	if stderr.Len() > 0 {
		fmt.Fprintf(GinkgoWriter, "kcat stderr (%d bytes):\n%.3000s\n", stderr.Len(), stderr.String())
	}
	errTail := stderr.String()
	if len(errTail) > 3000 {
		errTail = "…" + errTail[len(errTail)-3000:]
	}
	if cctx.Err() != nil {
		Fail(fmt.Sprintf("kcat %s did not finish within 30s (killed); %d bytes on stdout; stderr:\n%s",
			strings.Join(args, " "), stdout.Len(), errTail))
	}
	Expect(err).NotTo(HaveOccurred(), "kcat %s failed; stderr:\n%s", strings.Join(args, " "), errTail)
	return stdout.String()
}

// kcatLines builds a file of varied, non-empty lines.
func kcatLines(n int) []byte {
	var buf bytes.Buffer
	for i := range n {
		switch i % 7 {
		case 0:
			fmt.Fprintf(&buf, "line %d plain ascii\n", i)
		case 1:
			fmt.Fprintf(&buf, "line %d with\ttabs and  double  spaces \n", i)
		case 2:
			fmt.Fprintf(&buf, "line %d unicode: héllo wörld ✓ 日本語 🚀\n", i)
		case 3:
			fmt.Fprintf(&buf, "line %d long: %s\n", i, strings.Repeat(fmt.Sprintf("%04x", i), 1000))
		case 4:
			fmt.Fprintf(&buf, "{\"json\":true,\"n\":%d,\"s\":\"quote \\\" and backslash \\\\\"}\n", i)
		case 5:
			fmt.Fprintf(&buf, "%d\n", i)
		default:
			fmt.Fprintf(&buf, "line %d punctuation !@#$%%^&*()_+-=[]{};':,./<>?\n", i)
		}
	}
	return buf.Bytes()
}

var _ = Describe("kcat round trip", Label("clients"), func() {
	It("produces a file of lines to partition 0 and consumes exactly the same file back; -L lists broker and topic", func(ctx SpecContext) {
		kcatPath() // fail early, before starting anything, when kcat is missing
		b := StartBroker(GinkgoT().TempDir())
		topic := UniqueName("kcat")
		CreateTopic(ctx, NewAdmin(b), topic, 1)

		lines := kcatLines(3000)
		file := filepath.Join(GinkgoT().TempDir(), "lines.txt")
		Expect(os.WriteFile(file, lines, 0o644)).To(Succeed())

		By("producing the file with kcat -P -p 0")
		f, err := os.Open(file)
		Expect(err).NotTo(HaveOccurred())
		defer f.Close()
		runKcat(ctx, f, "-b", b.Addr, "-P", "-t", topic, "-p", "0", "-X", "acks=all")

		By(fmt.Sprintf("consuming it back with kcat -C -e (%d bytes, %d lines expected)", len(lines), bytes.Count(lines, []byte("\n"))))
		out := runKcat(ctx, nil, "-b", b.Addr, "-C", "-e", "-t", topic, "-p", "0", "-o", "beginning", "-f", `%s\n`)
		if out != string(lines) {
			gotLines := strings.Split(out, "\n")
			wantLines := strings.Split(string(lines), "\n")
			for i := range min(len(gotLines), len(wantLines)) {
				if gotLines[i] != wantLines[i] {
					Fail(fmt.Sprintf("consumed output differs at line %d: got %.100q, want %.100q (got %d lines, want %d)",
						i+1, gotLines[i], wantLines[i], len(gotLines)-1, len(wantLines)-1))
				}
			}
			Fail(fmt.Sprintf("consumed output has %d lines, want %d", len(gotLines)-1, len(wantLines)-1))
		}

		By("listing metadata with kcat -L")
		md := runKcat(ctx, nil, "-b", b.Addr, "-L")
		Expect(md).To(MatchRegexp(`broker 1 at %s\b`, regexp.QuoteMeta(b.Addr)), "kcat -L output:\n%s", md)
		Expect(md).To(ContainSubstring(fmt.Sprintf("topic %q with 1 partitions", topic)), "kcat -L output:\n%s", md)
		Expect(md).To(MatchRegexp(`partition 0, leader 1,`), "kcat -L output:\n%s", md)
	}, SpecTimeout(3*time.Minute))
})
