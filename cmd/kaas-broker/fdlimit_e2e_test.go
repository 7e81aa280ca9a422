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
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/kaas-dev/kaas/volume/partlog"
)

// The child broker of TestBrokerUnderLowFDLimit runs in this test binary
// (TestFDLimitHelperBroker) with its fd limit, soft and hard, lowered to
// helperFDLimit: a limit it cannot raise, as in a container started with
// a low one.
const (
	helperArgsEnv = "KAAS_FDTEST_BROKER_ARGS"
	helperFDLimit = 1024
	// widePartitions is five times what the fd budget of partitions held
	// at helperFDLimit before partition files were cached (103 partitions
	// at 5 fds each), and far more than the limit at the 4 fds each a
	// partition held open then.
	widePartitions = 500
	// budgetPartitions is the explicit --max-partitions-per-broker of the
	// refusal half of the test.
	budgetPartitions = 100
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

func startChild(t *testing.T, data, listen, admin, logName string, extra ...string) *childBroker {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), logName))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFDLimitHelperBroker$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperArgsEnv+"=--data "+data+" --listen "+listen+" --admin "+admin+
		" --heartbeat-interval 100ms --lease 1s "+strings.Join(extra, " "))
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

// fdsOf counts the fds process pid holds (-1 if /proc cannot tell).
func fdsOf(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestBrokerUnderLowFDLimit: under an fd limit of 1024 a broker creates,
// serves and takes a produce on every one of widePartitions partitions
// (five times what the old fd budget allowed), holding fewer fds than the
// limit less the connections' share throughout and about none per idle
// partition, and keeps serving new connections. The partition budget is
// no longer an fd budget, but an explicit --max-partitions-per-broker
// still refuses a CreateTopics beyond it with POLICY_VIOLATION, and a
// broker assigned more than it serves what it can, reports the rest and
// keeps serving.
func TestBrokerUnderLowFDLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child brokers")
	}
	data := t.TempDir()
	listen, admin := freePort(t), freePort(t)
	fb := deriveFDBudget(helperFDLimit, 0, partlog.DefaultSyncWorkers)
	ceiling := helperFDLimit - fb.Connections

	// 1. CreateTopics of widePartitions, a produce to each, then idle.
	c := startChild(t, data, listen, admin, "run1.log", "--handle-idle", "1s")
	waitHealthy(t, c, admin)
	pid := c.cmd.Process.Pid
	cl, err := kgo.NewClient(kgo.SeedBrokers(listen), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, widePartitions, 1, nil, "wide")
	if err == nil {
		err = resp.Err
	}
	c.alive(t, "after CreateTopics")
	if err != nil {
		t.Fatalf("CreateTopics of %d partitions under an fd limit of %d: %v (%q)\n%s", widePartitions, helperFDLimit, err, resp.ErrMessage, tail(c.stderr.Name(), 15))
	}
	most := 0
	waitReady(t, c, admin, func() { most = max(most, fdsOf(pid)) })
	var recs []*kgo.Record
	for p := range int32(widePartitions) {
		recs = append(recs, &kgo.Record{Topic: "wide", Partition: p, Value: []byte(fmt.Sprint(p))})
	}
	produced := make(chan error, 1)
	go func() { produced <- cl.ProduceSync(ctx, recs...).FirstErr() }()
	for done := false; !done; {
		select {
		case err := <-produced:
			if err != nil {
				t.Fatalf("a produce to each of %d partitions: %v\n%s", widePartitions, err, tail(c.stderr.Name(), 15))
			}
			done = true
		case <-time.After(20 * time.Millisecond):
			most = max(most, fdsOf(pid))
		}
	}
	busy := fdsOf(pid)
	most = max(most, busy)
	for i := 0; i < 5; i++ {
		newClientServed(t, c, listen, fmt.Sprintf("after the produce, connection %d", i))
	}
	t.Logf("%d partitions served under an fd limit of %d: at most %d fds held while creating and producing (ceiling %d: the limit less the connections' share %d), %d after the produce",
		widePartitions, helperFDLimit, most, ceiling, fb.Connections, busy)
	if most > ceiling {
		t.Errorf("the broker held %d fds, more than the limit %d less the connections' share %d", most, helperFDLimit, fb.Connections)
	}
	// Idle: every partition's files close (--handle-idle 1s).
	var idle int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if idle = fdsOf(pid); idle >= 0 && idle < widePartitions/10 {
			break
		}
	}
	t.Logf("idle: %d fds for %d partitions (%.3f per partition, the broker's own included)", idle, widePartitions, float64(idle)/widePartitions)
	if idle >= widePartitions/10 {
		t.Errorf("idle, the broker still holds %d fds for %d partitions", idle, widePartitions)
	}
	cl.Close()
	c.stop(t)

	// 2. An explicit partition budget: a CreateTopics beyond it is refused
	// up front, and a desired state larger than it (written as an older
	// broker, or a shared volume's other writer, could have) is served as
	// far as it goes, the rest reported, at every start.
	budget := []string{"--max-partitions-per-broker", fmt.Sprint(budgetPartitions)}
	c = startChild(t, data, listen, admin, "run2.log", budget...)
	waitHealthy(t, c, admin)
	cl2, err := kgo.NewClient(kgo.SeedBrokers(listen))
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	resp, err = kadm.NewClient(cl2).CreateTopic(ctx2, 2*budgetPartitions, 1, nil, "big")
	cancel2()
	cl2.Close()
	c.alive(t, "after CreateTopics")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.PolicyViolation) {
		t.Errorf("CreateTopics of %d partitions with --max-partitions-per-broker %d: %v (%q), want POLICY_VIOLATION", 2*budgetPartitions, budgetPartitions, err, resp.ErrMessage)
	} else if !strings.Contains(resp.ErrMessage, "--max-partitions-per-broker") {
		t.Errorf("refusal message %q does not name --max-partitions-per-broker", resp.ErrMessage)
	}
	for run := 2; run <= 3; run++ {
		if run > 2 {
			c = startChild(t, data, listen, admin, fmt.Sprintf("run%d.log", run), budget...)
			waitHealthy(t, c, admin)
		}
		var body string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			newClientServed(t, c, listen, fmt.Sprintf("run %d, while opening", run))
			code, b, err := httpGet("http://" + admin + "/readyz")
			if err == nil && code == http.StatusServiceUnavailable && strings.Contains(b, "budget") {
				body = b
				break
			}
		}
		if body == "" {
			t.Fatalf("run %d: /readyz never said partitions are over the budget:\n%s", run, tail(c.stderr.Name(), 15))
		}
		t.Logf("run %d: /readyz: %s", run, strings.TrimSpace(body))
		for i := 0; i < 10; i++ {
			newClientServed(t, c, listen, fmt.Sprintf("run %d, over budget, connection %d", run, i))
		}
		if _, st, err := httpGet("http://" + admin + "/status"); err != nil || !strings.Contains(st, "partition budget") {
			t.Errorf("run %d: /status does not report the unopened partitions (%v)", run, err)
		}
		c.stop(t)
	}
}

// waitReady waits for /readyz to answer 200, calling each meanwhile.
func waitReady(t *testing.T, c *childBroker, admin string, each func()) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c.alive(t, "waiting for every partition to be served")
		each()
		if code, _, err := httpGet("http://" + admin + "/readyz"); err == nil && code == http.StatusOK {
			return
		}
	}
	_, b, _ := httpGet("http://" + admin + "/readyz")
	t.Fatalf("/readyz did not answer 200 within 60 s: %s\n%s", b, tail(c.stderr.Name(), 15))
}
