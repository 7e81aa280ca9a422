package wire

// DescribeLogDirs: versions 0-4.
//
// Behavior:
// * One log dir per broker, the data volume, named by the broker's data
//   directory as an absolute path (as Kafka names each of its log.dirs).
//   It lists every partition this broker serves at its assigned epoch,
//   each with its size in bytes (the sum of its segment files, as its log
//   tracks them), OffsetLag 0 (the leader is the only replica) and
//   IsFutureKey false (kaas never moves a partition between dirs).
// * Null Topics describes every partition; otherwise only the named
//   partitions this broker serves (unknown topics and partitions are left
//   out, as are topics with none left), and an empty list describes none.
// * Authorization, as Kafka's: DESCRIBE on the cluster, else no dirs and
//   CLUSTER_AUTHORIZATION_FAILED. Below v3 the response has no error
//   field, so the answer is empty (Kafka's AdminClient reads an empty
//   answer as CLUSTER_AUTHORIZATION_FAILED).
//
// Version notes:
// * v1: same as v0.
// * v2: flexible versions.
// * v3: top-level ErrorCode.
// * v4: TotalBytes and UsableBytes, from statfs of the data directory; -1
//   when the volume cannot tell them.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
)

func handleDescribeLogDirs(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !c.allowedCluster(kmsg.ACLOperationDescribe) {
		resp.ErrorCode = codeClusterAuthz
		r.finish(resp)
		return
	}
	wanted, names := logDirsWanted(req.Topics)
	// statfs of a shared volume is a call to its server: off the
	// connection's read loop.
	c.async(r, func() {
		resp.Dirs = []kmsg.DescribeLogDirsResponseDir{logDirAnswer(c.s.eng.DataLogDir(names), wanted)}
		r.finish(resp)
	})
}

// logDirsWanted is the set of partitions a request names, with their
// topics' names; nil and nil for null Topics (every partition).
func logDirsWanted(topics []kmsg.DescribeLogDirsRequestTopic) (map[string]map[int32]bool, []string) {
	if topics == nil {
		return nil, nil
	}
	wanted := make(map[string]map[int32]bool, len(topics))
	names := make([]string, 0, len(topics))
	for _, t := range topics {
		ps := wanted[t.Topic]
		if ps == nil {
			ps = make(map[int32]bool, len(t.Partitions))
			wanted[t.Topic] = ps
			names = append(names, t.Topic)
		}
		for _, p := range t.Partitions {
			ps[p] = true
		}
	}
	return wanted, names
}

// logDirAnswer is d as a response dir, with only the wanted partitions
// (all when wanted is nil). d's partitions come sorted by topic.
func logDirAnswer(d engine.LogDir, wanted map[string]map[int32]bool) kmsg.DescribeLogDirsResponseDir {
	rd := kmsg.NewDescribeLogDirsResponseDir()
	rd.Dir, rd.TotalBytes, rd.UsableBytes = d.Path, d.Space.Total, d.Space.Usable
	for _, ls := range d.Partitions {
		if wanted != nil && !wanted[ls.Topic][ls.Partition] {
			continue
		}
		if n := len(rd.Topics); n == 0 || rd.Topics[n-1].Topic != ls.Topic {
			rt := kmsg.NewDescribeLogDirsResponseDirTopic()
			rt.Topic = ls.Topic
			rd.Topics = append(rd.Topics, rt)
		}
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition, rp.Size = ls.Partition, ls.Bytes
		rt := &rd.Topics[len(rd.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rd
}
