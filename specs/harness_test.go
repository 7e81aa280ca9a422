package specs

// The harness: builds kaas-broker and kaasctl once per suite, starts brokers as real
// processes bound to 127.0.0.1, waits for their readiness, kills/stops/restarts them,
// and always cleans up what it started.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ---------------------------------------------------------------------------
// Binaries

type binaries struct {
	Dir    string `json:"dir"`    // temp dir we created (removed after the suite); "" if none
	Broker string `json:"broker"` // path to kaas-broker
	Ctl    string `json:"ctl"`    // path to kaasctl
}

// moduleRoot walks up from the working directory (specs/) to the directory holding go.mod.
func moduleRoot() string {
	dir, err := os.Getwd()
	Expect(err).NotTo(HaveOccurred())
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		Expect(parent).NotTo(Equal(dir), "go.mod not found above the specs directory")
		dir = parent
	}
}

func buildBinaries(ctx context.Context) binaries {
	var b binaries
	b.Broker = os.Getenv("KAAS_BROKER_BIN")
	b.Ctl = os.Getenv("KAAS_CTL_BIN")
	if b.Broker != "" && b.Ctl != "" {
		fmt.Fprintf(GinkgoWriter, "using prebuilt binaries: %s %s\n", b.Broker, b.Ctl)
		return b
	}
	dir, err := os.MkdirTemp("", "kaas-specs-bin-")
	Expect(err).NotTo(HaveOccurred())
	b.Dir = dir
	if b.Broker == "" {
		b.Broker = goBuild(ctx, "./cmd/kaas-broker", filepath.Join(dir, "kaas-broker"))
	}
	if b.Ctl == "" {
		b.Ctl = goBuild(ctx, "./cmd/kaasctl", filepath.Join(dir, "kaasctl"))
	}
	return b
}

