package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

// The cross-host close-to-open check. One mount cannot show whether another
// host's client cache serves stale data, so a starting broker N asks a live
// peer P for help, through files under <cluster>/probes/:
//
//  1. N writes <N>.probe (session s, nonce r1; fixed size) atomically.
//  2. P lists the directory, reads <N>.probe and answers with an atomically
//     written <N>.<P>.seen: {s, phase 1, read r1}.
//  3. N rewrites <N>.probe in place with r2 (same size), closes it, then
//     exclusive-creates <N>.go (s).
//  4. P, once it opens <N>.go, reopens <N>.probe and answers <N>.<P>.seen:
//     {s, phase 2, read ...}. Reading r1 there is a close-to-open violation:
//     P's client served what it had cached before N's close.
//
// N bounds the whole exchange (CrossHostConfig.Timeout) and removes its
// files when done; files older than a few leases on the sweeper's own clock
// are removed by any responder.

// ProbesDir holds the cross-host check's files.
const ProbesDir = "probes"

// DefaultCrossHostTimeout bounds one cross-host check.
const DefaultCrossHostTimeout = 5 * time.Second

const (
	probeFileSize = 64
	crossHostHint = "another host's client served contents cached before this broker closed the file; on GlusterFS turn client caching off (performance.quick-read, io-cache, read-ahead, stat-prefetch, write-behind, open-behind, readdir-ahead and nl-cache off; mount with --attribute-timeout=0 --entry-timeout=0 --negative-timeout=0 --fopen-keep-cache=off); on NFS do not mount with nocto; see docs/mount-options.md"
)

func probePath(clusterDir string, n int32) string {
	return path.Join(clusterDir, ProbesDir, strconv.Itoa(int(n))+".probe")
}

func goPath(clusterDir string, n int32) string {
	return path.Join(clusterDir, ProbesDir, strconv.Itoa(int(n))+".go")
}

func seenPath(clusterDir string, n, p int32) string {
	return path.Join(clusterDir, ProbesDir, strconv.Itoa(int(n))+"."+strconv.Itoa(int(p))+".seen")
}

// probeContent is the fixed-size content of <N>.probe.
func probeContent(session, nonce string) []byte {
	s := "kaas-xhost " + session + " " + nonce
	return []byte(s + strings.Repeat(" ", probeFileSize-1-len(s)) + "\n")
}

// parseProbe returns the session and nonce of a probe file's content.
func parseProbe(b []byte) (session, nonce string, ok bool) {
	f := strings.Fields(string(b))
	if len(b) != probeFileSize || len(f) != 3 || f[0] != "kaas-xhost" {
		return "", "", false
	}
	return f[1], f[2], true
}

// seenReply is the content of <N>.<P>.seen.
type seenReply struct {
	Session string `json:"session"`
	Phase   int    `json:"phase"`
	Read    string `json:"read"`
	Err     string `json:"err,omitempty"`
}

