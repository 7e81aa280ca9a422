package probe

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

// ChildEnv is set to "1" in the environment of the probe's child process.
const ChildEnv = "KAAS_PROBE_CHILD"

// ServeChildIfAsked turns this process into the probe's child when
// ChildEnv is set: it answers requests on stdin and exits. Commands that
// offer Config.ChildCommand call it first thing (an init func will do).
func ServeChildIfAsked() {
	if os.Getenv(ChildEnv) != "1" {
		return
	}
	if err := serveChild(os.Stdin, os.Stdout, volume.OS()); err != nil {
		fmt.Fprintln(os.Stderr, "kaas volume probe child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// childReq is one request to the child, one JSON object a line.
type childReq struct {
	Op   string `json:"op"` // read, create, loop, stop
	Path string `json:"path,omitempty"`
	Size int    `json:"size,omitempty"`
}

type childResp struct {
	Kind     string     `json:"kind"`
	Versions []uint64   `json:"versions,omitempty"`
	Msg      string     `json:"msg,omitempty"`
	Stats    *readStats `json:"stats,omitempty"`
}

// serveChild answers requests until in ends.
func serveChild(in io.Reader, out io.Writer, fsys volume.FS) error {
	dec := json.NewDecoder(bufio.NewReader(in))
	enc := json.NewEncoder(out)
	var (
		stop chan struct{}
		done chan readStats
	)
	for {
		var req childReq
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				if stop != nil {
					close(stop)
					<-done
				}
				return nil
			}
			return fmt.Errorf("decode request: %w", err)
		}
		var resp childResp
		switch req.Op {
		case "read":
			vs, err := readBlocks(fsys, req.Path, req.Size)
			resp.Kind, resp.Versions = kindOK, vs
			if err != nil {
				resp.Kind, resp.Msg = classify(err), err.Error()
			}
		case "create":
			kind, err := createOnce(fsys, req.Path)
			resp.Kind = kind
			if err != nil {
				resp.Msg = err.Error()
			}
		case "loop":
			if stop != nil {
				resp.Kind, resp.Msg = kindError, "a loop is already running"
				break
			}
			stop, done = make(chan struct{}), make(chan readStats, 1)
			go func(name string, size int, stop chan struct{}) {
				done <- readLoop(fsys, name, size, stop)
			}(req.Path, req.Size, stop)
			resp.Kind = kindOK
		case "stop":
			if stop == nil {
				resp.Kind, resp.Msg = kindError, "no loop is running"
				break
			}
			close(stop)
			st := <-done
			stop, done = nil, nil
			resp.Kind, resp.Stats = kindOK, &st
		default:
			resp.Kind, resp.Msg = kindError, fmt.Sprintf("unknown op %q", req.Op)
		}
		if err := enc.Encode(resp); err != nil {
			return fmt.Errorf("encode response: %w", err)
		}
	}
}

// child is the parent's handle on a running child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	enc   *json.Encoder
	resps chan childResp
	errc  chan error

	mu sync.Mutex
}

// childTimeout bounds one request to the child.
const childTimeout = 10 * time.Second

func startChild(ctx context.Context, argv []string) (*child, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), ChildEnv+"=1")
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("probe child: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("probe child: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start probe child %s: %w", argv[0], err)
	}
	c := &child{cmd: cmd, stdin: stdin, enc: json.NewEncoder(stdin),
		resps: make(chan childResp, 4), errc: make(chan error, 1)}
	go func() {
		dec := json.NewDecoder(bufio.NewReader(stdout))
		for {
			var r childResp
			if err := dec.Decode(&r); err != nil {
				c.errc <- fmt.Errorf("probe child: read response: %w", err)
				return
			}
			c.resps <- r
		}
	}()
	return c, nil
}

func (c *child) send(req childReq) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enc.Encode(req); err != nil {
		return fmt.Errorf("probe child: send %s: %w", req.Op, err)
	}
	return nil
}

func (c *child) recv(ctx context.Context) (childResp, error) {
	t := time.NewTimer(childTimeout)
	defer t.Stop()
	select {
	case r := <-c.resps:
		return r, nil
	case err := <-c.errc:
		return childResp{}, err
	case <-ctx.Done():
		return childResp{}, fmt.Errorf("probe child: %w", ctx.Err())
	case <-t.C:
		return childResp{}, errors.New("probe child: no answer within " + childTimeout.String())
	}
}

func (c *child) call(ctx context.Context, req childReq) (childResp, error) {
	if err := c.send(req); err != nil {
		return childResp{}, err
	}
	return c.recv(ctx)
}

// stop ends the child: closing its stdin makes it exit.
func (c *child) stop() {
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}