// goBuild builds pkg (module-relative) into out, with -race when
// KAAS_SPECS_RACE=1, and returns out.
func goBuild(ctx context.Context, pkg, out string) string {
	GinkgoHelper()
	args := []string{"build", "-buildvcs=false", "-o", out}
	if os.Getenv("KAAS_SPECS_RACE") == "1" {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	By(fmt.Sprintf("building %s: go %s", pkg, strings.Join(args, " ")))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = moduleRoot()
	var outBuf bytes.Buffer
	cmd.Stdout = io.MultiWriter(GinkgoWriter, &outBuf)
	cmd.Stderr = io.MultiWriter(GinkgoWriter, &outBuf)
	Expect(cmd.Run()).To(Succeed(), "go build %s failed:\n%s", pkg, outBuf.String())
	return out
}

func cleanupBinaries(b binaries) {
	if b.Dir != "" {
		_ = os.RemoveAll(b.Dir)
	}
}

// ---------------------------------------------------------------------------
// Broker processes

// Broker is one kaas-broker process (and its restarts) on fixed 127.0.0.1 ports.
type Broker struct {
	ID        int
	Dir       string // --data
	Addr      string // --listen and --advertise, 127.0.0.1:PORT
	AdminAddr string // --admin, 127.0.0.1:PORT
	LogPath   string // stdout+stderr of every run, appended
	ExtraArgs []string
	// ReadyTimeout bounds each wait for /readyz (default 60s).
	ReadyTimeout time.Duration

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when the current process has exited
	state  *os.ProcessState
	logF   *os.File
	starts int
	paused bool
}

// BrokerOpt adjusts a broker before its first start.
type BrokerOpt func(*Broker)

// WithBrokerArgs appends extra command-line flags.
func WithBrokerArgs(args ...string) BrokerOpt {
	return func(b *Broker) { b.ExtraArgs = append(b.ExtraArgs, args...) }
}

// WithBrokerID sets --id.
func WithBrokerID(id int) BrokerOpt { return func(b *Broker) { b.ID = id } }

// freeAddr returns a currently free 127.0.0.1:PORT.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}

// StartBroker starts a broker on data directory dir, on fresh free ports, and waits until
// /readyz answers 200. The broker is always stopped when the current spec (or container
// node) ends: gracefully with SIGTERM (which must exit 0), else with SIGKILL.
func StartBroker(dir string, opts ...BrokerOpt) *Broker {
	GinkgoHelper()
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	b := &Broker{
		ID:           1,
		Dir:          dir,
		Addr:         freeAddr(),
		AdminAddr:    freeAddr(),
		ReadyTimeout: 60 * time.Second,
	}
	for _, o := range opts {
		o(b)
	}
	if extra := os.Getenv("KAAS_SPECS_BROKER_ARGS"); extra != "" {
		b.ExtraArgs = append(b.ExtraArgs, strings.Fields(extra)...)
	}
	logDir := os.Getenv("KAAS_SPECS_LOGDIR")
	if logDir == "" {
		logDir = GinkgoT().TempDir()
	}
	Expect(os.MkdirAll(logDir, 0o755)).To(Succeed())
	b.LogPath = filepath.Join(logDir, fmt.Sprintf("broker-%d-%s-%s.log", b.ID,
		strings.ReplaceAll(b.Addr, ":", "_"), time.Now().Format("150405.000")))
	f, err := os.OpenFile(b.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	Expect(err).NotTo(HaveOccurred())
	b.logF = f

	DeferCleanup(b.cleanup)
	b.start()
	return b
}

func (b *Broker) args() []string {
	args := []string{
		"--data", b.Dir,
		"--listen", b.Addr,
		"--admin", b.AdminAddr,
		"--advertise", b.Addr,
		"--id", strconv.Itoa(b.ID),
		"--auto-create-topics=true",
	}
	return append(args, b.ExtraArgs...)
}

// start launches the process and waits for readiness.
func (b *Broker) start() {
	GinkgoHelper()
	b.launch()
	b.WaitReady()
}

// launch starts the broker process without waiting for it.
func (b *Broker) launch() {
	GinkgoHelper()
	b.mu.Lock()
	if b.cmd != nil && !b.exitedLocked() {
		b.mu.Unlock()
		Fail("broker already running")
	}
	b.starts++
	args := b.args()
	out := io.MultiWriter(GinkgoWriter, b.logF)
	fmt.Fprintf(out, "\n=== kaas-broker start #%d: %s %s\n", b.starts, bins.Broker, strings.Join(args, " "))
	cmd := exec.Command(bins.Broker, args...)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = 5 * time.Second
	// If the test process dies, take the broker with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Start()
	if err != nil {
		b.mu.Unlock()
		Expect(err).NotTo(HaveOccurred(), "starting %s", bins.Broker)
	}
	done := make(chan struct{})
	b.cmd, b.done, b.state = cmd, done, nil
	b.mu.Unlock()

	go func() {
		_ = cmd.Wait()
		b.mu.Lock()
		b.state = cmd.ProcessState
		b.mu.Unlock()
		fmt.Fprintf(out, "=== kaas-broker run #%d (pid %d) exited: %v\n", b.starts, cmd.Process.Pid, cmd.ProcessState)
		close(done)
	}()
}

// RestartLive starts the broker again and waits only until it answers
// /healthz, not /readyz: for negative controls, where a partition it owns
// may be lost for good and never be served again.
func (b *Broker) RestartLive() {
	GinkgoHelper()
	if b.Running() {
		b.Stop()
	}
	b.launch()
	Eventually(func(g Gomega) {
		resp, err := httpClient.Get("http://" + b.AdminAddr + "/healthz")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}).WithTimeout(b.ReadyTimeout).WithPolling(50*time.Millisecond).Should(Succeed(),
		"broker %s did not answer /healthz", b.Addr)
}

func (b *Broker) exitedLocked() bool {
	if b.done == nil {
		return true
	}
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// Running reports whether the current process is alive.
func (b *Broker) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd != nil && !b.exitedLocked()
}

// Pid of the current process.
func (b *Broker) Pid() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil || b.cmd.Process == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// WaitReady waits until GET /readyz answers 200; fails fast if the process exits.
func (b *Broker) WaitReady() {
	GinkgoHelper()
	b.mu.Lock()
	done := b.done
	b.mu.Unlock()
	Eventually(func(g Gomega) {
		select {
		case <-done:
			StopTrying(fmt.Sprintf("kaas-broker exited before becoming ready (%v); log tail:\n%s",
				b.exitState(), b.LogTail(4096))).Now()
		default:
		}
		resp, err := httpClient.Get("http://" + b.AdminAddr + "/readyz")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "/readyz body: %s", body)
	}).WithTimeout(b.ReadyTimeout).WithPolling(50*time.Millisecond).Should(Succeed(),
		"broker %s did not become ready", b.Addr)
}

func (b *Broker) exitState() *os.ProcessState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

func (b *Broker) signal(sig syscall.Signal) {
	GinkgoHelper()
	b.mu.Lock()
	cmd := b.cmd
	b.mu.Unlock()
	Expect(cmd).NotTo(BeNil())
	// Signal exactly the process we started, by pid.
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		Expect(err).NotTo(HaveOccurred())
	}
}

