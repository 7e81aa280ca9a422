package engine

// The admin APIs that change a live topic: its configs (AlterConfigs,
// IncrementalAlterConfigs), its partition count (CreatePartitions), and
// its log start offsets (DeleteRecords).
//
// Configs and partition counts are desired state: like CreateTopic and
// DeleteTopic, any broker writes the topic's spec (one small file, replaced
// atomically: temp, fsync, rename, directory fsync) under adminMu, with the
// generation bumped; the reconciler of every broker then applies it (each
// served partition is reconfigured, new partitions are assigned by the
// controller and opened by their owners). DeleteRecords is not desired
// state: it is a change to one partition's log, made by its owner.

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"strings"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// ConfigOpType is an IncrementalAlterConfigs operation (Kafka's numbering).
type ConfigOpType int8

// IncrementalAlterConfigs operations.
const (
	ConfigSet      ConfigOpType = 0
	ConfigDelete   ConfigOpType = 1
	ConfigAppend   ConfigOpType = 2
	ConfigSubtract ConfigOpType = 3
)

// ConfigOp is one change of IncrementalAlterConfigs.
type ConfigOp struct {
	Name  string
	Op    ConfigOpType
	Value string
}

// readLiveSpec reads a topic's desired state through open() (fresh on
// every host, unlike the routing view): absent or marked deleted is
// ErrUnknownTopic.
func (e *Engine) readLiveSpec(name string) (desired.TopicSpec, error) {
	if err := desired.ValidTopicName(name); err != nil {
		return desired.TopicSpec{}, fmt.Errorf("%w: %v", desired.ErrInvalidTopic, err)
	}
	spec, err := desired.ReadTopicSpec(e.fsys, e.cfg.ClusterDir, name)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && spec.Deleted) {
		return desired.TopicSpec{}, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	return spec, err
}

// TopicSpecNow returns a live topic's desired state as the volume has it
// now (DescribeConfigs reads it so that a change made through any broker
// is seen at once).
func (e *Engine) TopicSpecNow(name string) (desired.TopicSpec, error) { return e.readLiveSpec(name) }

// updateTopicSpec re-reads a live topic's spec, lets change edit a copy,
// and writes it back with the generation bumped (unless validateOnly, or
// nothing changed). The write is atomic and this broker's writes are
// serialised. Writes from two brokers at once are last-writer-wins, as
// for DeleteTopic: the volume offers no compare-and-swap, and a
// generation-claim file (exclusive create) would be the way to get one.
func (e *Engine) updateTopicSpec(name string, validateOnly bool, change func(*desired.TopicSpec) error) (desired.TopicSpec, error) {
	if err := desired.ValidTopicName(name); err != nil {
		return desired.TopicSpec{}, fmt.Errorf("%w: %v", desired.ErrInvalidTopic, err)
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	cur, err := e.readLiveSpec(name)
	if err != nil {
		return desired.TopicSpec{}, err
	}
	if cur.ManagedBy != "" {
		return cur, managedError(cur)
	}
	next := cur
	next.Configs = maps.Clone(cur.Configs)
	if err := change(&next); err != nil {
		return cur, err
	}
	if len(next.Configs) == 0 {
		next.Configs = nil
	}
	if validateOnly || (next.Partitions == cur.Partitions && maps.Equal(next.Configs, cur.Configs)) {
		return next, nil
	}
	next.Generation = cur.Generation + 1
	if err := desired.WriteTopicSpec(e.fsys, e.cfg.ClusterDir, next); err != nil {
		return cur, err
	}
	e.log.Info("topic changed", "topic", name, "topicID", next.ID, "generation", next.Generation,
		"partitions", next.Partitions, "configs", next.Configs)
	// Apply it here now (served partitions reconfigured, the partition
	// slice grown); the reconcile opens what the assignment gives this
	// broker, and the other brokers pick the change up at their next
	// reconcile of the topic.
	uerr := e.upsertTopic(next)
	e.queue.Add(topicKey(name))
	if uerr != nil {
		e.log.Error(uerr, "apply changed topic; the reconciler retries", "topic", name)
	}
	return next, nil
}

// AlterTopicConfigs replaces every config of a topic (AlterConfigs): keys
// not given go back to their defaults.
func (e *Engine) AlterTopicConfigs(name string, configs map[string]string, validateOnly bool) (desired.TopicSpec, error) {
	if err := desired.ValidateTopicConfigs(configs); err != nil {
		return desired.TopicSpec{}, fmt.Errorf("%w: %v", desired.ErrInvalidConfig, err)
	}
	return e.updateTopicSpec(name, validateOnly, func(s *desired.TopicSpec) error {
		s.Configs = maps.Clone(configs)
		return nil
	})
}

// IncrementalAlterTopicConfigs applies ops to a topic's configs
// (IncrementalAlterConfigs): SET a value, DELETE back to the default,
// APPEND items to or SUBTRACT items from a list-type config (starting from
// its default when unset). A key may appear once.
func (e *Engine) IncrementalAlterTopicConfigs(name string, ops []ConfigOp, validateOnly bool) (desired.TopicSpec, error) {
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Name] {
			return desired.TopicSpec{}, fmt.Errorf("%w: config %s appears more than once", desired.ErrInvalidConfig, op.Name)
		}
		seen[op.Name] = true
		if err := desired.ValidateTopicConfigKey(op.Name); err != nil {
			return desired.TopicSpec{}, fmt.Errorf("%w: %v", desired.ErrInvalidConfig, err)
		}
		c, _ := desired.LookupTopicConfig(op.Name)
		switch op.Op {
		case ConfigSet, ConfigDelete:
		case ConfigAppend, ConfigSubtract:
			if !c.IsList() {
				verb := "append"
				if op.Op == ConfigSubtract {
					verb = "subtract"
				}
				return desired.TopicSpec{}, fmt.Errorf("%w: config value %s is not allowed for config key: %s (only list-type configs, such as cleanup.policy, take APPEND and SUBTRACT)",
					desired.ErrInvalidConfig, verb, op.Name)
			}
		default:
			return desired.TopicSpec{}, fmt.Errorf("%w: unknown operation %d for config %s", desired.ErrInvalidConfig, op.Op, op.Name)
		}
	}
	return e.updateTopicSpec(name, validateOnly, func(s *desired.TopicSpec) error {
		if s.Configs == nil {
			s.Configs = map[string]string{}
		}
		for _, op := range ops {
			switch op.Op {
			case ConfigSet:
				s.Configs[op.Name] = op.Value
			case ConfigDelete:
				delete(s.Configs, op.Name)
			case ConfigAppend:
				items := desired.SplitConfigList(s.ConfigValue(op.Name))
				for _, it := range desired.SplitConfigList(op.Value) {
					if !contains(items, it) {
						items = append(items, it)
					}
				}
				s.Configs[op.Name] = strings.Join(items, ",")
			case ConfigSubtract:
				var kept []string
				drop := desired.SplitConfigList(op.Value)
				for _, it := range desired.SplitConfigList(s.ConfigValue(op.Name)) {
					if !contains(drop, it) {
						kept = append(kept, it)
					}
				}
				s.Configs[op.Name] = strings.Join(kept, ",")
			}
		}
		if err := desired.ValidateTopicConfigs(s.Configs); err != nil {
			return fmt.Errorf("%w: %v", desired.ErrInvalidConfig, err)
		}
		return nil
	})
}

