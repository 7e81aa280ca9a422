package engine

import (
	"sync"
	"sync/atomic"

	"github.com/kaas-dev/kaas/engine/reconcile"
	"github.com/kaas-dev/kaas/states"
)

// machineBook is the machines' records as this broker's reconciler last
// wrote or drove them, kept in memory so that the metrics read no volume:
// a record enters at every save and after every drive, and leaves when
// this broker lets go of its object (a partition released, a topic's
// partition records forgotten by its delete).
type machineBook struct {
	mu   sync.Mutex
	recs map[machineRef]machineEntry
}

type machineRef struct{ kind, object string }

type machineEntry struct {
	state, desired states.State
	attempts       int
}

func newMachineBook() *machineBook { return &machineBook{recs: map[machineRef]machineEntry{}} }

// The book's and the counters' methods do nothing on nil: tests build
// engines by hand.
func (b *machineBook) note(rec *states.Record) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recs[machineRef{rec.Kind, rec.Object}] = machineEntry{state: rec.State, desired: rec.Desired, attempts: rec.Attempts}
}

func (b *machineBook) forget(kind, object string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.recs, machineRef{kind, object})
}

// machineCount is one kaas_machine_records series.
type machineCount struct{ kind, state string }

// tally counts the records by kind and state, and gives each kind the
// highest attempt count of a record not at its end state.
func (b *machineBook) tally() (counts map[machineCount]int, attempts map[string]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	counts, attempts = map[machineCount]int{}, map[string]int{}
	for ref, e := range b.recs {
		counts[machineCount{ref.kind, string(e.state)}]++
		if e.state != e.desired {
			attempts[ref.kind] = max(attempts[ref.kind], e.attempts)
		}
	}
	return counts, attempts
}

// Reconcile results, as kaas_reconcile_total labels them.
const (
	resultOK = iota
	resultWaiting
	resultError
	resultCount
)

var resultNames = [resultCount]string{"ok", "waiting", "error"}

// reconcileCounts counts reconcile steps by kind and result: each step of
// a state machine under the machine's kind (states.Machines), each pass of
// a reconcile key under the key's kind. The table is built once and only
// read after, so counting is an atomic add.
type reconcileCounts struct {
	kinds []string
	by    map[string]*[resultCount]atomic.Uint64
}

func newReconcileCounts() *reconcileCounts {
	c := &reconcileCounts{by: map[string]*[resultCount]atomic.Uint64{}}
	for _, d := range states.Machines {
		c.kinds = append(c.kinds, d.Kind)
	}
	c.kinds = append(c.kinds, string(KindTopic), string(KindGroups), string(KindTrash))
	for _, k := range c.kinds {
		c.by[k] = &[resultCount]atomic.Uint64{}
	}
	return c
}

func (c *reconcileCounts) add(kind string, result int) {
	if c == nil {
		return
	}
	if n, ok := c.by[kind]; ok {
		n[result].Add(1)
	}
}

// noteStop counts a machine step that stopped its pass, from the record
// saved then: waiting, or failed.
func (c *reconcileCounts) noteStop(rec *states.Record) {
	if rec.IsWaiting() {
		c.add(rec.Kind, resultWaiting)
		return
	}
	c.add(rec.Kind, resultError)
}

// notePass counts a reconcile key's pass by how it ended.
func (c *reconcileCounts) notePass(kind Kind, out reconcile.Outcome) {
	switch out {
	case reconcile.OutcomeOK:
		c.add(string(kind), resultOK)
	case reconcile.OutcomeWaiting:
		c.add(string(kind), resultWaiting)
	default:
		c.add(string(kind), resultError)
	}
}