func randomHex() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("cross-host check: random nonce: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// CrossHostConfig configures a starting broker's cross-host check.
type CrossHostConfig struct {
	FS         volume.FS
	ClusterDir string
	BrokerID   int32
	// Timeout bounds the whole check (default DefaultCrossHostTimeout).
	Timeout time.Duration
	// Lease is how long to wait for another broker's heartbeat to advance
	// before deciding no peer is live (default DefaultLease).
	Lease time.Duration
	// Clock measures both (default MonotonicClock()).
	Clock Clock
}

// CrossHostResult is what a cross-host check found.
type CrossHostResult struct {
	// Skipped is set when no live peer took part; Reason says why.
	Skipped bool
	Reason  string
	// Peers answered both phases with the new contents; Stale read the old.
	Peers, Stale []int32
	// Err names the violated guarantee when Stale is not empty.
	Err error
}

type crossState int

const (
	crossStart crossState = iota
	crossPhase1
	crossPhase2
	crossDone
)

// CrossHostCheck is one run of the handshake, driven by Step so that tests
// can interleave it with responders deterministically.
type CrossHostCheck struct {
	cfg   CrossHostConfig
	state crossState
	start time.Duration

	session, r1, r2 string
	counters        map[int32]Heartbeat // the first heartbeat seen of each other broker
	live            bool
	candidates      []int32
	answered        map[int32]bool // P -> phase-2 answer received
	res             CrossHostResult
}

// NewCrossHostCheck prepares a check; nothing is written until Step.
func NewCrossHostCheck(cfg CrossHostConfig) *CrossHostCheck {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultCrossHostTimeout
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Clock == nil {
		cfg.Clock = MonotonicClock()
	}
	return &CrossHostCheck{cfg: cfg, counters: map[int32]Heartbeat{}, answered: map[int32]bool{}}
}

// Result returns the outcome; it is final once Step reported done.
func (c *CrossHostCheck) Result() CrossHostResult { return c.res }

func (c *CrossHostCheck) finish(res CrossHostResult) (bool, error) {
	c.state, c.res = crossDone, res
	return true, nil
}

func (c *CrossHostCheck) skip(reason string) (bool, error) {
	return c.finish(CrossHostResult{Skipped: true, Reason: reason})
}

// Step advances the check by one poll and reports whether it is done. An
// error is an I/O failure of this broker's own writes: the check is then
// inconclusive (Result says skipped).
func (c *CrossHostCheck) Step() (bool, error) {
	switch c.state {
	case crossStart:
		return c.begin()
	case crossPhase1:
		return c.phase1()
	case crossPhase2:
		return c.phase2()
	}
	return true, nil
}

// others records the heartbeats of the other brokers and whether any has
// advanced since first seen.
func (c *CrossHostCheck) others() {
	hbs, _ := ReadHeartbeats(c.cfg.FS, c.cfg.ClusterDir)
	for _, hb := range hbs {
		if hb.BrokerID == c.cfg.BrokerID || hb.Leaving {
			continue
		}
		first, ok := c.counters[hb.BrokerID]
		if !ok {
			c.counters[hb.BrokerID] = hb
			c.candidates = append(c.candidates, hb.BrokerID)
			sort.Slice(c.candidates, func(i, j int) bool { return c.candidates[i] < c.candidates[j] })
			continue
		}
		if hb.Incarnation != first.Incarnation || hb.Counter > first.Counter {
			c.live = true
		}
	}
}

func (c *CrossHostCheck) begin() (bool, error) {
	c.start = c.cfg.Clock()
	c.removeOwn()
	c.others()
	if len(c.candidates) == 0 {
		return c.skip("no other broker has a heartbeat")
	}
	var err error
	if c.session, err = randomHex(); err != nil {
		return c.fail(err)
	}
	if c.r1, err = randomHex(); err != nil {
		return c.fail(err)
	}
	if c.r2, err = randomHex(); err != nil {
		return c.fail(err)
	}
	if err := writeAtomicMkdir(c.cfg.FS, probePath(c.cfg.ClusterDir, c.cfg.BrokerID), probeContent(c.session, c.r1)); err != nil {
		return c.fail(fmt.Errorf("cross-host check: write probe: %w", err))
	}
	c.state = crossPhase1
	return false, nil
}

func (c *CrossHostCheck) fail(err error) (bool, error) {
	c.state, c.res = crossDone, CrossHostResult{Skipped: true, Reason: err.Error()}
	return true, err
}

// readSeen reads P's answer, if there is one of this session.
func (c *CrossHostCheck) readSeen(p int32) (seenReply, bool) {
	b, err := volume.ReadFile(c.cfg.FS, seenPath(c.cfg.ClusterDir, c.cfg.BrokerID, p))
	if err != nil {
		return seenReply{}, false
	}
	var r seenReply
	if json.Unmarshal(b, &r) != nil || r.Session != c.session {
		return seenReply{}, false
	}
	return r, true
}

func (c *CrossHostCheck) phase1() (bool, error) {
	c.others()
	for _, p := range c.candidates {
		if r, ok := c.readSeen(p); ok && r.Phase == 1 && r.Read == c.r1 {
			c.answered[p] = false
		}
	}
	elapsed := c.cfg.Clock() - c.start
	if len(c.answered) == 0 {
		switch {
		case !c.live && elapsed >= c.cfg.Lease:
			return c.skip(fmt.Sprintf("no other broker's heartbeat advanced within %v", c.cfg.Lease))
		case elapsed >= c.cfg.Timeout:
			return c.skip(fmt.Sprintf("no live broker answered within %v", c.cfg.Timeout))
		}
		return false, nil
	}
	// Rewrite in place, same size, and close: close-to-open says the next
	// open on any host sees r2. Only then announce it.
	name := probePath(c.cfg.ClusterDir, c.cfg.BrokerID)
	f, err := c.cfg.FS.OpenReadWrite(name)
	if err != nil {
		return c.fail(fmt.Errorf("cross-host check: reopen probe: %w", err))
	}
	if _, err := f.WriteAt(probeContent(c.session, c.r2), 0); err != nil {
		_ = f.Close()
		return c.fail(fmt.Errorf("cross-host check: rewrite probe %s: %w", name, err))
	}
	if err := f.Close(); err != nil {
		return c.fail(fmt.Errorf("cross-host check: close probe %s: %w", name, err))
	}
	if err := volume.CreateExclusiveFile(c.cfg.FS, goPath(c.cfg.ClusterDir, c.cfg.BrokerID), []byte(c.session+"\n")); err != nil {
		return c.fail(fmt.Errorf("cross-host check: announce rewrite: %w", err))
	}
	c.state = crossPhase2
	return false, nil
}

func (c *CrossHostCheck) phase2() (bool, error) {
	var msgs []string
	for _, p := range sortedKeys(c.answered) {
		if c.answered[p] {
			continue
		}
		r, ok := c.readSeen(p)
		if !ok || r.Phase != 2 {
			continue
		}
		c.answered[p] = true
		switch r.Read {
		case c.r2:
			c.res.Peers = append(c.res.Peers, p)
		case c.r1:
			c.res.Stale = append(c.res.Stale, p)
		default:
			c.res.Stale = append(c.res.Stale, p)
			msgs = append(msgs, fmt.Sprintf("broker %d read neither version (%q %s)", p, r.Read, r.Err))
		}
	}
	all := true
	for _, done := range c.answered {
		all = all && done
	}
	if !all && c.cfg.Clock()-c.start < c.cfg.Timeout {
		return false, nil
	}
	if len(c.res.Stale) > 0 {
		c.res.Err = fmt.Errorf("close-to-open across hosts: broker %v reopened %s after broker %d rewrote it in place and closed it, and read the previous contents%s; %s",
			c.res.Stale, probePath(c.cfg.ClusterDir, c.cfg.BrokerID), c.cfg.BrokerID, joinMsgs(msgs), crossHostHint)
	} else if len(c.res.Peers) == 0 {
		c.res.Skipped, c.res.Reason = true, fmt.Sprintf("brokers %v answered the first read but not the second within %v", sortedKeys(c.answered), c.cfg.Timeout)
	}
	c.state = crossDone
	return true, nil
}

func joinMsgs(m []string) string {
	if len(m) == 0 {
		return ""
	}
	return " (" + strings.Join(m, "; ") + ")"
}

func sortedKeys(m map[int32]bool) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// removeOwn removes this broker's probe files (from this run or a crashed
// earlier one), best effort: they are swept later otherwise.
func (c *CrossHostCheck) removeOwn() {
	dir := path.Join(c.cfg.ClusterDir, ProbesDir)
	ents, err := c.cfg.FS.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := strconv.Itoa(int(c.cfg.BrokerID)) + "."
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, prefix) || strings.HasPrefix(name, "."+prefix) {
			_ = c.cfg.FS.Remove(path.Join(dir, name))
		}
	}
}

