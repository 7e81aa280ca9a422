package check

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// MaxExamples bounds the examples a check reports.
const MaxExamples = 10

// Check IDs, as the fault model numbers them.
const (
	L1 = "L1" // acknowledged writes are in the final read at their offset
	L2 = "L2" // no value at more than one offset
	L3 = "L3" // no offset with two values
	L4 = "L4" // failed writes are never visible
	L5 = "L5" // indeterminate writes appear at most once
	L6 = "L6" // consumers' polls neither go back nor skip
	L7 = "L7" // observed high watermarks never decrease
	L8 = "L8" // committed offsets never regress
	L9 = "L9" // no producer ID and epoch issued twice

	// On compacted topics (a "topic" event with a compacting cleanup
	// policy), L1 does not hold: compaction removes superseded records.
	// These replace it there.
	C1 = "C1" // the latest acknowledged write of every key survives
	C2 = "C2" // a tombstoned key never comes back with an older value
	C3 = "C3" // sparse but stable: L2, L3, ordered final read, L6's skip rule
)

// Counts summarises a history.
type Counts struct {
	Events        int `json:"events"`
	Sends         int `json:"sends"`
	Acked         int `json:"acked"`
	Failed        int `json:"failed"`
	Indeterminate int `json:"indeterminate"`
	Polls         int `json:"polls"`
	FinalRecords  int `json:"final_records"`
	// FinalPartitions is how many partitions have final-read bounds.
	FinalPartitions int `json:"final_partitions"`
	HWMs            int `json:"hwms"`
	PIDs            int `json:"pids"`
	Commits         int `json:"commits"`
	Committed       int `json:"committed"`
	Faults          int `json:"faults"`
	// FaultKinds counts faults by kind.
	FaultKinds map[string]int `json:"fault_kinds,omitempty"`
	// CompactedTopics is how many topics the history marks compacted;
	// Keys counts the distinct keys (per partition) acknowledged there,
	// Tombstones the acknowledged tombstones.
	CompactedTopics int `json:"compacted_topics,omitempty"`
	Keys            int `json:"keys,omitempty"`
	Tombstones      int `json:"tombstones,omitempty"`
	// Unknown counts events of kinds Check does not know (ignored).
	Unknown int `json:"unknown,omitempty"`
}

// Result is one check's outcome.
type Result struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Checked is how many items the check looked at (acks, values,
	// polls, observations...); 0 means the history did not exercise it.
	Checked      int      `json:"checked"`
	NotExercised bool     `json:"not_exercised,omitempty"`
	Violations   int      `json:"violations"`
	Examples     []string `json:"examples,omitempty"`
}

// Exercised reports whether the history gave the check anything to check.
func (r Result) Exercised() bool { return r.Checked > 0 }

func (r *Result) violate(format string, a ...any) {
	r.Violations++
	if len(r.Examples) < MaxExamples {
		r.Examples = append(r.Examples, fmt.Sprintf(format, a...))
	}
}

// Report is what Check found.
type Report struct {
	Counts Counts   `json:"counts"`
	Checks []Result `json:"checks"`
	// Notes are caveats: what could not be checked, and why.
	Notes []string `json:"notes,omitempty"`
}

// OK reports whether no check found a violation.
func (r Report) OK() bool { return r.Violations() == 0 }

// Violations is the total over all checks.
func (r Report) Violations() int {
	n := 0
	for _, c := range r.Checks {
		n += c.Violations
	}
	return n
}

// Check returns the result with id, or a zero Result.
func (r Report) Check(id string) Result {
	for _, c := range r.Checks {
		if c.ID == id {
			return c
		}
	}
	return Result{}
}

// MarshalJSON adds "ok" and "violations" to the report's fields.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	return json.Marshal(struct {
		OK         bool `json:"ok"`
		Violations int  `json:"violations"`
		plain
	}{r.OK(), r.Violations(), plain(r)})
}

// String is a human summary.
func (r Report) String() string {
	var b strings.Builder
	c := r.Counts
	if r.OK() {
		b.WriteString("result: OK (no violations)\n")
	} else {
		fmt.Fprintf(&b, "result: VIOLATIONS (%d)\n", r.Violations())
	}
	fmt.Fprintf(&b, "  history: %d events; sends %d (acked %d, failed %d, indeterminate %d); polls %d; final records %d in %d partitions\n",
		c.Events, c.Sends, c.Acked, c.Failed, c.Indeterminate, c.Polls, c.FinalRecords, c.FinalPartitions)
	fmt.Fprintf(&b, "           hwm observations %d; producer ids %d; commits %d, read back %d; faults %d",
		c.HWMs, c.PIDs, c.Commits, c.Committed, c.Faults)
	if len(c.FaultKinds) > 0 {
		kinds := make([]string, 0, len(c.FaultKinds))
		for k, n := range c.FaultKinds {
			kinds = append(kinds, fmt.Sprintf("%s×%d", k, n))
		}
		sort.Strings(kinds)
		fmt.Fprintf(&b, " (%s)", strings.Join(kinds, ", "))
	}
	b.WriteString("\n")
	if c.CompactedTopics > 0 {
		fmt.Fprintf(&b, "           compacted topics %d: keys %d, acknowledged tombstones %d\n", c.CompactedTopics, c.Keys, c.Tombstones)
	}
	for _, res := range r.Checks {
		status := "ok"
		switch {
		case res.Violations > 0:
			status = fmt.Sprintf("VIOLATED ×%d", res.Violations)
		case !res.Exercised():
			status = "not exercised"
		}
		fmt.Fprintf(&b, "  %s %-22s %-16s %d checked\n", res.ID, res.Name, status, res.Checked)
		for _, ex := range res.Examples {
			fmt.Fprintf(&b, "       - %s\n", ex)
		}
		if res.Violations > len(res.Examples) {
			fmt.Fprintf(&b, "       - ... and %d more\n", res.Violations-len(res.Examples))
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}
