package probe

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"sync"

	"github.com/kaas-dev/kaas/volume"
)

// rename replaces one file by temp file, fsync and rename while readers
// (a second handle, the peer mount, the child) open and read it: each must
// see one whole version every time. ENOENT or ESTALE on open is tolerated
// and counted: real shared filesystems return them while a name is being
// replaced.
func (e *env) rename(ctx context.Context) Check {
	c := Check{Name: CheckRename, Guarantee: "atomic rename", Counts: map[string]int{}}
	size := e.cfg.BlockSize
	name := path.Join(e.dirA, "replace")
	if err := volume.WriteFileAtomic(e.fsA, name, block(0, size)); err != nil {
		c.Message = fmt.Sprintf("atomic rename: writing %s by temp file, fsync and rename failed: %v; %s", name, err, hintDocs)
		return c
	}
	stop := make(chan struct{})
	type reader struct {
		what string
		st   readStats
	}
	readers := []*reader{{what: "a second handle"}}
	var wg sync.WaitGroup
	wg.Go(func() { readers[0].st = readLoop(e.fsA, name, size, stop) })
	if e.dirB != "" {
		r := &reader{what: "the peer mount"}
		readers = append(readers, r)
		wg.Go(func() { r.st = readLoop(e.fsB, path.Join(e.dirB, "replace"), size, stop) })
	}
	childNote := e.childNote
	var childR *reader
	if e.child != nil {
		if _, err := e.child.call(ctx, childReq{Op: "loop", Path: path.Join(e.childDir, "replace"), Size: size}); err != nil {
			childNote = err.Error()
		} else {
			childR = &reader{what: "a child process"}
			readers = append(readers, childR)
		}
	}
	var werr error
	for v := 1; v <= e.cfg.Renames && ctx.Err() == nil; v++ {
		if werr = volume.WriteFileAtomic(e.fsA, name, block(uint64(v), size)); werr != nil {
			break
		}
		c.Counts["renames"]++
	}
	close(stop)
	wg.Wait()
	if childR != nil {
		resp, err := e.child.call(ctx, childReq{Op: "stop"})
		switch {
		case err != nil:
			childNote = err.Error()
		case resp.Stats != nil:
			childR.st = *resp.Stats
		}
	}
	var total readStats
	var bad *reader
	for _, r := range readers {
		total.merge(r.st)
		if bad == nil && (r.st.Torn > 0 || r.st.Errors > 0) {
			bad = r
		}
	}
	c.Counts["reads"], c.Counts["enoent"], c.Counts["estale"] = total.Reads, total.NotExist, total.Stale
	c.Counts["torn"], c.Counts["errors"] = total.Torn, total.Errors
	switch {
	case werr != nil:
		c.Message = fmt.Sprintf("atomic rename: replacing %s by temp file, fsync and rename failed: %v; %s", name, werr, hintDocs)
	case bad != nil && bad.st.Torn > 0:
		c.Message = fmt.Sprintf("atomic rename: %s read %s while it was being replaced by rename and saw torn or partial contents (%d of %d reads): %s; renames within a directory must be atomic; %s",
			bad.what, name, bad.st.Torn, bad.st.Reads, bad.st.FirstBad, hintDocs)
	case bad != nil:
		c.Message = fmt.Sprintf("atomic rename: %s could not read %s while it was being replaced (%d of %d reads): %s; %s",
			bad.what, name, bad.st.Errors, bad.st.Reads, bad.st.FirstBad, hintDocs)
	default:
		c.OK = true
		var notes []string
		if total.NotExist+total.Stale > 0 {
			notes = append(notes, fmt.Sprintf("tolerated: %d ENOENT and %d ESTALE of %d reads during replaces (kaas retries them)", total.NotExist, total.Stale, total.Reads))
		}
		if childNote != "" {
			notes = append(notes, "no child process: "+childNote)
		}
		c.Message = joinNotes(notes...)
	}
	return c
}

// racer is one side of an exclusive-create race.
type racer struct {
	what string
	fsys volume.FS
	dir  string
}

