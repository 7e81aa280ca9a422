package cluster

import (
	"errors"
	"io/fs"
	"path"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// reportProcedure: broker 2 writes its partition report and then the
// heartbeat naming it, three times (what it serves changing), then
// leaves.
func reportProcedure() clusterProcedure {
	report := func(inc string, seq uint64, unserved ...int32) PartitionReport {
		r := PartitionReport{BrokerID: 2, Incarnation: inc, Seq: seq, At: AssignmentVersion{ControllerEpoch: 1, Version: int64(seq)}}
		if len(unserved) > 0 {
			r.Unserved = []UnservedSet{{TopicID: "t-orders", Reason: "opening", Partitions: unserved}}
		}
		return r
	}
	return clusterProcedure{
		name:   "partition-report",
		covers: []string{"WritePartitionReport"},
		setup: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			if err := WriteHeartbeat(fsys, clusterDir, Heartbeat{Format: HeartbeatFormat, BrokerID: 2, Counter: 5, KafkaAddr: "b2:9092", Incarnation: "b0"}); err != nil {
				t.Fatal(err)
			}
		},
		work: func(fsys volume.FS, ct *clusterTrial) error {
			h := NewHeartbeater(fsys, clusterDir, Heartbeat{BrokerID: 2, KafkaAddr: "b2:9092", Incarnation: "b1"})
			for seq, unserved := range [][]int32{{0, 1, 2}, {2}, nil} {
				r := report("b1", uint64(seq+1), unserved...)
				if err := WritePartitionReport(fsys, clusterDir, r); err != nil {
					return err
				}
				h.SetReport(r.Summary(int32(3 - len(unserved))))
				if err := h.Beat(); err != nil {
					return err
				}
			}
			return h.Leave()
		},
		checkCrashed: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			t.Helper()
			hb := readBeat(t, fsys, 2)
			if hb.Report.Seq == 0 {
				return
			}
			r, err := ReadPartitionReport(fsys, clusterDir, 2)
			if err != nil {
				t.Fatalf("the heartbeat names report %d; the report: %v", hb.Report.Seq, err)
			}
			if r.Incarnation != hb.Incarnation || r.Seq < hb.Report.Seq || r.Summary(hb.Report.Serving) != hb.Report && r.Seq == hb.Report.Seq {
				t.Fatalf("the heartbeat names report %+v; on the volume: %+v", hb.Report, r)
			}
			ct.tempsAfterCrash += len(tempsIn(t, fsys, path.Join(clusterDir, BrokersDir), ".2.partitions.json"))
		},
		restart: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			t.Helper()
			h := NewHeartbeater(fsys, clusterDir, Heartbeat{BrokerID: 2, KafkaAddr: "b2:9092", Incarnation: "b2"})
			r := report("b2", 1, 4)
			if err := WritePartitionReport(fsys, clusterDir, r); err != nil {
				t.Fatal(err)
			}
			h.SetReport(r.Summary(0))
			if err := h.Beat(); err != nil {
				t.Fatal(err)
			}
			got, err := ReadPartitionReport(fsys, clusterDir, 2)
			if err != nil || got.Incarnation != "b2" || got.Seq != 1 || len(got.Unserved) != 1 {
				t.Fatalf("report after restart %+v, %v", got, err)
			}
			// The report's own temps are swept with the heartbeat's.
			if left := tempsIn(t, fsys, path.Join(clusterDir, BrokersDir), ".2."); len(left) > 0 {
				t.Fatalf("temps left after the restarted broker's first beat: %v", left)
			}
		},
	}
}

// A missing report reads as not existing, and one of another broker is
// refused.
func TestPartitionReportRead(t *testing.T) {
	fsys := memfs.New()
	if _, err := ReadPartitionReport(fsys, clusterDir, 2); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no report: %v", err)
	}
	r := PartitionReport{BrokerID: 3, Incarnation: "x", Seq: 1}
	if err := WritePartitionReport(fsys, clusterDir, r); err != nil {
		t.Fatal(err)
	}
	b, err := volume.ReadFile(fsys, ReportPath(clusterDir, 3))
	if err != nil {
		t.Fatal(err)
	}
	if err := volume.WriteFileAtomic(fsys, ReportPath(clusterDir, 2), b); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPartitionReport(fsys, clusterDir, 2); err == nil {
		t.Fatal("broker 3's report read as broker 2's")
	}
	if s := r.Summary(5); s.Seq != 1 || s.Serving != 5 || !s.Empty() {
		t.Fatalf("summary %+v", s)
	}
}
