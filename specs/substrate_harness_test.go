package specs

// Substrates for the chaos specs: the contract-floor filesystem (kaas-floorfs:
// one FUSE mount per broker over one backing directory, each mount an
// NFS-like host whose unsynced writes a power cut drops) and GlusterFS mounts
// brought up by .ci/gluster; and the chaos verifier (kaasverify) that loads
// the cluster and checks the fault model's "nothing lost" rules.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/kaas-dev/kaas/cmd/kaasverify/check"
)

var (
	extraBinsMu sync.Mutex
	extraBins   = map[string]string{}
)

// extraBinary builds one of ./cmd/... once per test process (or takes it
// from the environment variable env) and returns its path.
func extraBinary(pkg, env string) string {
	GinkgoHelper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	extraBinsMu.Lock()
	defer extraBinsMu.Unlock()
	if p, ok := extraBins[pkg]; ok {
		return p
	}
	dir := bins.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "kaas-specs-extra-bin-")
		Expect(err).NotTo(HaveOccurred())
		dir = d
	}
	out := goBuild(context.Background(), pkg, filepath.Join(dir, filepath.Base(pkg)))
	extraBins[pkg] = out
	return out
}

// fuseAvailable reports whether this process may mount FUSE filesystems.
func fuseAvailable() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "kaas-floorfs needs root to mount FUSE"
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return false, "no usable /dev/fuse: " + err.Error()
	}
	_ = f.Close()
	return true, ""
}

// Floor is one kaas-floorfs process: n mounts, one per broker "host", of one
// backing directory.
type Floor struct {
	Backing string
	Mounts  []string
	Control string // 127.0.0.1:PORT
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
}

// StartFloor mounts n views of a fresh backing directory and registers its
// teardown.
func StartFloor(n int, extra ...string) *Floor {
	GinkgoHelper()
	if ok, why := fuseAvailable(); !ok {
		Skip(why)
	}
	bin := extraBinary("./cmd/kaas-floorfs", "KAAS_FLOORFS_BIN")
	root, err := os.MkdirTemp("", "kaas-floor-")
	Expect(err).NotTo(HaveOccurred())
	f := &Floor{Backing: filepath.Join(root, "backing"), Control: freeAddr(), LogPath: filepath.Join(logDir(), "floorfs.log"), done: make(chan struct{})}
	Expect(os.MkdirAll(f.Backing, 0o755)).To(Succeed())
	args := []string{"--backing", f.Backing, "--control", f.Control}
	for i := range n {
		m := filepath.Join(root, fmt.Sprintf("host%d", i+1))
		Expect(os.MkdirAll(m, 0o755)).To(Succeed())
		f.Mounts = append(f.Mounts, m)
		args = append(args, "--mount", m)
	}
	args = append(args, extra...)
	args = append(args, strings.Fields(os.Getenv("KAAS_FLOOR_ARGS"))...)
	logF, err := os.OpenFile(f.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	Expect(err).NotTo(HaveOccurred())
	f.cmd = exec.Command(bin, args...)
	f.cmd.Stderr = logF
	stdout, err := f.cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(f.cmd.Start()).To(Succeed())
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			_, _ = fmt.Fprintln(logF, sc.Text())
			if !signalled && strings.Contains(sc.Text(), "ready") {
				close(ready)
				signalled = true
			}
		}
		_ = f.cmd.Wait()
		_ = logF.Close()
		close(f.done)
	}()
	DeferCleanup(func() {
		f.Stop()
		_ = os.RemoveAll(root)
	})
	select {
	case <-ready:
	case <-f.done:
		Fail("kaas-floorfs exited before it was ready; log " + f.LogPath)
	case <-time.After(30 * time.Second):
		Fail("kaas-floorfs not ready after 30s; log " + f.LogPath)
	}
	fmt.Fprintf(GinkgoWriter, "floor filesystem up: %d mounts of %s (control %s)\n", n, f.Backing, f.Control)
	return f
}

// Stop unmounts (SIGTERM) and waits; it kills the process if it hangs.
func (f *Floor) Stop() {
	if f.cmd == nil || f.cmd.Process == nil {
		return
	}
	select {
	case <-f.done:
		return
	default:
	}
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.done:
	case <-time.After(20 * time.Second):
		_ = f.cmd.Process.Kill()
		<-f.done
		for _, m := range f.Mounts {
			_ = exec.Command("umount", "-l", m).Run()
		}
	}
}

