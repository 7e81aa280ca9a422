package check

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
)

// Check runs L1–L9 and C1–C3 over a history, in history order.
func Check(events []Event) Report {
	c := NewChecker()
	for i := range events {
		c.Add(&events[i])
	}
	return c.Report()
}

// CheckReader checks the history read from r as it streams by: histories
// of tens of millions of events need not fit in memory as events.
func CheckReader(r io.Reader) (Report, error) {
	c := NewChecker()
	if err := scan(r, c.Add); err != nil {
		return Report{}, err
	}
	return c.Report(), nil
}

// CheckFile checks the history in file path.
func CheckFile(path string) (Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return Report{}, fmt.Errorf("opening history: %w", err)
	}
	defer f.Close()
	rep, err := CheckReader(f)
	if err != nil {
		return rep, fmt.Errorf("%s: %w", path, err)
	}
	return rep, nil
}

// Topic partitions, processes and values are interned to small integers so
// that the state kept per record is a few dozen bytes without pointers.

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

func (k tp) String() string { return fmt.Sprintf("%s/%d", k.topic, k.partition) }

// pos is one offset of one partition (interned).
type pos struct {
	tp     int32
	offset int64
}

const (
	vOK uint8 = 1 << iota
	vFail
	vInfo
	vPolled
)

// value is what the history says about one value.
type value struct {
	flags  uint8
	nAt    uint8 // distinct positions seen, saturating; the first is at
	at     pos
	pollAt pos   // first poll
	final  int32 // times in the final read
}

// source kinds of an observation.
const (
	srcAck uint8 = iota
	srcPoll
	srcFinal
)

// seen is the first observation of a position.
type seen struct {
	val  int32
	proc int32
	src  uint8
}

type ackRec struct {
	pos
	val, proc int32
	key       int32 // -1: none recorded
	tomb      bool
}

// gap is a consumer's step over offsets (from, to), both exclusive.
type gap struct {
	proc, tp int32
	from, to int64
}

type finalRec struct {
	offset int64
	val    int32
	order  int32 // arrival, to keep the first of repeated reads
	key    int32 // -1: none recorded
	tomb   bool
}

// pending is a violation found as the history streams by on a partition
// whose topic may turn out to be compacted: C3 restates it there.
type pending struct {
	tp  int32
	msg string
}

type bounds struct{ start, hwm int64 }

type commitKey struct {
	group string
	tp    int32
}

// Checker accumulates a history event by event (Add) and checks it
// (Report). The zero value is not usable: use NewChecker.
type Checker struct {
	rep Report
	res [12]*Result // L1..L9, C1..C3

	tpIdx   map[tp]int32
	tps     []tp
	procIdx map[string]int32
	procs   []string
	valIdx  map[string]int32
	vals    []string
	info    []value
	extraAt map[int32][]pos // positions beyond the first, for the rare value seen at several
	keyIdx  map[string]int32
	keys    []string

	compacted map[string]bool  // topic -> compacted, from topic events
	infoTomb  map[keyPart]bool // keys with an indeterminate tombstone
	obs       []int            // observations per tp (what C3 checked)
	lastFinal map[int32]int64  // highest final-read offset per tp so far
	c3        []pending

	atPos  map[pos]seen
	final  [][]finalRec // per tp
	bound  map[int32]bounds
	acks   []ackRec
	gaps   []gap
	nFinal int32

	lastPoll   map[[2]int32]int64 // (proc, tp)
	lastHWM    map[[2]int32]int64
	lastLSO    map[[2]int32]int64
	maxHWM     map[int32]int64
	lastCommit map[commitKey]int64
	pids       map[[2]int64]int32
}