func (b *Broker) waitExit(d time.Duration) bool {
	b.mu.Lock()
	done := b.done
	b.mu.Unlock()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Kill9 kills the broker with SIGKILL and waits for it to be gone.
func (b *Broker) Kill9() {
	GinkgoHelper()
	Expect(b.Running()).To(BeTrue(), "Kill9: broker is not running")
	b.signal(syscall.SIGKILL)
	Expect(b.waitExit(30*time.Second)).To(BeTrue(), "broker did not die after SIGKILL")
}

// Pause stops the broker with SIGSTOP: it keeps its files and sockets open
// but runs no code, as a broker stuck in a long pause or a partition from
// the volume would. Resume continues it.
func (b *Broker) Pause() {
	GinkgoHelper()
	Expect(b.Running()).To(BeTrue(), "Pause: broker is not running")
	b.mu.Lock()
	b.paused = true
	b.mu.Unlock()
	b.signal(syscall.SIGSTOP)
}

// Resume continues a broker stopped by Pause.
func (b *Broker) Resume() {
	GinkgoHelper()
	b.signal(syscall.SIGCONT)
	b.mu.Lock()
	b.paused = false
	b.mu.Unlock()
}

// Stop sends SIGTERM and expects a graceful exit with status 0 within 30s.
func (b *Broker) Stop() {
	GinkgoHelper()
	Expect(b.Running()).To(BeTrue(), "Stop: broker is not running")
	b.signal(syscall.SIGTERM)
	if !b.waitExit(30 * time.Second) {
		b.signal(syscall.SIGKILL)
		b.waitExit(10 * time.Second)
		Fail("broker did not exit within 30s of SIGTERM; log tail:\n" + b.LogTail(4096))
	}
	st := b.exitState()
	Expect(st.ExitCode()).To(Equal(0), "broker exit after SIGTERM: %v; log tail:\n%s", st, b.LogTail(4096))
}

// Restart starts the broker again on the same ports and data directory (stopping it
// gracefully first if it is running) and waits for readiness.
func (b *Broker) Restart() {
	GinkgoHelper()
	if b.Running() {
		b.Stop()
	}
	b.start()
}

// Status returns the decoded GET /status document.
func (b *Broker) Status() map[string]any {
	GinkgoHelper()
	resp, err := httpClient.Get("http://" + b.AdminAddr + "/status")
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	var m map[string]any
	Expect(json.NewDecoder(resp.Body).Decode(&m)).To(Succeed())
	return m
}

// LogTail returns at most n trailing bytes of the broker's log file.
func (b *Broker) LogTail(n int64) string {
	f, err := os.Open(b.LogPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	off := st.Size() - n
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(buf, off)
	return string(buf)
}

// cleanup runs at the end of the node that started the broker.
func (b *Broker) cleanup() {
	failed := CurrentSpecReport().Failed()
	b.mu.Lock()
	paused := b.paused
	b.mu.Unlock()
	if paused && b.Running() {
		b.signal(syscall.SIGCONT)
	}
	if b.Running() {
		b.signal(syscall.SIGTERM)
		if !b.waitExit(30 * time.Second) {
			b.signal(syscall.SIGKILL)
			b.waitExit(10 * time.Second)
			if !failed {
				Fail("broker did not exit within 30s of SIGTERM at cleanup; log tail:\n" + b.LogTail(4096))
			}
		} else if st := b.exitState(); st.ExitCode() != 0 && !failed {
			Fail(fmt.Sprintf("broker exited with %v after SIGTERM at cleanup; log tail:\n%s", st, b.LogTail(4096)))
		}
	}
	if failed {
		AddReportEntry("broker log "+b.LogPath, b.LogTail(16<<10))
	}
	_ = b.logF.Close()
}

// SharedDataDirs returns n paths to one fresh data directory, one per
// broker. By default they are all the same local temp directory. With
// KAAS_SPECS_MOUNTS set to n or more comma-separated mount points of one
// shared filesystem (for example one FUSE mount of a GlusterFS volume per
// broker), broker i gets <mount i>/<fresh name>: the same directory seen
// through a different client, as brokers on different hosts see it.
func SharedDataDirs(n int) []string {
	GinkgoHelper()
	mounts := strings.FieldsFunc(os.Getenv("KAAS_SPECS_MOUNTS"), func(r rune) bool { return r == ',' })
	dirs := make([]string, n)
	if len(mounts) == 0 {
		dir := GinkgoT().TempDir()
		for i := range dirs {
			dirs[i] = dir
		}
		return dirs
	}
	Expect(len(mounts)).To(BeNumerically(">=", n), "KAAS_SPECS_MOUNTS names %d mount points, the spec needs %d", len(mounts), n)
	name := UniqueName("specs")
	for i := range dirs {
		dirs[i] = filepath.Join(mounts[i], name)
	}
	Expect(os.MkdirAll(dirs[0], 0o755)).To(Succeed())
	DeferCleanup(func() { _ = os.RemoveAll(dirs[0]) })
	return dirs
}

// ---------------------------------------------------------------------------
// Clients

// clientOpts are the options a spec's franz-go client starts from: seeded
// with the broker, the specs' client ID, warnings logged to GinkgoWriter.
func clientOpts(b *Broker) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(b.Addr),
		kgo.ClientID("kaas-specs"),
		kgo.WithLogger(kgo.BasicLogger(GinkgoWriter, kgo.LogLevelWarn, func() string { return "[kgo] " })),
	}
}