// Cleanup removes this broker's probe files.
func (c *CrossHostCheck) Cleanup() {
	c.removeOwn()
	// A listing may be stale: remove the known names directly too.
	_ = c.cfg.FS.Remove(probePath(c.cfg.ClusterDir, c.cfg.BrokerID))
	_ = c.cfg.FS.Remove(goPath(c.cfg.ClusterDir, c.cfg.BrokerID))
	for _, p := range c.candidates {
		_ = c.cfg.FS.Remove(seenPath(c.cfg.ClusterDir, c.cfg.BrokerID, p))
	}
}

// CheckCrossHost runs the whole check, polling every poll (default 20 ms),
// and removes its files. It returns early with ctx.
func CheckCrossHost(ctx context.Context, cfg CrossHostConfig, poll time.Duration) (CrossHostResult, error) {
	if poll <= 0 {
		poll = 20 * time.Millisecond
	}
	c := NewCrossHostCheck(cfg)
	defer c.Cleanup()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		done, err := c.Step()
		if done {
			return c.Result(), err
		}
		select {
		case <-ctx.Done():
			return CrossHostResult{Skipped: true, Reason: ctx.Err().Error()}, fmt.Errorf("cross-host check: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// ProbeResponder answers other brokers' cross-host checks from this
// broker's heartbeat loop (Round), and sweeps abandoned probe files. It is
// safe for concurrent use.
type ProbeResponder struct {
	fsys       volume.FS
	clusterDir string
	self       int32
	now        Clock
	timeout    time.Duration
	sweepAfter time.Duration

	mu    sync.Mutex
	reqs  map[int32]*probeReq
	files map[string]fileSighting
}

type probeReq struct {
	session string
	phase   int // 1: answered the first read; 2: answered both
	at      time.Duration
}

type fileSighting struct {
	token string // size and mtime: a change means the file was rewritten
	first time.Duration
}

// NewProbeResponder returns broker self's responder. Probe files that stay
// unchanged for 4 leases (at least twice DefaultCrossHostTimeout) on this
// broker's clock are swept.
func NewProbeResponder(fsys volume.FS, clusterDir string, self int32, lease time.Duration, clock Clock) *ProbeResponder {
	if lease <= 0 {
		lease = DefaultLease
	}
	if clock == nil {
		clock = MonotonicClock()
	}
	return &ProbeResponder{fsys: fsys, clusterDir: clusterDir, self: self, now: clock,
		timeout: DefaultCrossHostTimeout, sweepAfter: max(4*lease, 2*DefaultCrossHostTimeout),
		reqs: map[int32]*probeReq{}, files: map[string]fileSighting{}}
}

// probeFileOf parses a probe directory entry: the initiator of a .probe
// file, and whether the name is one of the check's files at all.
func probeFileOf(name string) (initiator int32, isProbe, ours bool) {
	if volume.IsTempName(name) {
		return 0, false, true
	}
	if s, ok := strings.CutSuffix(name, ".probe"); ok {
		n, err := strconv.ParseInt(s, 10, 32)
		return int32(n), err == nil && n >= 0, err == nil
	}
	return 0, false, strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".seen")
}

// Round answers what it can and reports whether a check is waiting on this
// broker's next read (the caller may then call Round again soon).
func (r *ProbeResponder) Round() (pending bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Exchanges waiting on their initiator's rewrite come first, and while
	// any waits the directory is not listed: on GlusterFS a listing
	// refreshes the cached attributes of every entry, which would hide the
	// very staleness the check looks for.
	for _, n := range r.waiting() {
		if r.answer(n, r.now()) {
			pending = true
		}
	}
	if pending {
		return true
	}
	dir := path.Join(r.clusterDir, ProbesDir)
	ents, err := r.fsys.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			clear(r.reqs)
			clear(r.files)
		}
		return false
	}
	now := r.now()
	present := map[int32]bool{}
	listed := map[string]bool{}
	for _, e := range ents {
		n, isProbe, ours := probeFileOf(e.Name())
		if !ours {
			continue
		}
		listed[e.Name()] = true
		r.sweep(dir, e, now)
		if isProbe && n != r.self {
			present[n] = true
		}
	}
	for name := range r.files {
		if !listed[name] {
			delete(r.files, name)
		}
	}
	for n := range r.reqs {
		if !present[n] {
			delete(r.reqs, n)
		}
	}
	for _, n := range sortedKeys(present) {
		if r.answer(n, now) {
			pending = true
		}
	}
	return pending
}