// NewChecker returns an empty Checker.
func NewChecker() *Checker {
	c := &Checker{
		tpIdx: map[tp]int32{}, procIdx: map[string]int32{}, valIdx: map[string]int32{},
		extraAt: map[int32][]pos{}, keyIdx: map[string]int32{}, compacted: map[string]bool{}, infoTomb: map[keyPart]bool{}, lastFinal: map[int32]int64{}, atPos: map[pos]seen{}, bound: map[int32]bounds{},
		lastPoll: map[[2]int32]int64{}, lastHWM: map[[2]int32]int64{}, lastLSO: map[[2]int32]int64{},
		maxHWM: map[int32]int64{}, lastCommit: map[commitKey]int64{}, pids: map[[2]int64]int32{},
	}
	for _, r := range []struct{ id, name string }{
		{L1, "lost-write"}, {L2, "duplicate"}, {L3, "inconsistent-offsets"},
		{L4, "failed-write-visible"}, {L5, "indeterminate-repeated"},
		{L6, "poll-order"}, {L7, "hwm-regression"},
		{L8, "commit-regression"}, {L9, "producer-id-reuse"},
		{C1, "latest-survives"}, {C2, "no-resurrection"}, {C3, "sparse-but-stable"},
	} {
		c.rep.Checks = append(c.rep.Checks, Result{ID: r.id, Name: r.name})
	}
	for i := range c.rep.Checks {
		c.res[i] = &c.rep.Checks[i]
	}
	return c
}

func (c *Checker) r(id string) *Result {
	i := int(id[1] - '1')
	if id[0] == 'C' {
		i += 9
	}
	return c.res[i]
}

// pend notes a violation on partition t that C3 restates if t's topic is
// compacted.
func (c *Checker) pend(t int32, msg string) { c.c3 = append(c.c3, pending{t, msg}) }

// isCompacted reports whether partition t's topic is compacted.
func (c *Checker) isCompacted(t int32) bool { return c.compacted[c.tps[t].topic] }

// intern returns k's index in list, appending it to list (added) when
// it is new.
func intern[K comparable](idx map[K]int32, list *[]K, k K) (i int32, added bool) {
	if i, ok := idx[k]; ok {
		return i, false
	}
	i = int32(len(*list))
	idx[k] = i
	*list = append(*list, k)
	return i, true
}

// keyOf interns a key; "" (none recorded) is -1.
func (c *Checker) keyOf(s string) int32 {
	if s == "" {
		return -1
	}
	i, _ := intern(c.keyIdx, &c.keys, s)
	return i
}

func (c *Checker) tpOf(topic string, partition int32) int32 {
	i, added := intern(c.tpIdx, &c.tps, tp{topic, partition})
	if added {
		c.final = append(c.final, nil)
		c.obs = append(c.obs, 0)
	}
	return i
}

func (c *Checker) procOf(s string) int32 {
	i, _ := intern(c.procIdx, &c.procs, s)
	return i
}

func (c *Checker) valOf(s string) int32 {
	i, added := intern(c.valIdx, &c.vals, s)
	if added {
		c.info = append(c.info, value{})
	}
	return i
}

func (c *Checker) posString(p pos) string {
	return fmt.Sprintf("%v@%d", c.tps[p.tp], p.offset)
}

func (c *Checker) seenBy(s seen) string {
	switch s.src {
	case srcAck:
		return "ack by " + c.procs[s.proc]
	case srcPoll:
		return "poll by " + c.procs[s.proc]
	}
	return "final read"
}

// positions returns every distinct position value v was seen at.
func (c *Checker) positions(v int32) []pos {
	if c.info[v].nAt == 0 {
		return nil
	}
	return append([]pos{c.info[v].at}, c.extraAt[v]...)
}

func (c *Checker) joinPos(ps []pos) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = c.posString(p)
	}
	return strings.Join(s, ", ")
}

// observe records value s at p (L2, L3).
func (c *Checker) observe(p pos, s string, proc int32, src uint8) int32 {
	v := c.valOf(s)
	c.r(L3).Checked++
	c.obs[p.tp]++
	if first, ok := c.atPos[p]; !ok {
		c.atPos[p] = seen{v, proc, src}
	} else if first.val != v {
		msg := fmt.Sprintf("%s holds %q (%s) and %q (%s)", c.posString(p), c.vals[first.val], c.seenBy(first), s, c.seenBy(seen{v, proc, src}))
		c.r(L3).violate("%s", msg)
		c.pend(p.tp, msg)
	}
	vi := &c.info[v]
	switch {
	case vi.nAt == 0:
		vi.at, vi.nAt = p, 1
	case vi.at == p:
	case !slices.Contains(c.extraAt[v], p):
		c.extraAt[v] = append(c.extraAt[v], p)
		if vi.nAt < 255 {
			vi.nAt++
		}
	}
	return v
}