func contains(items []string, s string) bool {
	for _, it := range items {
		if it == s {
			return true
		}
	}
	return false
}

// CreatePartitions raises a topic's partition count to count
// (CreatePartitions). Partitions are only ever added; the controller
// assigns the new ones like every other partition.
func (e *Engine) CreatePartitions(name string, count int32, validateOnly bool) (desired.TopicSpec, error) {
	return e.updateTopicSpec(name, validateOnly, func(s *desired.TopicSpec) error {
		switch {
		case count == s.Partitions:
			return fmt.Errorf("%w: topic already has %d partitions", desired.ErrInvalidPartitions, s.Partitions)
		case count < s.Partitions:
			return fmt.Errorf("%w: topic currently has %d partitions, which is higher than the requested %d", desired.ErrInvalidPartitions, s.Partitions, count)
		case count > desired.MaxPartitions:
			return fmt.Errorf("%w: %d partitions is above the limit of %d", desired.ErrInvalidPartitions, count, desired.MaxPartitions)
		}
		if err := e.checkPartitionBudget(int64(count - s.Partitions)); err != nil {
			return err
		}
		s.Partitions = count
		return nil
	})
}

// DeleteRecords raises the log start offset of a partition this broker
// serves to offset (-1: the high watermark), durably, and returns the new
// low watermark. An offset above the high watermark, or below -1, is
// partlog.ErrOffsetOutOfRange.
func (e *Engine) DeleteRecords(topic string, partition int32, offset int64) (int64, error) {
	p, err := e.Partition(topic, partition)
	if err != nil {
		return -1, err
	}
	if offset < -1 {
		return -1, fmt.Errorf("%w: DeleteRecords offset %d", partlog.ErrOffsetOutOfRange, offset)
	}
	low, err := p.DeleteRecordsBefore(offset)
	if err != nil {
		return -1, err
	}
	e.log.V(1).Info("records deleted", "topic", topic, "partition", partition, "before", offset, "logStart", low)
	return low, nil
}

// managedError refuses a Kafka admin change to a topic declared outside
// Kafka, naming the declaration to change instead.
func managedError(spec desired.TopicSpec) error {
	return fmt.Errorf("%w: topic %s is declared by %s; change or delete it there", desired.ErrTopicManaged, spec.Name, spec.ManagedBy)
}
