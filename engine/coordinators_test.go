package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/groups"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// coordinatorOf returns which of es coordinates group, checking that
// exactly one does and the others answer ErrNotCoordinator.
func coordinatorOf(group string, es ...*Engine) (*Engine, *groups.Coordinator, error) {
	var owner *Engine
	var coord *groups.Coordinator
	for _, e := range es {
		c, err := e.GroupCoordinator(group)
		switch {
		case err == nil && owner != nil:
			return nil, nil, errors.New("two coordinators")
		case err == nil:
			owner, coord = e, c
		case !errors.Is(err, ErrNotCoordinator):
			return nil, nil, err
		}
	}
	if owner == nil {
		return nil, nil, errors.New("no coordinator")
	}
	return owner, coord, nil
}

func simpleCommit(ctx context.Context, c *groups.Coordinator, group string, offset int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, group, -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "events"
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = 0, offset, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp := c.OffsetCommit(ctx, req)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func committed(c *groups.Coordinator, group string) int64 {
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	resp := c.OffsetFetch(g, false)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic == "events" && p.Partition == 0 {
				return p.Offset
			}
		}
	}
	return -1
}

// TestGroupCoordinatorsFailOver: every group has exactly one coordinator
// among the live brokers; when that broker leaves, another takes its shard
// over under a higher leader epoch with every acknowledged commit, and a
// broker that comes back gets its shards back, again with the commits.
func TestGroupCoordinatorsFailOver(t *testing.T) {
	ctx := safety(t)
	fsys := memfs.New()
	e1, e2 := startMember(t, fsys, 1), startMember(t, fsys, 2)
	var names []string
	for i := range 24 {
		names = append(names, fmt.Sprintf("group-%d", i))
	}
	owners := map[string]int32{}
	poll(t, ctx, "every group coordinated by one broker, both used", func() error {
		used := map[int32]bool{}
		for _, g := range names {
			e, _, err := coordinatorOf(g, e1.Engine, e2.Engine)
			if err != nil {
				return fmt.Errorf("%s: %w", g, err)
			}
			owners[g] = e.BrokerID()
			used[e.BrokerID()] = true
		}
		if len(used) != 2 {
			return errors.New("one broker coordinates everything")
		}
		return nil
	})
	for i, g := range names {
		// As a client does: a coordinator that moved meanwhile answers
		// NOT_COORDINATOR, and the commit goes to the new one.
		poll(t, ctx, "commit "+g, func() error {
			_, c, err := coordinatorOf(g, e1.Engine, e2.Engine)
			if err != nil {
				return err
			}
			switch code := simpleCommit(ctx, c, g, int64(100+i)); code {
			case 0:
				return nil
			case kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code:
				return fmt.Errorf("commit %s: error %d", g, code)
			default:
				t.Fatalf("commit %s: error %d", g, code)
				return nil
			}
		})
	}
	check := func(es ...*Engine) error {
		for i, g := range names {
			_, c, err := coordinatorOf(g, es...)
			if err != nil {
				return fmt.Errorf("%s: %w", g, err)
			}
			if got := committed(c, g); got != int64(100+i) {
				t.Fatalf("%s: committed %d after the move, want %d", g, got, 100+i)
			}
		}
		return nil
	}
	e2.stop(t)
	poll(t, ctx, "broker 1 coordinating every group with its commits", func() error { return check(e1.Engine) })
	e2 = startMember(t, fsys, 2)
	poll(t, ctx, "both brokers coordinating again with the commits", func() error {
		for _, g := range names {
			if e, _, err := coordinatorOf(g, e1.Engine, e2.Engine); err != nil || e.BrokerID() != owners[g] {
				return fmt.Errorf("%s not back at broker %d: %v", g, owners[g], err)
			}
		}
		return check(e1.Engine, e2.Engine)
	})
}
