package wire

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readAll reads topic from the start until it has want records, then a
// little longer to catch any extra, and returns the values.
func readAll(t *testing.T, b *testBroker, topic string, level kgo.IsolationLevel, want int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := b.client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []string
	poll := func(ctx context.Context) {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				t.Fatalf("fetch %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	for len(out) < want {
		poll(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records, want %d", len(out), want)
		}
	}
	extra, cancelExtra := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelExtra()
	for extra.Err() == nil {
		poll(extra)
	}
	return out
}

// TestTransactionsCommitAndAbort: a franz-go transactional producer
// commits one transaction and aborts another; read_committed sees only the
// committed records, read_uncommitted both; the last stable offset stops at
// an open transaction.
func TestTransactionsCommitAndAbort(t *testing.T) {
	b := startGroupBroker(t)
	b.createTopic(t, "tx", 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod := b.client(t, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("tx"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.TransactionTimeout(20*time.Second))
	run := func(from, to int, commit kgo.TransactionEndTry) {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(ctx, kgo.StringRecord(strconv.Itoa(i))).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
		if err := prod.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end transaction: %v", err)
		}
	}
	run(0, 30, kgo.TryCommit)
	run(30, 60, kgo.TryAbort)
	run(60, 90, kgo.TryCommit)

	got := readAll(t, b, "tx", kgo.ReadCommitted(), 60)
	seen := map[string]bool{}
	for _, v := range got {
		n, _ := strconv.Atoi(v)
		if n >= 30 && n < 60 {
			t.Errorf("read_committed read aborted record %s", v)
		}
		if seen[v] {
			t.Errorf("record %s read twice", v)
		}
		seen[v] = true
	}
	if len(seen) != 60 {
		t.Errorf("read_committed read %d distinct records, want 60", len(seen))
	}
	if all := readAll(t, b, "tx", kgo.ReadUncommitted(), 90); len(all) != 90 {
		t.Errorf("read_uncommitted read %d records, want 90", len(all))
	}

	// An open transaction holds the last stable offset back.
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Value: []byte("open"), Partition: 0}
	if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(b.client(t))
	ends, err := adm.ListEndOffsets(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := ends.Lookup("tx", r.Partition)
	s, _ := stable.Lookup("tx", r.Partition)
	if s.Offset != r.Offset || e.Offset != r.Offset+1 {
		t.Errorf("open transaction at %d: last stable offset %d, end %d", r.Offset, s.Offset, e.Offset)
	}
	descr, err := adm.DescribeTransactions(ctx, "tx-1")
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := descr["tx-1"]; !ok || d.State != "Ongoing" {
		t.Errorf("describe: %+v", descr)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		stable, err = adm.ListCommittedOffsets(ctx, "tx")
		if err != nil {
			t.Fatal(err)
		}
		if s, _ := stable.Lookup("tx", r.Partition); s.Offset > r.Offset {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("last stable offset stayed at %d after the commit", s.Offset)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTransactionalOffsetCommit: offsets committed in a transaction are
// invisible until it commits, and dropped when it aborts.
func TestTransactionalOffsetCommit(t *testing.T) {
	b := startGroupBroker(t)
	b.createTopic(t, "in", 1, nil)
	c := b.dial(t)
	initReq := kmsg.NewPtrInitProducerIDRequest()
	id := "tx-offsets"
	initReq.TransactionalID, initReq.TransactionTimeoutMillis = &id, 30000
	var pid int64
	var epoch int16
	for i := 0; ; i++ {
		resp := c.do(initReq).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode == 0 {
			pid, epoch = resp.ProducerID, resp.ProducerEpoch
			break
		}
		if i > 100 {
			t.Fatalf("init producer id: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		time.Sleep(50 * time.Millisecond)
	}
	fetch := func() int64 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = 7, "g"
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "in", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp := c.do(req).(*kmsg.OffsetFetchResponse)
		return resp.Topics[0].Partitions[0].Offset
	}
	commitIn := func(offset int64, commit bool) {
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, pid, epoch, "g"
		for i := 0; ; i++ {
			r := c.do(add).(*kmsg.AddOffsetsToTxnResponse)
			if r.ErrorCode == 0 {
				break
			}
			// The previous transaction's end may still be completing.
			if r.ErrorCode != kerr.ConcurrentTransactions.Code || i > 200 {
				t.Fatalf("add offsets: %v", kerr.ErrorForCode(r.ErrorCode))
			}
			time.Sleep(10 * time.Millisecond)
		}
		tc := kmsg.NewPtrTxnOffsetCommitRequest()
		tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = id, "g", pid, epoch
		tc.Generation = -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "in"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = append(rt.Partitions, rp)
		tc.Topics = append(tc.Topics, rt)
		if r := c.do(tc).(*kmsg.TxnOffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("txn offset commit: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
		}
		if got := fetch(); got == offset {
			t.Fatalf("offset %d visible before the transaction ended", offset)
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, commit
		if r := c.do(end).(*kmsg.EndTxnResponse); r.ErrorCode != 0 {
			t.Fatalf("end txn: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	waitOffset := func(want int64) {
		deadline := time.Now().Add(10 * time.Second)
		for got := fetch(); got != want; got = fetch() {
			if time.Now().After(deadline) {
				t.Fatalf("committed offset %d, want %d", got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	commitIn(5, true)
	waitOffset(5)
	commitIn(9, false)
	// The abort completes in the background; the next transaction waits
	// for it (CONCURRENT_TRANSACTIONS), and the offset never shows 9.
	for i := 0; i < 20; i++ {
		if got := fetch(); got != 5 {
			t.Fatalf("aborted offset visible: %d", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// txnSeeds are transaction requests for the fuzzer's corpus, each answered
// at once.
func txnSeeds() []kmsg.Request {
	id := "fuzz-txn"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version, init.TransactionalID, init.TransactionTimeoutMillis = 5, &id, 1000
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version, add.TransactionalID, add.ProducerID = 3, id, 7
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "fuzz-topic", []int32{0, 5}
	add.Topics = append(add.Topics, at)
	verify := kmsg.NewPtrAddPartitionsToTxnRequest()
	verify.Version = 5
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.VerifyOnly = id, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = "fuzz-topic", []int32{0}
	tx.Topics = append(tx.Topics, tt)
	verify.Transactions = append(verify.Transactions, tx)
	offs := kmsg.NewPtrAddOffsetsToTxnRequest()
	offs.Version, offs.TransactionalID, offs.Group = 4, id, "g"
	end := kmsg.NewPtrEndTxnRequest()
	end.Version, end.TransactionalID, end.Commit = 4, id, true
	markers := kmsg.NewPtrWriteTxnMarkersRequest()
	markers.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "fuzz-topic", []int32{0, 9}
	m.Topics = append(m.Topics, mt)
	ot := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	ot.Topic, ot.Partitions = "__consumer_offsets", []int32{3, 99}
	m.Topics = append(m.Topics, ot)
	markers.Markers = append(markers.Markers, m)
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.Version, toc.TransactionalID, toc.Group, toc.Generation = 5, id, "g", -1
	tct := kmsg.NewTxnOffsetCommitRequestTopic()
	tct.Topic = "fuzz-topic"
	tct.Partitions = append(tct.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
	toc.Topics = append(toc.Topics, tct)
	dp := kmsg.NewPtrDescribeProducersRequest()
	dpt := kmsg.NewDescribeProducersRequestTopic()
	dpt.Topic, dpt.Partitions = "fuzz-topic", []int32{0, -1}
	dp.Topics = append(dp.Topics, dpt)
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{id, ""}
	lt := kmsg.NewPtrListTransactionsRequest()
	lt.Version, lt.StateFilters, lt.DurationFilterMillis = 1, []string{"Ongoing", "Bogus"}, 10
	return []kmsg.Request{init, add, verify, offs, end, markers, toc, dp, dt, lt}
}

// TestReadCommittedFetchWakesOnCommit: a read_committed long poll waiting
// behind an open transaction is answered when the commit's marker moves
// the last stable offset, not at the end of its wait (a minute here, past
// the connection's read deadline), and its answer stops at the last stable
// offset before that.
func TestReadCommittedFetchWakesOnCommit(t *testing.T) {
	b := startGroupBroker(t)
	b.createTopic(t, "lso", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod := b.client(t, kgo.TransactionalID("lso-1"), kgo.DefaultProduceTopic("lso"))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, kgo.StringRecord("pending")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c := b.dial(t)
	// Nothing is stable yet: an immediate read_committed fetch is empty,
	// with the last stable offset at the open transaction.
	now := fetchReq(12, "lso", 0, -1, 0, 0)
	now.IsolationLevel = 1
	p := c.fetch(now)
	if len(p.RecordBatches) != 0 || p.LastStableOffset != 0 || p.HighWatermark != 1 {
		t.Fatalf("open transaction: %d bytes, last stable %d, high watermark %d", len(p.RecordBatches), p.LastStableOffset, p.HighWatermark)
	}
	wait := fetchReq(12, "lso", 0, -1, 60_000, 1)
	wait.IsolationLevel = 1
	corr := c.send(wait)
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	resp := c.read(wait, corr).(*kmsg.FetchResponse)
	got := resp.Topics[0].Partitions[0]
	if got.LastStableOffset != 2 || len(got.RecordBatches) == 0 || got.AbortedTransactions == nil {
		t.Fatalf("after the commit: last stable %d, %d bytes, aborted %v", got.LastStableOffset, len(got.RecordBatches), got.AbortedTransactions)
	}
}