// waiting lists the initiators whose first read this broker answered.
func (r *ProbeResponder) waiting() []int32 {
	var out []int32
	for n, req := range r.reqs {
		if req.phase == 1 {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// answer moves the exchange with initiator n on by one step and reports
// whether it waits on n's rewrite.
func (r *ProbeResponder) answer(n int32, now time.Duration) bool {
	req := r.reqs[n]
	if req != nil && (req.phase == 2 || now-req.at >= r.timeout) {
		// Done or given up: answer again only if n started a new session
		// (a restart can reuse the name before this broker sees it go).
		if session, _, ok := r.readProbe(n); !ok || session == req.session {
			return false
		}
		req = nil
	}
	switch {
	case req == nil:
		session, nonce, ok := r.readProbe(n)
		if !ok {
			return false
		}
		if r.reply(n, seenReply{Session: session, Phase: 1, Read: nonce}) != nil {
			return false
		}
		r.reqs[n] = &probeReq{session: session, phase: 1, at: now}
		return true
	case req.phase == 1:
		b, err := volume.ReadFile(r.fsys, goPath(r.clusterDir, n))
		if err != nil || strings.TrimSpace(string(b)) != req.session {
			// Keep reading the probe while waiting: the second read then
			// comes from a client that has the first version fresh, as a
			// host that reads a file often does (with caching that breaks
			// close-to-open, it will serve that version stale).
			if session, _, ok := r.readProbe(n); ok && session != req.session {
				delete(r.reqs, n) // a new session: answer it next round
			}
			return true
		}
		reply := seenReply{Session: req.session, Phase: 2}
		f, err := r.fsys.Open(probePath(r.clusterDir, n))
		if err == nil {
			b := make([]byte, probeFileSize+1)
			k, _ := f.ReadAt(b, 0)
			_ = f.Close()
			if session, nonce, ok := parseProbe(b[:k]); ok && session == req.session {
				reply.Read = nonce
			} else {
				reply.Err = fmt.Sprintf("unparseable probe contents (%d bytes)", k)
			}
		} else {
			reply.Err = err.Error()
		}
		if r.reply(n, reply) == nil {
			req.phase, req.at = 2, now
		}
	}
	return false
}

func (r *ProbeResponder) readProbe(n int32) (session, nonce string, ok bool) {
	b, err := volume.ReadFile(r.fsys, probePath(r.clusterDir, n))
	if err != nil {
		return "", "", false
	}
	return parseProbe(b)
}

func (r *ProbeResponder) reply(n int32, s seenReply) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return volume.WriteFileAtomic(r.fsys, seenPath(r.clusterDir, n, r.self), b)
}

// sweep removes e if it has stayed unchanged for sweepAfter on this
// broker's clock. Size and mtime serve only as a change token: no time
// written by another host is compared with this one's.
func (r *ProbeResponder) sweep(dir string, e fs.DirEntry, now time.Duration) {
	token := ""
	if info, err := e.Info(); err == nil {
		token = strconv.FormatInt(info.Size(), 10) + "@" + info.ModTime().String()
	}
	s, ok := r.files[e.Name()]
	if !ok || s.token != token {
		r.files[e.Name()] = fileSighting{token: token, first: now}
		return
	}
	if now-s.first >= r.sweepAfter {
		if err := r.fsys.Remove(path.Join(dir, e.Name())); err == nil || errors.Is(err, fs.ErrNotExist) {
			delete(r.files, e.Name())
		}
	}
}
