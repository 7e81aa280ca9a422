package cluster

import (
	"encoding/json"
	"fmt"
	"path"
	"strconv"

	"github.com/kaas-dev/kaas/volume"
)

// A broker's partition report, <cluster>/brokers/<id>.partitions.json:
// what it is assigned and does not serve, and the new leader epochs it
// asks for. Its heartbeat carries only a summary (ReportSummary), so the
// heartbeat's size does not grow with the partitions a broker holds; the
// report is rewritten only when its content changes, and others read it
// only when the summary's Seq moved and it is not empty. At idle, with
// every assigned partition served, nobody writes or reads it.

// ReportFormat is the partition report's format.
const ReportFormat = 2

// ReportSummary is what a heartbeat says of its broker's report.
type ReportSummary struct {
	// Seq is the report's sequence number, one more with each write by
	// one incarnation; 0 before the first.
	Seq uint64 `json:"seq,omitempty"`
	// At is the assignment version the report describes.
	At AssignmentVersion `json:"at"`
	// Serving counts the partitions the broker serves; Unserved those it
	// is assigned at At and does not serve; Asks its reopen requests.
	Serving  int32 `json:"serving"`
	Unserved int32 `json:"unserved,omitempty"`
	Asks     int32 `json:"asks,omitempty"`
}

// Empty reports whether the report holds no entry: nothing to read.
func (s ReportSummary) Empty() bool { return s.Unserved == 0 && s.Asks == 0 }

// UnservedSet is a topic's partitions (the coordinator shards' under
// CoordinatorsID) that a broker is assigned and does not serve, for one
// reason: opening, over-budget (its partition budget is full), no-fds
// (the operating system refused a file), failed (the last open failed)
// or unknown-topic (the broker has not read the topic's desired state).
type UnservedSet struct {
	TopicID    string  `json:"topicId"`
	Reason     string  `json:"reason"`
	Partitions []int32 `json:"partitions"`
}

// EpochAsk asks the controller for a leader epoch above Epoch for one
// partition (or shard) assigned to the asking broker at Epoch: its log
// failed for good there, or another writer holds that epoch's fence.
type EpochAsk struct {
	TopicID   string `json:"topicId"`
	Partition int32  `json:"partition"`
	Epoch     int32  `json:"epoch"`
}

// PartitionReport is the content of a broker's report file.
type PartitionReport struct {
	Format      int               `json:"format"`
	BrokerID    int32             `json:"brokerId"`
	Incarnation string            `json:"incarnation"`
	Seq         uint64            `json:"seq"`
	At          AssignmentVersion `json:"at"`
	Unserved    []UnservedSet     `json:"unserved,omitempty"`
	Asks        []EpochAsk        `json:"asks,omitempty"`
}

// Summary is what a heartbeat says of r; serving is counted by the caller.
func (r PartitionReport) Summary(serving int32) ReportSummary {
	s := ReportSummary{Seq: r.Seq, At: r.At, Serving: serving, Asks: int32(len(r.Asks))}
	for _, u := range r.Unserved {
		s.Unserved += int32(len(u.Partitions))
	}
	return s
}

// ReportPath is broker id's report file.
func ReportPath(clusterDir string, id int32) string {
	return path.Join(clusterDir, BrokersDir, strconv.FormatInt(int64(id), 10)+".partitions.json")
}

// WritePartitionReport replaces r.BrokerID's report atomically. Only that
// broker's current incarnation calls it, before the heartbeat that names
// r.Seq. An error may mean the report landed anyway; the next write, with
// a higher Seq, converges.
func WritePartitionReport(fsys volume.FS, clusterDir string, r PartitionReport) error {
	r.Format = ReportFormat
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("partition report of broker %d: %w", r.BrokerID, err)
	}
	if err := writeAtomicMkdir(fsys, ReportPath(clusterDir, r.BrokerID), b); err != nil {
		return fmt.Errorf("partition report of broker %d: %w", r.BrokerID, err)
	}
	return nil
}

// ReadPartitionReport reads broker id's report through Open, retrying a
// transient ENOENT or ESTALE. The caller checks that it is of the
// incarnation, and at least the Seq, the heartbeat names: a report is
// written before its heartbeat, so an older one is a stale read.
func ReadPartitionReport(fsys volume.FS, clusterDir string, id int32) (PartitionReport, error) {
	b, err := readKnown(fsys, ReportPath(clusterDir, id))
	if err != nil {
		return PartitionReport{}, fmt.Errorf("partition report of broker %d: %w", id, err)
	}
	var r PartitionReport
	if err := json.Unmarshal(b, &r); err != nil {
		return PartitionReport{}, fmt.Errorf("partition report of broker %d: %w", id, err)
	}
	if r.Format != ReportFormat || r.BrokerID != id {
		return PartitionReport{}, fmt.Errorf("partition report of broker %d: format %d of broker %d", id, r.Format, r.BrokerID)
	}
	return r, nil
}