func (c *Checker) hwmSeen(o [2]int32, hwm, lso int64, what func() string) {
	if hwm >= 0 {
		c.r(L7).Checked++
		if last, ok := c.lastHWM[o]; ok && hwm < last {
			c.r(L7).violate("%s saw %v's high watermark go from %d to %d (%s)", c.procs[o[0]], c.tps[o[1]], last, hwm, what())
		} else {
			c.lastHWM[o] = hwm
		}
		c.maxHWM[o[1]] = max(c.maxHWM[o[1]], hwm)
	}
	if lso >= 0 {
		c.r(L7).Checked++
		if last, ok := c.lastLSO[o]; ok && lso < last {
			c.r(L7).violate("%s saw %v's last stable offset go from %d to %d (%s)", c.procs[o[0]], c.tps[o[1]], last, lso, what())
		} else {
			c.lastLSO[o] = lso
		}
	}
}

// Add takes the next event of the history. e is not retained.
func (c *Checker) Add(e *Event) {
	cnt := &c.rep.Counts
	cnt.Events++
	switch e.Kind {
	case KindSend:
		cnt.Sends++
		v := c.valOf(e.Value)
		switch e.Outcome {
		case OK:
			cnt.Acked++
			c.info[v].flags |= vOK
			p := pos{c.tpOf(e.Topic, e.Partition), e.Offset}
			proc := c.procOf(e.Process)
			c.observe(p, e.Value, proc, srcAck)
			c.acks = append(c.acks, ackRec{p, v, proc, c.keyOf(e.Key), e.Tombstone})
		case Fail:
			cnt.Failed++
			c.info[v].flags |= vFail
		default: // anything else is indeterminate
			cnt.Indeterminate++
			c.info[v].flags |= vInfo
			if e.Tombstone && e.Key != "" {
				c.infoTomb[keyPart{c.tpOf(e.Topic, e.Partition), c.keyOf(e.Key)}] = true
			}
		}
	case KindPoll:
		cnt.Polls++
		t := c.tpOf(e.Topic, e.Partition)
		p := pos{t, e.Offset}
		proc := c.procOf(e.Process)
		v := c.observe(p, e.Value, proc, srcPoll)
		if vi := &c.info[v]; vi.flags&vPolled == 0 {
			vi.flags |= vPolled
			vi.pollAt = p
		}
		o := [2]int32{proc, t}
		c.r(L6).Checked++
		if last, ok := c.lastPoll[o]; ok {
			switch {
			case e.Offset <= last:
				c.r(L6).violate("nonmonotonic poll: %s read %s after offset %d", e.Process, c.posString(p), last)
			case e.Offset > last+1:
				c.gaps = append(c.gaps, gap{proc, t, last, e.Offset})
			}
		}
		c.lastPoll[o] = e.Offset
		c.hwmSeen(o, e.HWM, -1, func() string { return fmt.Sprintf("poll of offset %d", e.Offset) })
	case KindFinal:
		cnt.FinalRecords++
		t := c.tpOf(e.Topic, e.Partition)
		v := c.observe(pos{t, e.Offset}, e.Value, c.procOf(FinalProcess), srcFinal)
		c.final[t] = append(c.final[t], finalRec{e.Offset, v, c.nFinal, c.keyOf(e.Key), e.Tombstone})
		c.nFinal++
		// A compacted partition's final read is sparse but in order.
		if last, ok := c.lastFinal[t]; ok && e.Offset <= last {
			c.pend(t, fmt.Sprintf("final read of %v went from offset %d to %d", c.tps[t], last, e.Offset))
		} else {
			c.lastFinal[t] = e.Offset
		}
	case KindHWM:
		cnt.HWMs++
		t := c.tpOf(e.Topic, e.Partition)
		if e.Process == FinalProcess {
			c.bound[t] = bounds{max(e.Start, 0), e.HWM}
			c.r(L7).Checked++
			if m, ok := c.maxHWM[t]; ok && e.HWM >= 0 && e.HWM < m {
				c.r(L7).violate("final read of %v ends at high watermark %d, below %d observed earlier", c.tps[t], e.HWM, m)
			}
			return
		}
		c.hwmSeen([2]int32{c.procOf(e.Process), t}, e.HWM, e.LSO, func() string { return "listed offsets" })
	case KindPID:
		cnt.PIDs++
		c.r(L9).Checked++
		key := [2]int64{e.ProducerID, int64(e.Epoch)}
		c.pids[key]++
		if c.pids[key] == 2 {
			c.r(L9).violate("producer id %d epoch %d issued more than once (again to %s)", e.ProducerID, e.Epoch, e.Process)
		}
	case KindCommit:
		cnt.Commits++
		c.lastCommit[commitKey{e.Group, c.tpOf(e.Topic, e.Partition)}] = e.Offset
	case KindCommitted:
		cnt.Committed++
		t := c.tpOf(e.Topic, e.Partition)
		last, ok := c.lastCommit[commitKey{e.Group, t}]
		if !ok {
			return
		}
		c.r(L8).Checked++
		if e.Offset < last {
			c.r(L8).violate("group %s %v: committed offset read back as %d, below the last acknowledged commit %d", e.Group, c.tps[t], e.Offset, last)
		}
	case KindTopic:
		c.compacted[e.Topic] = Compacted(e.Cleanup)
	case KindFault:
		cnt.Faults++
		if cnt.FaultKinds == nil {
			cnt.FaultKinds = map[string]int{}
		}
		cnt.FaultKinds[e.Fault]++
	default:
		cnt.Unknown++
	}
}

