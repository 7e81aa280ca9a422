package engine

import (
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// openBook is this process's bookkeeping of its opens (of partitions and
// coordinator shards), by openKey: the leader epochs it wrote into fences,
// the new epochs it asks the controller for, the opens in flight and why
// the last open of each failed. It guards itself and calls nothing while
// its lock is held.
type openBook struct {
	mu sync.RWMutex
	// fenced records the leader epoch this incarnation last wrote into a
	// fence: only then may it open at an epoch equal to the fence (a retry
	// of its own open).
	fenced map[string]int32
	reopen map[string]reopenRequest
	// opening holds the opens in flight: they hold the released version
	// back (report.go), so the controller does not release (and rename
	// away) a topic under an open that has begun.
	opening map[string]openRef
	// failed holds why an open assigned here is not served (its last open
	// failed); partitionbudget.go.
	failed map[string]openFailure
	// gen grows with every change of failed or reopen: the partition
	// report is rebuilt when it moved.
	gen uint64
}

// openRef names the partition (or shard, under GroupsTopicID) of an open.
type openRef struct {
	topicID string
	index   int32
}

type reopenRequest struct {
	topicID      string
	index, epoch int32
}

// openFailure is why a partition assigned to this broker is not served.
type openFailure struct {
	err        string
	overBudget bool
	noFDs      bool // EMFILE or ENFILE from the OS
}

func newOpenBook() *openBook {
	return &openBook{fenced: map[string]int32{}, reopen: map[string]reopenRequest{},
		opening: map[string]openRef{}, failed: map[string]openFailure{}}
}

// fencedAt is the epoch this process last wrote into key's fence (0: none).
func (b *openBook) fencedAt(key string) int32 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.fenced[key]
}

func (b *openBook) noteFenced(key string, epoch int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fenced[key] = epoch
}

// askReopen asks for a new leader epoch for key.
func (b *openBook) askReopen(key string, r reopenRequest) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reopen[key] = r
	b.gen++
}

// generation grows with every change of what the partition report says
// of the book (failures, reopen requests).
func (b *openBook) generation() uint64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.gen
}

func (b *openBook) pendingReopen(key string) (reopenRequest, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	r, ok := b.reopen[key]
	return r, ok
}

// pendingReopens lists the reopen requests, after forgetting those
// answered says are answered.
func (b *openBook) pendingReopens(answered func(reopenRequest) bool) []reopenRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []reopenRequest
	for k, r := range b.reopen {
		if answered(r) {
			delete(b.reopen, k)
			b.gen++
			continue
		}
		out = append(out, r)
	}
	return out
}

// legacyReopenList lists the reopen requests as an older kaas's heartbeat
// entries ("key#epoch"), sorted.
func (b *openBook) legacyReopenList() []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]string, 0, len(b.reopen))
	for k, r := range b.reopen {
		out = append(out, k+"#"+strconv.Itoa(int(r.epoch)))
	}
	sort.Strings(out)
	return out
}

// startOpening marks an open of key (ref's partition) in flight until the
// returned func runs.
func (b *openBook) startOpening(key string, ref openRef) (done func()) {
	b.mu.Lock()
	b.opening[key] = ref
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.opening, key)
		b.mu.Unlock()
	}
}

// openingKeys lists the opens in flight.
func (b *openBook) openingKeys() []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]string, 0, len(b.opening))
	for k := range b.opening {
		out = append(out, k)
	}
	return out
}

// openingRefs lists the partitions of the opens in flight.
func (b *openBook) openingRefs() []openRef {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]openRef, 0, len(b.opening))
	for _, r := range b.opening {
		out = append(out, r)
	}
	return out
}

// noteOpen records the outcome of an open (nil: served, or released).
func (b *openBook) noteOpen(key string, err error) {
	if err == nil {
		// The common case, for every partition at every reconcile: a
		// read lock unless there is something to forget.
		b.mu.RLock()
		_, failed := b.failed[key]
		b.mu.RUnlock()
		if !failed {
			return
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gen++
	if err == nil {
		delete(b.failed, key)
		return
	}
	b.failed[key] = openFailure{err: err.Error(), overBudget: errors.Is(err, ErrPartitionBudget),
		noFDs: errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)}
}

// failure is the recorded failure of key's last open.
func (b *openBook) failure(key string) (openFailure, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	f, ok := b.failed[key]
	return f, ok
}

// forgetFailures drops the recorded open failures of a topic incarnation
// (any incarnation when id is empty).
func (b *openBook) forgetFailures(name, id string) {
	prefix, suffix := name+"/", "@"+id
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.failed {
		if strings.HasPrefix(k, prefix) && (id == "" || strings.HasSuffix(k, suffix)) {
			delete(b.failed, k)
			b.gen++
		}
	}
}