// NewClient returns a franz-go client seeded with the broker, closed at cleanup.
func NewClient(b *Broker, opts ...kgo.Opt) *kgo.Client {
	GinkgoHelper()
	cl, err := kgo.NewClient(append(clientOpts(b), opts...)...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cl.Close)
	return cl
}

// NewAdmin returns a kadm client for the broker, closed at cleanup.
func NewAdmin(b *Broker) *kadm.Client {
	GinkgoHelper()
	return kadm.NewClient(NewClient(b))
}

// CreateTopic creates a topic with the given partitions (replication factor 1) and waits
// until its metadata shows every partition with a leader.
func CreateTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32) {
	GinkgoHelper()
	createTopicWithConfigs(ctx, adm, topic, partitions, nil)
}

// createTopicWithConfigs is CreateTopic with topic configs.
func createTopicWithConfigs(ctx context.Context, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) {
	GinkgoHelper()
	By(fmt.Sprintf("creating topic %q with %d partitions", topic, partitions))
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	Expect(err).NotTo(HaveOccurred(), "CreateTopic %s", topic)
	Expect(resp.Err).NotTo(HaveOccurred(), "CreateTopic %s: %s", topic, resp.ErrMessage)
	Eventually(func(g Gomega) {
		md, err := adm.Metadata(ctx, topic)
		g.Expect(err).NotTo(HaveOccurred())
		td, ok := md.Topics[topic]
		g.Expect(ok).To(BeTrue(), "topic missing from metadata")
		g.Expect(td.Err).NotTo(HaveOccurred())
		g.Expect(td.Partitions).To(HaveLen(int(partitions)))
		for _, p := range td.Partitions {
			g.Expect(p.Err).NotTo(HaveOccurred(), "partition %d", p.Partition)
			g.Expect(p.Leader).To(BeNumerically(">=", 0), "partition %d has no leader", p.Partition)
		}
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
}

// UniqueName returns prefix-<8 random lowercase letters>.
func UniqueName(prefix string) string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	var sb strings.Builder
	sb.WriteString(prefix)
	sb.WriteByte('-')
	for range 8 {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(letters))))
		sb.WriteByte(letters[n.Int64()])
	}
	return sb.String()
}

// Kaasctl runs the kaasctl binary and returns its stdout; stderr goes to GinkgoWriter.
func Kaasctl(ctx context.Context, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, bins.Ctl, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(GinkgoWriter, &stderr)
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("kaasctl %s: %w; stderr: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}