// Report finishes the checks that need the whole history (L1, L2, L4, L5,
// L6 poll-skip, C1–C3) and returns the report. Call it once.
func (c *Checker) Report() Report {
	rep := &c.rep
	rep.Counts.FinalPartitions = len(c.bound)

	// The final read per partition in offset order, each offset once (the
	// first read of it: a repeated read of another value is an L3 case).
	for t, fs := range c.final {
		slices.SortFunc(fs, func(a, b finalRec) int { return cmp.Or(cmp.Compare(a.offset, b.offset), cmp.Compare(a.order, b.order)) })
		fs = slices.CompactFunc(fs, func(a, b finalRec) bool { return a.offset == b.offset })
		c.final[t] = fs
		for _, f := range fs {
			c.info[f.val].final++
		}
	}
	finalAt := func(p pos) (int32, bool) {
		fs := c.final[p.tp]
		i, ok := slices.BinarySearchFunc(fs, p.offset, func(f finalRec, off int64) int { return cmp.Compare(f.offset, off) })
		if !ok {
			return 0, false
		}
		return fs[i].val, true
	}

	// Where the history has final-read bounds, a partition without them
	// was not read completely: L1 and poll-skip are not checked there.
	// Without any bounds the final records are taken as the whole read.
	checkable := func(t int32) (bounds, bool) {
		if len(c.bound) == 0 {
			return bounds{0, -1}, true
		}
		b, ok := c.bound[t]
		return b, ok
	}
	unread := map[int32]int{}
	belowStart, onCompacted := 0, 0

	// L1: every ack at its offset in the final read (C1 on compacted
	// topics).
	l1 := c.r(L1)
	for _, a := range c.acks {
		b, ok := checkable(a.tp)
		if !ok {
			unread[a.tp]++
			continue
		}
		if c.isCompacted(a.tp) {
			onCompacted++
			continue
		}
		if a.offset < b.start {
			belowStart++
			continue
		}
		l1.Checked++
		got, ok := finalAt(a.pos)
		if ok && got == a.val {
			continue
		}
		var where string
		switch {
		case ok:
			where = fmt.Sprintf("the final read has %q there", c.vals[got])
		case b.hwm >= 0 && a.offset >= b.hwm:
			where = fmt.Sprintf("the final read ends at high watermark %d", b.hwm)
		default:
			where = "the final read has no record there"
		}
		if c.info[a.val].final > 0 {
			var others []pos
			for _, p := range c.positions(a.val) {
				if p != a.pos {
					others = append(others, p)
				}
			}
			where += fmt.Sprintf(" (value seen at %s)", c.joinPos(others))
		}
		l1.violate("%q acknowledged to %s at %s: %s", c.vals[a.val], c.procs[a.proc], c.posString(a.pos), where)
	}

	// L2, L4, L5 per value, in first-seen order.
	for v, s := range c.vals {
		vi := &c.info[v]
		switch {
		case vi.flags&vOK != 0 || vi.flags&(vInfo|vFail) == 0: // acknowledged, or of unknown origin
			c.r(L2).Checked++
			if vi.nAt > 1 {
				msg := fmt.Sprintf("%q at %d offsets: %s", s, len(c.positions(int32(v))), c.joinPos(c.positions(int32(v))))
				c.r(L2).violate("%s", msg)
				c.pend(vi.at.tp, msg)
			}
		case vi.flags&vInfo != 0:
			c.r(L5).Checked++
			if vi.nAt > 1 || vi.final > 1 {
				c.r(L5).violate("indeterminate %q appears %d times: %s", s, max(int(vi.nAt), int(vi.final)), c.joinPos(c.positions(int32(v))))
			}
		default: // every send failed definitely
			c.r(L4).Checked++
			switch {
			case vi.final > 0:
				c.r(L4).violate("failed %q is in the final read at %s", s, c.joinPos(c.positions(int32(v))))
			case vi.flags&vPolled != 0:
				c.r(L4).violate("failed %q was polled at %s", s, c.posString(vi.pollAt))
			}
		}
	}

	// L6 poll-skip: a consumer's gap must be a gap of the final read too.
	for _, g := range c.gaps {
		if _, ok := checkable(g.tp); !ok {
			continue
		}
		fs := c.final[g.tp]
		i, _ := slices.BinarySearchFunc(fs, g.from+1, func(f finalRec, off int64) int { return cmp.Compare(f.offset, off) })
		if i < len(fs) && fs[i].offset < g.to {
			msg := fmt.Sprintf("poll skip: %s read %v/%d after %d, but the final read has offset %d", c.procs[g.proc], c.tps[g.tp], g.to, g.from, fs[i].offset)
			c.r(L6).violate("%s", msg)
			c.pend(g.tp, msg)
		}
	}

	// C3 restates, on compacted partitions, what L2, L3 and L6's skip
	// rule found, and adds the final read's order.
	for t := range c.tps {
		if c.isCompacted(int32(t)) {
			c.r(C3).Checked += c.obs[t]
		}
	}
	for _, p := range c.c3 {
		if c.isCompacted(p.tp) {
			c.r(C3).violate("%s", p.msg)
		}
	}
	c.compaction(checkable)

	for t, n := range unread {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%v has no final-read bounds (read incomplete?): %d acks there not checked by L1 or C1/C2, its poll gaps not checked by L6", c.tps[t], n))
	}
	sort.Strings(rep.Notes)
	if belowStart > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d acks below their partition's log start not checked by L1", belowStart))
	}
	if onCompacted > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d acks on compacted topics checked by C1–C3 instead of L1", onCompacted))
	}
	for i := range rep.Checks {
		rep.Checks[i].NotExercised = rep.Checks[i].Checked == 0
	}
	return *rep
}

