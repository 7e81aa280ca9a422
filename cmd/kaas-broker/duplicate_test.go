package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/volume"
)

// brokerArgsEnv makes this test binary run kaas-broker's main with the
// arguments it holds (separated by newlines): the tests below start real
// broker processes without building the command.
const brokerArgsEnv = "KAAS_TEST_BROKER_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(brokerArgsEnv); ok {
		os.Args = append([]string{"kaas-broker"}, strings.Split(args, "\n")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// brokerProcess is a kaas-broker process started by a test.
type brokerProcess struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error // Wait's, once done is closed
}

func startBrokerProcess(t *testing.T, args ...string) *brokerProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), brokerArgsEnv+"="+strings.Join(args, "\n"))
	p := &brokerProcess{cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// exited waits up to d for the process to end and reports whether it did.
func (p *brokerProcess) exited(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// waitLog waits up to d for the process to log s.
func (p *brokerProcess) waitLog(t *testing.T, s string, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); !strings.Contains(p.out.String(), s); {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %v; output:\n%s", s, d, p.out)
		}
		select {
		case <-p.done:
			t.Fatalf("exited (%v) before logging %q; output:\n%s", p.err, s, p.out)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSecondProcessWithSameIDRefused starts a broker, then a second
// process with the same --id on the same volume: the second must exit
// non-zero, saying why, instead of fence-fighting the first forever.
// After the first is killed (a crash) a new process starts within about
// a lease; after that one stops cleanly the next starts at once.
func TestSecondProcessWithSameIDRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	const lease = 600 * time.Millisecond
	dir := t.TempDir()
	args := []string{"--data", dir, "--id", "3", "--listen", "127.0.0.1:0", "--admin", "",
		"--check-volume", "off", "--heartbeat-interval", "50ms", "--lease", lease.String(), "--shutdown-timeout", "2s"}

	first := startBrokerProcess(t, args...)
	first.waitLog(t, "kaas broker started", 20*time.Second)
	waitAdvancing(t, filepath.Join(dir, "__cluster"), 3)

	second := startBrokerProcess(t, args...)
	if !second.exited(lease + 10*time.Second) {
		t.Fatalf("a second process with --id 3 is still running; output:\n%s", second.out)
	}
	var ee *exec.ExitError
	if !errors.As(second.err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("second process exit %v, want non-zero; output:\n%s", second.err, second.out)
	}
	for _, want := range []string{"broker 3 is already running", "heartbeat advancing", "refusing to start a second process with --id 3"} {
		if !strings.Contains(second.out.String(), want) {
			t.Fatalf("second process output lacks %q:\n%s", want, second.out)
		}
	}
	t.Logf("the second process said: %s", strings.TrimSpace(second.out.String()))
	if first.exited(0) {
		t.Fatalf("the first broker stopped: %v\n%s", first.err, first.out)
	}

	// A crash: the heartbeat stops advancing; the next process waits out
	// at most a lease and starts.
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.done
	restarted := startBrokerProcess(t, args...)
	restarted.waitLog(t, "kaas broker started", lease+10*time.Second)

	// A clean stop marks the heartbeat leaving: the next starts at once.
	if err := restarted.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !restarted.exited(10*time.Second) || restarted.err != nil {
		t.Fatalf("clean stop: %v\n%s", restarted.err, restarted.out)
	}
	again := startBrokerProcess(t, args...)
	again.waitLog(t, "kaas broker started", 10*time.Second)
	if strings.Contains(again.out.String(), "waiting") {
		t.Fatalf("a clean restart waited:\n%s", again.out)
	}
}

// waitAdvancing waits until broker id's heartbeat has advanced once.
func waitAdvancing(t *testing.T, clusterDir string, id int32) {
	t.Helper()
	var first uint64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		hb, err := cluster.ReadHeartbeat(volume.OS(), clusterDir, id)
		if err != nil {
			continue
		}
		if first == 0 {
			first = hb.Counter
		} else if hb.Counter > first {
			return
		}
	}
	t.Fatalf("broker %d's heartbeat does not advance", id)
}
