package wire

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeLogDirsRealClients: franz-go's kadm and sarama's
// ClusterAdmin read each partition's size from the broker's one log dir.
func TestDescribeLogDirsRealClients(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "ldc", 2, nil)
	c := b.dial(t)
	const records = 25
	batch := makeBatch(batchOpts{values: []string{"a", "b"}, padding: 50})
	for range records {
		if resp := c.do(produceReq(9, -1, "ldc", 1, batch)).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("produce: %+v", resp.Topics[0].Partitions[0])
		}
	}
	want := int64(records * len(batch))
	t.Logf("ldc/1: %d batches of %d bytes = %d bytes", records, len(batch), want)
	dir, err := filepath.Abs(b.dir)
	if err != nil {
		t.Fatal(err)
	}
	id := b.eng.BrokerID()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	adm := kadm.NewClient(b.client(t))

	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatalf("DescribeAllLogDirs: %v", err)
	}
	d, ok := all[id][dir]
	if len(all) != 1 || len(all[id]) != 1 || !ok || d.Err != nil {
		t.Fatalf("DescribeAllLogDirs: %+v, want broker %d's one dir %s", all, id, dir)
	}
	if p, ok := d.Topics.Lookup("ldc", 1); !ok || p.Size != want {
		t.Fatalf("ldc/1: %+v, want %d bytes", p, want)
	}
	if p, ok := d.Topics.Lookup("ldc", 0); !ok || p.Size != 0 {
		t.Fatalf("ldc/0: %+v, want 0 bytes", p)
	}
	if d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.Size() != want {
		t.Fatalf("dir: total %d usable %d size %d", d.TotalBytes, d.UsableBytes, d.Size())
	}
	t.Logf("kadm: dir %s, total %d, usable %d, size %d", d.Dir, d.TotalBytes, d.UsableBytes, d.Size())

	var one kadm.TopicsSet
	one.Add("ldc", 1)
	one.Add("absent", 0)
	dirs, err := adm.DescribeBrokerLogDirs(ctx, id, one)
	if err != nil {
		t.Fatalf("DescribeBrokerLogDirs: %v", err)
	}
	if ps := dirs.SortedPartitions(); len(ps) != 1 || ps[0].Topic != "ldc" || ps[0].Partition != 1 || ps[0].Size != want {
		t.Fatalf("DescribeBrokerLogDirs(ldc/1, absent/0): %+v", ps)
	}

	// sarama asks v4 from a 3.3 cluster, v1 from its default version.
	for _, v := range []sarama.KafkaVersion{sarama.V3_3_0_0, sarama.V2_1_0_0} {
		cfg := sarama.NewConfig()
		cfg.Version = v
		ca, err := sarama.NewClusterAdmin([]string{b.addr}, cfg)
		if err != nil {
			t.Fatalf("sarama %s: %v", v, err)
		}
		got, err := ca.DescribeLogDirs([]int32{id})
		_ = ca.Close()
		if err != nil || len(got[id]) != 1 {
			t.Fatalf("sarama %s DescribeLogDirs: %v %+v", v, err, got)
		}
		sd := got[id][0]
		sizes := map[int32]int64{}
		for _, st := range sd.Topics {
			if st.Topic == "ldc" {
				for _, sp := range st.Partitions {
					sizes[sp.PartitionID] = sp.Size
				}
			}
		}
		if sd.Path != dir || sd.ErrorCode != sarama.ErrNoError || len(sizes) != 2 || sizes[1] != want || sizes[0] != 0 {
			t.Fatalf("sarama %s: %+v, sizes %v", v, sd, sizes)
		}
		if (v == sarama.V3_3_0_0) != (sd.TotalBytes > 0) {
			t.Fatalf("sarama %s: TotalBytes %d", v, sd.TotalBytes)
		}
		t.Logf("sarama %s: dir %s, total %d, ldc/1 %d bytes", v, sd.Path, sd.TotalBytes, sizes[1])
	}
}