// keyPart is one key of one partition.
type keyPart struct{ tp, key int32 }

// compaction runs C1 and C2 over the keys acknowledged on compacted
// partitions that were read completely.
func (c *Checker) compaction(checkable func(int32) (bounds, bool)) {
	cnt := &c.rep.Counts
	for _, comp := range c.compacted {
		if comp {
			cnt.CompactedTopics++
		}
	}
	latest := map[keyPart]ackRec{} // highest-offset ack per key
	tomb := map[keyPart]ackRec{}   // highest-offset acknowledged tombstone
	var order []keyPart
	keyless, belowStart, excused := 0, 0, 0
	for _, a := range c.acks {
		if !c.isCompacted(a.tp) {
			continue
		}
		if a.key < 0 {
			keyless++
			continue
		}
		k := keyPart{a.tp, a.key}
		if a.tomb {
			cnt.Tombstones++
			if t, ok := tomb[k]; !ok || a.offset > t.offset {
				tomb[k] = a
			}
		}
		l, ok := latest[k]
		if !ok {
			order = append(order, k)
		}
		if !ok || a.offset > l.offset {
			latest[k] = a
		}
	}
	cnt.Keys = len(order)
	slices.SortFunc(order, func(a, b keyPart) int { return cmp.Or(cmp.Compare(a.tp, b.tp), cmp.Compare(a.key, b.key)) })

	// The final read's last record of every key (c.final is in offset
	// order by now).
	last := map[keyPart]finalRec{}
	for t, fs := range c.final {
		if !c.isCompacted(int32(t)) {
			continue
		}
		for _, f := range fs {
			if f.key >= 0 {
				last[keyPart{int32(t), f.key}] = f
			}
		}
	}

	c1, c2 := c.r(C1), c.r(C2)
	for _, k := range order {
		b, ok := checkable(k.tp)
		if !ok {
			continue // noted with the partition's unread acks
		}
		a := latest[k]
		if a.offset < b.start {
			belowStart++
			continue
		}
		// C1: the final read's last record of the key is a itself or
		// later; only a tombstone may be gone entirely.
		c1.Checked++
		f, found := last[k]
		switch {
		case found && f.offset == a.offset:
			if f.val != a.val || f.tomb != a.tomb {
				c1.violate("key %q: latest write, %s; the final read has %s there", c.keys[k.key], c.ackString(a), c.finalString(f))
			}
		case found && f.offset > a.offset:
		case !found && a.tomb:
		case !found && c.infoTomb[k]:
			excused++ // a tombstone whose outcome is unknown may have followed a
		case found:
			c1.violate("key %q: latest write, %s; the final read's last record of the key is older: %s", c.keys[k.key], c.ackString(a), c.finalString(f))
		default:
			where := "the final read has no record of the key"
			if b.hwm >= 0 && a.offset >= b.hwm {
				where += fmt.Sprintf(" and ends at high watermark %d", b.hwm)
			}
			c1.violate("key %q: latest write, %s, is missing: %s", c.keys[k.key], c.ackString(a), where)
		}
		// C2: after a tombstone the key is absent, or holds something
		// at or after the tombstone.
		if t, ok := tomb[k]; ok {
			c2.Checked++
			if found && f.offset < t.offset {
				c2.violate("key %q came back: %s, but the final read's last record of the key is %s", c.keys[k.key], c.ackString(t), c.finalString(f))
			}
		}
	}
	if keyless > 0 {
		c.rep.Notes = append(c.rep.Notes, fmt.Sprintf("%d keyless acks on compacted topics not checked by C1/C2", keyless))
	}
	if belowStart > 0 {
		c.rep.Notes = append(c.rep.Notes, fmt.Sprintf("%d keys of compacted topics whose latest ack is below the log start not checked by C1/C2", belowStart))
	}
	if excused > 0 {
		c.rep.Notes = append(c.rep.Notes, fmt.Sprintf("%d keys absent from the final read after a value was acknowledged, but with a tombstone of unknown outcome that may have deleted them: not counted by C1", excused))
	}
}

func (c *Checker) ackString(a ackRec) string {
	return fmt.Sprintf("%s acknowledged to %s at %s", c.recString(a.val, a.tomb), c.procs[a.proc], c.posString(a.pos))
}

func (c *Checker) finalString(f finalRec) string {
	return fmt.Sprintf("%s at offset %d", c.recString(f.val, f.tomb), f.offset)
}

func (c *Checker) recString(v int32, tomb bool) string {
	if tomb {
		return fmt.Sprintf("tombstone %q", c.vals[v])
	}
	return fmt.Sprintf("value %q", c.vals[v])
}
