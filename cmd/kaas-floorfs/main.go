// Command kaas-floorfs serves one shared directory as several FUSE mounts,
// one per simulated host, so that kaas brokers each running on their own
// mount see the shared volume the way separate NFS clients would: each
// host's view caches and buffers like an NFS client, loses its unflushed
// writes when power-cut, and can have faults injected at run time.
//
//	kaas-floorfs --backing /srv/floor --mount /mnt/h1 --mount /mnt/h2 \
//	    --control 127.0.0.1:7070 [--attr-ttl 3s --dir-ttl 30s --neg-ttl 0s] \
//	    [--faults 1=Sync:*.log:EIO:1 ...]
//
// Mount i (from 1, in flag order) is host "host<i>". --faults takes the
// mount's number or path, then a faultfs spec (see faultfs.ParseSpec); KILL
// in a spec power-cuts the host.
//
// The control server, on a loopback address only, answers
//
//	POST   /crash?mount=I   power-cut host I: its unflushed writes are lost
//	POST   /faults?mount=I  replace host I's faults by the spec in the body
//	DELETE /faults?mount=I  remove host I's faults
//	GET    /status          JSON: per mount dirty bytes, faults, op counts;
//	                        the hidden (silly-renamed) files
//
// Once every mount serves, the command prints "kaas-floorfs: ready". On
// SIGTERM or SIGINT it unmounts everything (lazily if a mount is busy) and
// exits 0. Mounts left behind by a killed kaas-floorfs are unmounted when
// the next one starts on the same mount points.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/fusefs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	default:
		fmt.Fprintln(os.Stderr, "kaas-floorfs:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

type options struct {
	backing string
	mounts  []string
	control string
	ttl     ttls
	faults  []string // "M=SPEC"
	debug   bool
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("kaas-floorfs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.backing, "backing", "", "shared backing directory (required)")
	fs.Var((*listFlag)(&o.mounts), "mount", "mount point of the next host (repeat; at least one)")
	fs.StringVar(&o.control, "control", "127.0.0.1:0", "control HTTP address, loopback only")
	fs.DurationVar(&o.ttl.attr, "attr-ttl", 0, "how long a host caches file attributes")
	fs.DurationVar(&o.ttl.dir, "dir-ttl", 0, "how long a host caches directory listings and entries")
	fs.DurationVar(&o.ttl.neg, "neg-ttl", 0, "how long a host caches a name's absence")
	fs.Var((*listFlag)(&o.faults), "faults", "M=SPEC: faults of mount M (number from 1, or path) (repeat)")
	fs.BoolVar(&o.debug, "debug", false, "log every FUSE request to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, usageError{err}
	}
	switch {
	case fs.NArg() > 0:
		return o, usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	case o.backing == "":
		return o, usageError{errors.New("--backing is required")}
	case len(o.mounts) == 0:
		return o, usageError{errors.New("at least one --mount is required")}
	}
	return o, nil
}

func hostName(i int) string { return "host" + strconv.Itoa(i+1) }

// mount is one served host.
type mount struct {
	n    int // from 1
	dir  string
	host host
	ff   *faultfs.FS
	srv  *fusefs.Server
	// exited is set once the mount's server stopped serving.
	exited atomic.Bool

	mu     sync.Mutex
	spec   string
	inject faultfs.Injector
}

// injector is the Injector faultfs is built with: it asks whatever the
// control server last installed, so faults change at run time.
func (m *mount) injector(op faultfs.Op) faultfs.Action {
	m.mu.Lock()
	inj := m.inject
	m.mu.Unlock()
	if inj == nil {
		return faultfs.Proceed
	}
	return inj(op)
}

// setFaults parses spec and installs it; an empty spec removes the faults.
func (m *mount) setFaults(spec string) error {
	inj, err := faultfs.ParseSpec(spec, func(faultfs.Op, string) { m.host.view.Crash() })
	if err != nil {
		return fmt.Errorf("mount %d: %w", m.n, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spec, m.inject = spec, inj
	return nil
}

func (m *mount) faults() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.spec
}

// run serves the mounts until ctx is done.
func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	ln, err := listenLoopback(o.control)
	if err != nil {
		return usageError{err}
	}
	defer func() { _ = ln.Close() }()

	backing, err := filepath.Abs(o.backing)
	if err != nil {
		return fmt.Errorf("backing %s: %w", o.backing, err)
	}
	if err := os.MkdirAll(backing, 0o755); err != nil {
		return fmt.Errorf("backing: %w", err)
	}

	fl := newFloor(volume.OS(), len(o.mounts), o.ttl)
	mounts := make([]*mount, len(o.mounts))
	for i, dir := range o.mounts {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fmt.Errorf("mount %s: %w", dir, err)
		}
		m := &mount{n: i + 1, dir: abs, host: fl.hosts[i]}
		m.ff = faultfs.New(m.host.view, m.injector)
		mounts[i] = m
	}
	for _, f := range o.faults {
		which, spec, ok := strings.Cut(f, "=")
		if !ok {
			return usageError{fmt.Errorf("--faults %q: want M=SPEC", f)}
		}
		m := findMount(mounts, which)
		if m == nil {
			return usageError{fmt.Errorf("--faults %q: no mount %q", f, which)}
		}
		if err := m.setFaults(spec); err != nil {
			return usageError{fmt.Errorf("--faults: %w", err)}
		}
	}

	defer func() {
		if uerr := unmountAll(mounts); uerr != nil && err == nil {
			err = uerr
		}
	}()
	gone := make(chan *mount, len(mounts))
	for _, m := range mounts {
		// A mount point left by a killed kaas-floorfs answers ENOTCONN
		// and cannot be mounted over usefully.
		if err := fusefs.UnmountStale(m.dir); err != nil {
			return err
		}
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return fmt.Errorf("mount point: %w", err)
		}
		srv, err := fusefs.Mount(m.dir, m.ff, backing, fusefs.Options{
			Name:      "kaas-floorfs-" + m.host.name,
			StatfsDir: backing,
			Debug:     o.debug,
		})
		if err != nil {
			return err
		}
		m.srv = srv
		go func() {
			srv.Wait()
			m.exited.Store(true)
			gone <- m
		}()
	}

	hs := &http.Server{Handler: controlHandler(mounts, fl), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()

	fmt.Fprintf(stdout, "kaas-floorfs: control http://%s\n", ln.Addr())
	fmt.Fprintln(stdout, "kaas-floorfs: ready")

	select {
	case <-ctx.Done():
		return nil
	case m := <-gone:
		return fmt.Errorf("mount %d (%s) was unmounted from outside", m.n, m.dir)
	case err := <-serveErr:
		return fmt.Errorf("control server: %w", err)
	}
}

// listenLoopback listens on addr, which must name a loopback IP: the
// control server lets anyone who reaches it crash hosts.
func listenLoopback(addr string) (net.Listener, error) {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--control %q: %w", addr, err)
	}
	if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("--control %q: must be a loopback IP such as 127.0.0.1", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("control server: %w", err)
	}
	return ln, nil
}

func findMount(mounts []*mount, which string) *mount {
	if n, err := strconv.Atoi(which); err == nil {
		if n >= 1 && n <= len(mounts) {
			return mounts[n-1]
		}
		return nil
	}
	abs, err := filepath.Abs(which)
	if err != nil {
		return nil
	}
	for _, m := range mounts {
		if m.dir == abs {
			return m
		}
	}
	return nil
}

// unmountAll unmounts every mount that serves, lazily where busy.
func unmountAll(mounts []*mount) error {
	var errs []error
	for _, m := range mounts {
		if m == nil || m.srv == nil || m.exited.Load() {
			continue
		}
		if err := m.srv.Unmount(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
