package engine

// The partition budget: each open partition holds memory (its log's
// state, indexes, producer state), and a broker that opens more than it
// can hold runs out of it. Files are not the limit: partition logs keep
// their files in a process-wide cache with a cap (volume/handles), and an
// idle partition holds none. Config.MaxPartitionsPerBroker is this
// broker's budget (cmd/kaas-broker: derived from its memory limit, none
// without one). It is enforced twice:
//
//   - Admission: CreateTopics, CreatePartitions and auto-creation that
//     would make the cluster's partitions more than its live brokers'
//     budgets together are refused whole, up front (POLICY_VIOLATION).
//     Each broker publishes its budget in its heartbeat; a broker whose
//     heartbeat has none (an older kaas) is counted with this broker's.
//     The count is of the desired state as this broker's routing table
//     holds it (its own changes at once, other brokers' within a resync
//     interval): the volume has no compare-and-swap, so two brokers
//     admitting at the same moment can overshoot by what they admitted.
//     Placement is by rendezvous hashing, so a broker's share can exceed
//     the mean by a few percent; the second enforcement covers that.
//   - Opening: a broker holds at most its budget of partitions open. An
//     open beyond it fails as an ordinary, retried reconcile error naming
//     the budget: the partition is reported unserved (reconcile status,
//     /readyz, /status, its partition report) and is opened when a slot
//     frees, so the broker never crash-loops on a desired state larger
//     than it can serve.

import (
	"errors"
	"fmt"

	"github.com/kaas-dev/kaas/engine/reconcile"
)

// ErrPartitionBudget refuses an admin change that would make the cluster
// hold more partitions than its brokers' budgets, and fails an open beyond
// this broker's budget.
var ErrPartitionBudget = errors.New("partition budget")

// desiredPartitions counts the partitions of every live topic this broker
// knows.
func (e *Engine) desiredPartitions() int64 {
	return e.routes.livePartitions()
}

// clusterPartitionBudget sums the budgets of the live brokers (this one
// included, live or not yet); perBroker is their common budget, -1 if
// they differ.
func (e *Engine) clusterPartitionBudget() (capacity int64, brokers int, perBroker int64) {
	own := int64(e.cfg.MaxPartitionsPerBroker)
	capacity, brokers, perBroker = own, 1, own
	cv := e.clusterView()
	for _, b := range cv.live {
		if b.ID == e.cfg.BrokerID {
			continue
		}
		budget := own
		if hb, ok := cv.heartbeats[b.ID]; ok && hb.MaxPartitions > 0 {
			budget = int64(hb.MaxPartitions)
		}
		if budget != perBroker {
			perBroker = -1
		}
		capacity += budget
		brokers++
	}
	return capacity, brokers, perBroker
}

// checkPartitionBudget refuses adding partitions to the cluster beyond
// its brokers' budgets. The caller holds adminMu.
func (e *Engine) checkPartitionBudget(adding int64) error {
	if e.cfg.MaxPartitionsPerBroker <= 0 || adding <= 0 {
		return nil
	}
	total := e.desiredPartitions() + adding
	capacity, brokers, per := e.clusterPartitionBudget()
	if total <= capacity {
		return nil
	}
	on := "1 broker"
	if brokers > 1 {
		on = fmt.Sprintf("%d live brokers", brokers)
	}
	if per >= 0 {
		return fmt.Errorf("%w: creating %d partitions would make %d on %s; each broker holds at most %d (--max-partitions-per-broker)",
			ErrPartitionBudget, adding, total, on, per)
	}
	return fmt.Errorf("%w: creating %d partitions would make %d on %s, which hold at most %d together (the sum of their --max-partitions-per-broker)",
		ErrPartitionBudget, adding, total, on, capacity)
}

// takeOpenSlot reserves one of this broker's budget of open partitions
// for an open of what (topic/partition); releaseOpenSlot gives it back
// when that open fails or the partition is closed.
func (e *Engine) takeOpenSlot(what string) error {
	limit := int64(e.cfg.MaxPartitionsPerBroker)
	for {
		n := e.openSlots.Load()
		if limit > 0 && n >= limit {
			return budgetFull(what, n, limit)
		}
		if e.openSlots.CompareAndSwap(n, n+1) {
			return nil
		}
	}
}

func (e *Engine) releaseOpenSlot() { e.openSlots.Add(-1) }

func budgetFull(what string, open, limit int64) error {
	return fmt.Errorf("%w: %s is not opened: this broker holds %d partitions open, all of its budget (--max-partitions-per-broker %d); it opens when one is released",
		ErrPartitionBudget, what, open, limit)
}

// stillOverBudget fails an open of key at once, with the budget error,
// while the budget is full and the partition's last open failed for it:
// the failure is in its reconcile status already, so a retry costs no
// volume I/O until a slot frees.
func (e *Engine) stillOverBudget(key, what string) error {
	limit := int64(e.cfg.MaxPartitionsPerBroker)
	open := e.openSlots.Load()
	if limit <= 0 || open < limit {
		return nil
	}
	if f, ok := e.opens.failure(key); !ok || !f.overBudget {
		return nil
	}
	// Waiting for a slot, not failing: a close or a raised budget frees one.
	return reconcile.WaitingOn(budgetFull(what, open, limit))
}
