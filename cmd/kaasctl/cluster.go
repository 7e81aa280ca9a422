package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/volume"
)

// brokerRow is one line of `kaasctl brokers`.
type brokerRow struct {
	ID         int32  `json:"id"`
	State      string `json:"state"` // live, leaving, or no-progress
	Controller bool   `json:"controller"`
	KafkaAddr  string `json:"kafkaAddr"`
	AdminAddr  string `json:"adminAddr,omitempty"`
	Zone       string `json:"zone,omitempty"`
	Owned      int    `json:"ownedPartitions"`
	Open       int    `json:"openPartitions"`
}

// observeBrokers reads the heartbeats, then again until every broker's
// counter has moved or window has passed: liveness is progress this
// process observes, never a time another host wrote (docs/design.md §2).
func observeBrokers(fsys volume.FS, clusterDir string, window time.Duration, now func() time.Time, wait func(time.Duration)) (map[int32]cluster.Heartbeat, map[int32]bool, error) {
	first, err := cluster.ReadHeartbeats(fsys, clusterDir)
	if err != nil && first == nil {
		return nil, nil, err
	}
	start := map[int32]cluster.Heartbeat{}
	for _, hb := range first {
		start[hb.BrokerID] = hb
	}
	latest := map[int32]cluster.Heartbeat{}
	for id, hb := range start {
		latest[id] = hb
	}
	moved := map[int32]bool{}
	deadline := now().Add(window)
	for len(moved) < len(start) && now().Before(deadline) {
		wait(50 * time.Millisecond)
		hbs, _ := cluster.ReadHeartbeats(fsys, clusterDir)
		for _, hb := range hbs {
			s, seen := start[hb.BrokerID]
			if !seen {
				continue
			}
			latest[hb.BrokerID] = hb
			if hb.Incarnation != s.Incarnation || hb.Counter > s.Counter {
				moved[hb.BrokerID] = true
			}
		}
	}
	return latest, moved, nil
}

// brokersFrames reads the brokers' heartbeats once per refresh, each time
// watching them for window.
func brokersFrames(src source, window time.Duration) nextFrame {
	return func(context.Context) (frame, bool, error) {
		rows, epoch, err := brokerRows(src, window, time.Now, time.Sleep)
		if err != nil {
			return frame{}, false, err
		}
		return frame{rows: rows, table: func(w io.Writer) error { return brokersTable(w, rows, epoch) }}, true, nil
	}
}

// brokerRows are the brokers of the volume's heartbeats, and the
// controller's epoch.
func brokerRows(src source, window time.Duration, now func() time.Time, wait func(time.Duration)) ([]brokerRow, int32, error) {
	dir, err := src.cluster()
	if err != nil {
		return nil, 0, err
	}
	fsys := volume.OS()
	hbs, moved, err := observeBrokers(fsys, dir, window, now, wait)
	if err != nil {
		return nil, 0, err
	}
	claim, haveClaim, err := cluster.CurrentClaim(fsys, dir)
	if err != nil {
		return nil, 0, err
	}
	owned := map[int32]int{}
	if a, _, err := cluster.LoadAssignment(fsys, dir); err == nil {
		for _, ps := range a.Topics {
			for _, p := range ps {
				owned[p.Broker]++
			}
		}
	}
	rows := []brokerRow{}
	for id, hb := range hbs {
		state := "no-progress"
		switch {
		case hb.Leaving:
			state = "leaving"
		case moved[id]:
			state = "live"
		}
		rows = append(rows, brokerRow{ID: id, State: state, Controller: haveClaim && claim.BrokerID == id,
			KafkaAddr: hb.KafkaAddr, AdminAddr: hb.AdminAddr, Zone: hb.Zone, Owned: owned[id], Open: serving(hb)})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
	return rows, claim.Epoch, nil
}

// serving is how many partitions a broker says it serves: its report's
// count, or an older kaas's open list.
func serving(hb cluster.Heartbeat) int {
	if hb.Format < cluster.HeartbeatFormat {
		return len(hb.Open)
	}
	return int(hb.Report.Serving)
}

func brokersTable(out io.Writer, rows []brokerRow, controllerEpoch int32) error {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tCONTROLLER\tKAFKA\tADMIN\tZONE\tOWNED\tOPEN")
	for _, r := range rows {
		ctl := ""
		if r.Controller {
			ctl = fmt.Sprintf("yes (epoch %d)", controllerEpoch)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", r.ID, r.State, ctl, r.KafkaAddr, r.AdminAddr, r.Zone, r.Owned, r.Open)
	}
	return tw.Flush()
}

// assignmentRow is one partition of `kaasctl assignment`.
type assignmentRow struct {
	Topic       string `json:"topic"`
	TopicID     string `json:"topicID"`
	Partition   int32  `json:"partition"`
	Broker      int32  `json:"broker"`
	LeaderEpoch int32  `json:"leaderEpoch"`
}

func assignment(src source, out io.Writer) error {
	dir, err := src.cluster()
	if err != nil {
		return err
	}
	fsys := volume.OS()
	a, _, err := cluster.LoadAssignment(fsys, dir)
	if err != nil {
		return fmt.Errorf("read assignment (has a controller written one yet?): %w", err)
	}
	names := map[string]string{engine.GroupsTopicID: "(group coordinator shards)"}
	if specs, err := desired.ListTopicSpecs(fsys, dir); err == nil {
		for _, s := range specs {
			names[s.ID] = s.Name
		}
	}
	var rows []assignmentRow
	add := func(id string, ps []cluster.PartitionOwner) {
		for i, p := range ps {
			rows = append(rows, assignmentRow{Topic: names[id], TopicID: id, Partition: int32(i), Broker: p.Broker, LeaderEpoch: p.LeaderEpoch})
		}
	}
	for id, ps := range a.Topics {
		add(id, ps)
	}
	add(engine.GroupsTopicID, a.Coordinators)
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Topic != rows[j].Topic {
			return rows[i].Topic < rows[j].Topic
		}
		if rows[i].TopicID != rows[j].TopicID {
			return rows[i].TopicID < rows[j].TopicID
		}
		return rows[i].Partition < rows[j].Partition
	})
	if src.output == "json" {
		if rows == nil {
			rows = []assignmentRow{}
		}
		return printJSON(out, struct {
			ControllerEpoch int32           `json:"controllerEpoch"`
			Version         int64           `json:"version"`
			Partitions      []assignmentRow `json:"partitions"`
		}{a.ControllerEpoch, a.Version, rows})
	}
	fmt.Fprintf(out, "controller epoch %d, version %d\n", a.ControllerEpoch, a.Version)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tBROKER\tLEADER EPOCH")
	for _, r := range rows {
		name := r.Topic
		if name == "" {
			name = "(" + strings.SplitN(r.TopicID, "-", 2)[0] + "…, no desired state)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", name, r.Partition, r.Broker, r.LeaderEpoch)
	}
	return tw.Flush()
}