// exclusive races exclusive creates of fresh names from two handles (one
// on each mount with a peer) and the child: never two winners. A race
// nobody wins (every racer gets EEXIST) is tolerated and counted, as
// GlusterFS shows it rarely.
func (e *env) exclusive(ctx context.Context) Check {
	c := Check{Name: CheckExclusive, Guarantee: "atomic exclusive create", Counts: map[string]int{}}
	racers := []racer{{"a first handle", e.fsA, e.dirA}, {"a second handle", e.fsA, e.dirA}}
	if e.dirB != "" {
		racers[1] = racer{"the peer mount", e.fsB, e.dirB}
	}
	childNote := e.childNote
	useChild := e.child != nil
	for i := 0; i < e.cfg.Races && ctx.Err() == nil; i++ {
		name := "excl-" + strconv.Itoa(i)
		kinds := make([]string, len(racers))
		errs := make([]error, len(racers))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j, r := range racers {
			wg.Go(func() {
				<-start
				kinds[j], errs[j] = createOnce(r.fsys, path.Join(r.dir, name))
			})
		}
		if useChild {
			if err := e.child.send(childReq{Op: "create", Path: path.Join(e.childDir, name)}); err != nil {
				childNote, useChild = err.Error(), false
			}
		}
		close(start)
		wg.Wait()
		whats := make([]string, 0, len(racers)+1)
		for _, r := range racers {
			whats = append(whats, r.what)
		}
		if useChild {
			resp, err := e.child.recv(ctx)
			if err != nil {
				childNote, useChild = err.Error(), false
			} else {
				kinds, errs = append(kinds, resp.Kind), append(errs, nil)
				if resp.Kind == kindError {
					errs[len(errs)-1] = fmt.Errorf("%s", resp.Msg)
				}
				whats = append(whats, "a child process")
			}
		}
		c.Counts["races"]++
		var winners []string
		for j, k := range kinds {
			switch k {
			case kindWon:
				winners = append(winners, whats[j])
			case kindError:
				c.Counts["errors"]++
				c.Message = fmt.Sprintf("exclusive create: %s could not create %s: %v; %s", whats[j], name, errs[j], hintDocs)
				return c
			}
		}
		switch len(winners) {
		case 0:
			c.Counts["nobody-won"]++
		case 1:
		default:
			c.Counts["double-winners"]++
			c.Message = fmt.Sprintf("exclusive create: %d racers all created %s with O_CREAT|O_EXCL (%v); exactly one must win; kaas's claims depend on it; %s",
				len(winners), path.Join(e.dirA, name), winners, hintDocs)
			return c
		}
	}
	c.OK = true
	var notes []string
	if n := c.Counts["nobody-won"]; n > 0 {
		notes = append(notes, fmt.Sprintf("tolerated: %d of %d races nobody won (every racer got EEXIST; kaas re-reads claims)", n, c.Counts["races"]))
	}
	if childNote != "" {
		notes = append(notes, "no child process: "+childNote)
	}
	c.Message = joinNotes(notes...)
	return c
}

// side reads or writes the probe's files from one place.
type side struct {
	what  string
	fsys  volume.FS // nil for the child
	dir   string
	child *child
}

func (s side) read(ctx context.Context, name string, size int) ([]uint64, error) {
	if s.child == nil {
		return readBlocks(s.fsys, path.Join(s.dir, name), size)
	}
	resp, err := s.child.call(ctx, childReq{Op: "read", Path: path.Join(s.dir, name), Size: size})
	if err != nil {
		return nil, err
	}
	if resp.Kind != kindOK {
		return nil, fmt.Errorf("%s: %s", resp.Kind, resp.Msg)
	}
	return resp.Versions, nil
}

// pair is a writer and a reader of the close-to-open check.
type pair struct {
	key  string
	w, r side
	how  string // how the reader relates to the writer
}

// closeToOpen checks, for each writer/reader pair, that a reader that has
// read a file and reopens it after the writer rewrote it in place (same
// size) and closed it sees the new contents; and likewise after an append.
// One stale read fails the check.
func (e *env) closeToOpen(ctx context.Context) Check {
	c := Check{Name: CheckCloseToOpen, Guarantee: "close-to-open", Counts: map[string]int{}}
	a := side{what: "this process", fsys: e.fsA, dir: e.dirA}
	pairs := []pair{{key: "handle", w: a, r: side{what: "a second handle", fsys: e.fsA, dir: e.dirA}, how: "on the same mount"}}
	if e.child != nil {
		pairs = append(pairs, pair{key: "child", w: a, r: side{what: "a child process", dir: e.childDir, child: e.child}, how: "from another process"})
	}
	if e.dirB != "" {
		b := side{what: "the peer mount", fsys: e.fsB, dir: e.dirB}
		pairs = append(pairs,
			pair{key: "peer", w: a, r: b, how: "through the other mount"},
			pair{key: "peer-back", w: b, r: side{what: "the first mount", fsys: e.fsA, dir: e.dirA}, how: "through the other mount"})
	}
	const appendSize = 1 << 10
	for _, p := range pairs {
		if ctx.Err() != nil {
			break
		}
		if msg := e.overwrite(ctx, c.Counts, p); msg != "" {
			c.Message = msg
			return c
		}
		if msg := e.appendRounds(ctx, c.Counts, p, appendSize); msg != "" {
			c.Message = msg
			return c
		}
		c.Counts["pairs"]++
	}
	c.OK = true
	c.Message = joinNotes(func() string {
		if e.childNote != "" {
			return "no child process: " + e.childNote
		}
		return ""
	}())
	return c
}

