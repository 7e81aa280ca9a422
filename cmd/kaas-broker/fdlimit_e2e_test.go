package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/volume"
)

// The child broker of TestBrokerUnderLowFDLimit runs in this test binary
// (TestFDLimitHelperBroker) with its fd limit, soft and hard, lowered to
// helperFDLimit: a limit it cannot raise, as in a container started with
// a low one.
const (
	helperArgsEnv = "KAAS_FDTEST_BROKER_ARGS"
	helperFDLimit = 1024
	// widePartitions needs about 4 fds each: more than helperFDLimit holds.
	widePartitions = 300
)

// TestFDLimitHelperBroker is the child broker; it runs only under
// TestBrokerUnderLowFDLimit.
func TestFDLimitHelperBroker(t *testing.T) {
	args := os.Getenv(helperArgsEnv)
	if args == "" {
		t.Skip("runs only as the child broker of TestBrokerUnderLowFDLimit")
	}
	lim := unix.Rlimit{Cur: helperFDLimit, Max: helperFDLimit}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		os.Exit(3)
	}
	o, err := parseFlags(strings.Fields(args))
	if err != nil {
		fmt.Fprintln(os.Stderr, "flags:", err)
		os.Exit(2)
	}
	log := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := run(o, log); err != nil {
		fmt.Fprintln(os.Stderr, "broker stopped:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// childBroker is one run of the helper broker.
type childBroker struct {
	cmd    *exec.Cmd
	exited chan error
	stderr *os.File
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startChild(t *testing.T, data, listen, admin, logName string) *childBroker {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), logName))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFDLimitHelperBroker$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperArgsEnv+"=--data "+data+" --listen "+listen+" --admin "+admin+
		" --heartbeat-interval 100ms --lease 1s")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childBroker{cmd: cmd, exited: make(chan error, 1), stderr: logf}
	go func() { c.exited <- cmd.Wait() }()
	t.Cleanup(func() { c.stop(t) })
	return c
}

// stop ends the child with SIGTERM (SIGKILL after 20 s).
func (c *childBroker) stop(t *testing.T) {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	c.cmd = nil
}

// alive fails the test, with the end of the child's log, if it exited.
func (c *childBroker) alive(t *testing.T, when string) {
	t.Helper()
	select {
	case err := <-c.exited:
		c.cmd = nil
		t.Fatalf("%s: the broker exited (%v); the end of its log:\n%s", when, err, tail(c.stderr.Name(), 15))
	default:
	}
}

func tail(name string, lines int) string {
	b, _ := os.ReadFile(name)
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	for i, l := range ls {
		if len(l) > 400 {
			ls[i] = l[:400] + " ..."
		}
	}
	return strings.Join(ls, "\n")
}

func httpGet(url string) (int, string, error) {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// waitHealthy waits for /healthz to answer.
func waitHealthy(t *testing.T, c *childBroker, admin string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c.alive(t, "starting")
		if code, _, err := httpGet("http://" + admin + "/healthz"); err == nil && code == 200 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the broker did not answer /healthz within 20 s:\n%s", tail(c.stderr.Name(), 15))
}

// newClientServed opens a new client connection and checks that the
// broker answers it (Metadata) within a few seconds.
func newClientServed(t *testing.T, c *childBroker, listen, when string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(listen), kgo.RetryTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = cl.Request(ctx, kmsg.NewPtrMetadataRequest())
	c.alive(t, when)
	if err != nil {
		t.Fatalf("%s: a new client connection was not served: %v\n%s", when, err, tail(c.stderr.Name(), 15))
	}
}

// TestBrokerUnderLowFDLimit is finding 1 of issue 15 (its partition
// half): a CreateTopics of more partitions than the broker's fd limit
// holds must be refused up front with POLICY_VIOLATION, and a broker
// that finds more assigned partitions than it can open (a desired state
// written before the budget existed) must serve what it can, report the
// rest, keep serving new client connections, and not crash-loop.
func TestBrokerUnderLowFDLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child brokers")
	}
	data := t.TempDir()
	listen, admin := freePort(t), freePort(t)

	// 1. CreateTopics of widePartitions on one broker.
	c := startChild(t, data, listen, admin, "run1.log")
	waitHealthy(t, c, admin)
	cl, err := kgo.NewClient(kgo.SeedBrokers(listen))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, widePartitions, 1, nil, "big")
	cancel()
	cl.Close()
	c.alive(t, "after CreateTopics")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.PolicyViolation) {
		t.Errorf("CreateTopics of %d partitions under an fd limit of %d: %v (%q), want POLICY_VIOLATION", widePartitions, helperFDLimit, err, resp.ErrMessage)
	} else if !strings.Contains(resp.ErrMessage, "--max-partitions-per-broker") {
		t.Errorf("refusal message %q does not name --max-partitions-per-broker", resp.ErrMessage)
	}
	for i := 0; i < 5; i++ {
		newClientServed(t, c, listen, fmt.Sprintf("after CreateTopics, connection %d", i))
	}
	c.stop(t)

	// 2. The desired state asks for more partitions than the budget holds
	// (written as an older broker, or a shared volume's other writer,
	// could have): every start must serve what it can and keep serving.
	clusterDir := filepath.Join(data, "__cluster")
	if err := desired.WriteTopicSpec(volume.OS(), clusterDir, desired.TopicSpec{Name: "wide", ID: uuid.NewString(),
		Partitions: widePartitions, Generation: 1}); err != nil {
		t.Fatal(err)
	}
	for run := 2; run <= 3; run++ {
		c := startChild(t, data, listen, admin, fmt.Sprintf("run%d.log", run))
		waitHealthy(t, c, admin)
		// Let the reconciler open what it can (it stops at the budget, or
		// would meet EMFILE), meeting new connections meanwhile.
		var body string
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			newClientServed(t, c, listen, fmt.Sprintf("run %d, while opening", run))
			code, b, err := httpGet("http://" + admin + "/readyz")
			if err == nil && code == http.StatusServiceUnavailable && strings.Contains(b, "budget") {
				body = b
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if body == "" {
			t.Fatalf("run %d: /readyz never said partitions are over the budget:\n%s", run, tail(c.stderr.Name(), 15))
		}
		t.Logf("run %d: /readyz: %s", run, strings.TrimSpace(body))
		// What the partitions hold leaves the connections' share free.
		if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", c.cmd.Process.Pid)); err == nil {
			fb := deriveFDBudget(helperFDLimit, 0, 0)
			t.Logf("run %d: the broker holds %d fds (limit %d, connections' share %d)", run, len(ents), helperFDLimit, fb.Connections)
			if len(ents) > helperFDLimit-fb.Connections {
				t.Errorf("run %d: the broker holds %d fds, more than the limit %d less the connections' share %d", run, len(ents), helperFDLimit, fb.Connections)
			}
		}
		for i := 0; i < 10; i++ {
			newClientServed(t, c, listen, fmt.Sprintf("run %d, over budget, connection %d", run, i))
		}
		if _, st, err := httpGet("http://" + admin + "/status"); err != nil || !strings.Contains(st, "partition budget") {
			t.Errorf("run %d: /status does not report the unopened partitions (%v)", run, err)
		}
		c.stop(t)
	}
}
