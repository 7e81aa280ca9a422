package wire

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/acl"
	"github.com/kaas-dev/kaas/states"
)

func describeLogDirsReq(version int16, topics map[string][]int32) *kmsg.DescribeLogDirsRequest {
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.SetVersion(version)
	if topics != nil {
		req.Topics = []kmsg.DescribeLogDirsRequestTopic{}
	}
	for name, ps := range topics {
		rt := kmsg.NewDescribeLogDirsRequestTopic()
		rt.Topic, rt.Partitions = name, ps
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// logDirSizes flattens a dir's answer to "topic/partition" → size, and
// checks the fields kaas always answers the same way.
func logDirSizes(t *testing.T, d kmsg.DescribeLogDirsResponseDir) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, rt := range d.Topics {
		if len(rt.Partitions) == 0 {
			t.Errorf("topic %s answered with no partitions", rt.Topic)
		}
		for _, rp := range rt.Partitions {
			if rp.OffsetLag != 0 || rp.IsFuture {
				t.Errorf("%s/%d: OffsetLag %d IsFuture %v, want 0 and false", rt.Topic, rp.Partition, rp.OffsetLag, rp.IsFuture)
			}
			out[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.Size
		}
	}
	return out
}

// segmentBytes sums the segment files of a partition's directory on disk.
func segmentBytes(t *testing.T, dataDir, topic string, index int32) int64 {
	t.Helper()
	dir := states.PartitionDir(dataDir, topic, index)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
	}
	return n
}

// TestDescribeLogDirs: one dir, the data directory, with every served
// partition's size (the bytes of the batches appended to it), filtered by
// the topics a request names, at the lowest and the highest version.
func TestDescribeLogDirs(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "ld", 2, nil)
	b.createTopic(t, "ld-other", 1, nil)
	c := b.dial(t)
	const records = 10
	batch := makeBatch(batchOpts{values: []string{"one", "two", "three"}, padding: 100})
	for range records {
		if resp := c.do(produceReq(9, -1, "ld", 0, batch)).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("produce: %+v", resp.Topics[0].Partitions[0])
		}
	}
	if resp := c.do(produceReq(9, -1, "ld", 1, batch)).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce: %+v", resp.Topics[0].Partitions[0])
	}
	want0, want1 := int64(records*len(batch)), int64(len(batch))
	if got := segmentBytes(t, b.dir, "ld", 0); got != want0 {
		t.Fatalf("segment files of ld/0 hold %d bytes, want %d", got, want0)
	}
	t.Logf("ld/0: %d batches of %d bytes (3 records each) = %d bytes", records, len(batch), want0)
	abs, err := filepath.Abs(b.dir)
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(b.dir, &st); err != nil {
		t.Fatal(err)
	}
	wantTotal := int64(st.Blocks) * int64(st.Bsize)
	if runtime.GOOS != "linux" {
		wantTotal = -1 // kaas reads a volume's size on Linux only
	}
	all := map[string]int64{"ld/0": want0, "ld/1": want1, "ld-other/0": 0}

	for _, tc := range []struct {
		name    string
		version int16
		topics  map[string][]int32
		want    map[string]int64
	}{
		{"v0 all", 0, nil, all},
		{"v4 all", 4, nil, all},
		{"one partition", 4, map[string][]int32{"ld": {1}}, map[string]int64{"ld/1": want1}},
		{"a topic's partitions, one unknown", 2, map[string][]int32{"ld": {0, 1, 7}}, map[string]int64{"ld/0": want0, "ld/1": want1}},
		{"unknown topic", 4, map[string][]int32{"nope": {0}, "ld-other": {0}}, map[string]int64{"ld-other/0": 0}},
		{"a topic with no partitions named", 3, map[string][]int32{"ld": {}}, map[string]int64{}},
		{"empty topics", 4, map[string][]int32{}, map[string]int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := c.do(describeLogDirsReq(tc.version, tc.topics)).(*kmsg.DescribeLogDirsResponse)
			if resp.ErrorCode != 0 || len(resp.Dirs) != 1 {
				t.Fatalf("error %d, %d dirs; want one", resp.ErrorCode, len(resp.Dirs))
			}
			d := resp.Dirs[0]
			if d.ErrorCode != 0 || d.Dir != abs {
				t.Fatalf("dir %q error %d, want %q and none", d.Dir, d.ErrorCode, abs)
			}
			got := logDirSizes(t, d)
			if len(got) != len(tc.want) {
				t.Fatalf("partitions %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("partitions %v, want %v", got, tc.want)
				}
			}
			switch {
			case tc.version < 4 && (d.TotalBytes != -1 || d.UsableBytes != -1):
				t.Fatalf("v%d: TotalBytes %d UsableBytes %d, want -1 (not in the version)", tc.version, d.TotalBytes, d.UsableBytes)
			case tc.version >= 4 && wantTotal > 0 && (d.TotalBytes != wantTotal || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes):
				t.Fatalf("TotalBytes %d UsableBytes %d, want statfs's %d and a usable part of it", d.TotalBytes, d.UsableBytes, wantTotal)
			case tc.version >= 4 && wantTotal < 0 && (d.TotalBytes != -1 || d.UsableBytes != -1):
				t.Fatalf("TotalBytes %d UsableBytes %d, want -1 where the size cannot be read", d.TotalBytes, d.UsableBytes)
			}
		})
	}
}

// TestDescribeLogDirsAuthorization: DESCRIBE on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED from v3 and no dirs at any version, as
// Kafka.
func TestDescribeLogDirsAuthorization(t *testing.T) {
	b := startAuthzBroker(t, nil)
	admin := b.as(t, "admin")
	if resp := admin.do(createTopicsReq(7, false, "ld-authz", 1, nil)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %d", resp.Topics[0].ErrorCode)
	}
	// DESCRIBE on a topic does not do: the right is the cluster's.
	b.allow(t, "User:alice", kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "ld-authz", kmsg.ACLOperationDescribe)
	b.allow(t, "User:bob", kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral, acl.ClusterName, kmsg.ACLOperationDescribe)
	for _, tc := range []struct {
		user    string
		version int16
		allowed bool
	}{
		{"alice", 4, false}, {"alice", 3, false}, {"alice", 1, false}, {"alice", 0, false},
		{"bob", 4, true}, {"bob", 0, true}, {"admin", 3, true},
	} {
		resp := b.as(t, tc.user).do(describeLogDirsReq(tc.version, nil)).(*kmsg.DescribeLogDirsResponse)
		wantCode := int16(0)
		if !tc.allowed && tc.version >= 3 {
			wantCode = kerr.ClusterAuthorizationFailed.Code
		}
		if resp.ErrorCode != wantCode {
			t.Errorf("%s v%d: error %d, want %d", tc.user, tc.version, resp.ErrorCode, wantCode)
		}
		switch {
		case !tc.allowed && len(resp.Dirs) != 0:
			t.Errorf("%s v%d: denied, yet %d dirs", tc.user, tc.version, len(resp.Dirs))
		case tc.allowed && (len(resp.Dirs) != 1 || len(resp.Dirs[0].Topics) != 1 || resp.Dirs[0].Topics[0].Topic != "ld-authz"):
			t.Errorf("%s v%d: %+v, want the dir with ld-authz", tc.user, tc.version, resp.Dirs)
		}
	}
}