func (f *Floor) control(method, path, body string) string {
	GinkgoHelper()
	req, err := http.NewRequest(method, "http://"+f.Control+path, strings.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	out, _ := io.ReadAll(resp.Body)
	Expect(resp.StatusCode).To(BeNumerically("<", 300), "%s %s: %s", method, path, out)
	return string(out)
}

// Crash power-cuts host i (0-based here, 1-based on the control API): what it has not synced is gone.
func (f *Floor) Crash(i int) { f.control("POST", fmt.Sprintf("/crash?mount=%d", i+1), "") }

// SetFaults replaces host i's fault spec (faultfs syntax).
func (f *Floor) SetFaults(i int, spec string) {
	f.control("POST", fmt.Sprintf("/faults?mount=%d", i+1), spec)
}

// ClearFaults removes host i's faults.
func (f *Floor) ClearFaults(i int) { f.control("DELETE", fmt.Sprintf("/faults?mount=%d", i+1), "") }

// Status is the floor's JSON status.
func (f *Floor) Status() string { return f.control("GET", "/status", "") }

// logDir is where this spec keeps tool logs.
func logDir() string {
	if d := os.Getenv("KAAS_SPECS_LOGDIR"); d != "" {
		_ = os.MkdirAll(d, 0o755)
		return d
	}
	return GinkgoT().TempDir()
}

// ---------------------------------------------------------------------------
// The chaos verifier

// Verifier is one `kaasverify run` process.
type Verifier struct {
	History, Report, LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	code int
}

// VerifyReport is kaasverify's report.
type VerifyReport struct {
	ExitCode int
	Output   string
	Raw      map[string]any
}

// StartVerifier loads topic through the given brokers until Stop.
func StartVerifier(brokers []*Broker, topic string, partitions int, args ...string) *Verifier {
	GinkgoHelper()
	bin := extraBinary("./cmd/kaasverify", "KAAS_VERIFY_BIN")
	dir := logDir()
	v := &Verifier{
		History: filepath.Join(dir, topic+".history.jsonl"),
		Report:  filepath.Join(dir, topic+".report.json"),
		LogPath: filepath.Join(dir, topic+".verifier.log"),
		done:    make(chan struct{}),
	}
	all := append([]string{"run", "--brokers", strings.Join(brokerAddrs(brokers), ","),
		"--topic", topic, "--partitions", fmt.Sprint(partitions),
		"--history", v.History, "--report", v.Report}, args...)
	logF, err := os.Create(v.LogPath)
	Expect(err).NotTo(HaveOccurred())
	v.cmd = exec.Command(bin, all...)
	v.cmd.Stdout, v.cmd.Stderr = logF, logF
	Expect(v.cmd.Start()).To(Succeed())
	go func() {
		err := v.cmd.Wait()
		v.code = exitCode(err)
		_ = logF.Close()
		close(v.done)
	}()
	DeferCleanup(func() {
		select {
		case <-v.done:
		default:
			_ = v.cmd.Process.Kill()
			<-v.done
		}
	})
	fmt.Fprintf(GinkgoWriter, "verifier started: %s %s\n", bin, strings.Join(all, " "))
	return v
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// Stop ends the load (SIGTERM), waits for the final read and the checks,
// and returns the report.
func (v *Verifier) Stop(within time.Duration) VerifyReport {
	GinkgoHelper()
	_ = v.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-v.done:
	case <-time.After(within):
		_ = v.cmd.Process.Signal(syscall.SIGQUIT)
		<-v.done
		Fail(fmt.Sprintf("kaasverify did not finish within %s; log %s", within, v.LogPath))
	}
	return readVerifyReport(v.Report, v.LogPath, v.code)
}

// CheckHistory reruns the checks over a history (after a spec appended its
// own events to it).
func CheckHistory(history string) VerifyReport {
	GinkgoHelper()
	bin := extraBinary("./cmd/kaasverify", "KAAS_VERIFY_BIN")
	report := strings.TrimSuffix(history, ".jsonl") + ".recheck.json"
	out, err := exec.Command(bin, "check", "--history", history, "--report", report).CombinedOutput()
	logPath := report + ".log"
	_ = os.WriteFile(logPath, out, 0o644)
	return readVerifyReport(report, logPath, exitCode(err))
}

func readVerifyReport(report, logPath string, code int) VerifyReport {
	GinkgoHelper()
	out, _ := os.ReadFile(logPath)
	r := VerifyReport{ExitCode: code, Output: string(out)}
	data, err := os.ReadFile(report)
	if err != nil && code == 2 {
		return r // a tool error (say, an incomplete final read): Output says which
	}
	Expect(err).NotTo(HaveOccurred(), "kaasverify (exit %d) wrote no report:\n%s", code, out)
	Expect(json.Unmarshal(data, &r.Raw)).To(Succeed())
	return r
}

// AppendHistory adds events to a history file.
func AppendHistory(history string, events []check.Event) {
	GinkgoHelper()
	f, err := os.OpenFile(history, os.O_WRONLY|os.O_APPEND, 0o644)
	Expect(err).NotTo(HaveOccurred())
	w := check.NewWriter(f)
	for _, e := range events {
		w.Record(e)
	}
	Expect(w.Flush()).To(Succeed())
	Expect(f.Close()).To(Succeed())
}

// waitCtx sleeps d or until ctx ends.
func waitCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