// writeAt opens name on s without truncating it, writes data at off and
// closes it (no fsync: close-to-open is about the close).
func (s side) writeAt(name string, data []byte, off int64, create bool) error {
	full := path.Join(s.dir, name)
	var (
		f   volume.File
		err error
	)
	if create {
		f, err = s.fsys.Create(full)
	} else {
		f, err = s.fsys.OpenReadWrite(full)
	}
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, off); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", full, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", full, err)
	}
	return nil
}

// readExpect reads name on p's reader and compares with want. It retries
// an ENOENT or ESTALE twice (the file is not being replaced, but a
// shared filesystem may still say so once) and returns a failure message.
func (e *env) readExpect(ctx context.Context, counts map[string]int, p pair, name string, size int, want []uint64, after string) string {
	var (
		vs  []uint64
		err error
	)
	for range 3 {
		counts["reads"]++
		if vs, err = p.r.read(ctx, name, size); err == nil || (classify(err) != kindNotExist && classify(err) != kindStale) {
			break
		}
		counts["retried"]++
	}
	full := path.Join(p.r.dir, name)
	if err != nil {
		return fmt.Sprintf("close-to-open: %s could not read %s %s after the writer closed it: %v; %s", p.r.what, full, after, err, hintCache)
	}
	if len(vs) < len(want) || (len(vs) > 0 && vs[len(vs)-1] < want[len(want)-1]) {
		counts["stale"]++
		return fmt.Sprintf("close-to-open: a reader (%s, %s) that opened %s after the writer %s and closed it read the previous contents (%s, want %s); %s",
			p.r.what, p.how, full, after, describe(vs), describe(want), hintCache)
	}
	if !equal(vs, want) {
		return fmt.Sprintf("close-to-open: a reader (%s, %s) that opened %s after the writer %s and closed it read unexpected contents (%s, want %s); %s",
			p.r.what, p.how, full, after, describe(vs), describe(want), hintCache)
	}
	return ""
}

func describe(vs []uint64) string {
	if len(vs) == 1 {
		return "version " + strconv.FormatUint(vs[0], 10)
	}
	return fmt.Sprintf("%d blocks, last version %d", len(vs), func() uint64 {
		if len(vs) == 0 {
			return 0
		}
		return vs[len(vs)-1]
	}())
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// overwrite: the reader reads version v, the writer rewrites the file in
// place with v+1 (same size) and closes it, the reader reopens.
func (e *env) overwrite(ctx context.Context, counts map[string]int, p pair) string {
	const size = 4 << 10
	name := "c2o-" + p.key
	if err := p.w.writeAt(name, block(1, size), 0, true); err != nil {
		return fmt.Sprintf("close-to-open: %s could not write %s: %v; %s", p.w.what, path.Join(p.w.dir, name), err, hintDocs)
	}
	if msg := e.readExpect(ctx, counts, p, name, size, []uint64{1}, "created it"); msg != "" {
		return msg
	}
	for v := uint64(2); v <= uint64(e.cfg.Rounds)+1 && ctx.Err() == nil; v++ {
		if err := p.w.writeAt(name, block(v, size), 0, false); err != nil {
			return fmt.Sprintf("close-to-open: %s could not rewrite %s: %v; %s", p.w.what, path.Join(p.w.dir, name), err, hintDocs)
		}
		counts["rewrites"]++
		if msg := e.readExpect(ctx, counts, p, name, size, []uint64{v}, "rewrote it in place"); msg != "" {
			return msg
		}
	}
	return ""
}

// appendRounds: the reader reads k blocks, the writer appends one and
// closes, the reader reopens and must see k+1.
func (e *env) appendRounds(ctx context.Context, counts map[string]int, p pair, size int) string {
	name := "c2o-append-" + p.key
	want := []uint64{0}
	if err := p.w.writeAt(name, block(0, size), 0, true); err != nil {
		return fmt.Sprintf("close-to-open: %s could not write %s: %v; %s", p.w.what, path.Join(p.w.dir, name), err, hintDocs)
	}
	if msg := e.readExpect(ctx, counts, p, name, size, want, "created it"); msg != "" {
		return msg
	}
	for k := 1; k <= e.cfg.Rounds && ctx.Err() == nil; k++ {
		if err := p.w.writeAt(name, block(uint64(k), size), int64(k*size), false); err != nil {
			return fmt.Sprintf("close-to-open: %s could not append to %s: %v; %s", p.w.what, path.Join(p.w.dir, name), err, hintDocs)
		}
		counts["appends"]++
		want = append(want, uint64(k))
		if msg := e.readExpect(ctx, counts, p, name, size, want, "appended to it"); msg != "" {
			return msg
		}
	}
	return ""
}
