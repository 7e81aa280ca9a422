package wire

// What FuzzDispatch checks beyond "no panic": whatever a fuzzed Produce got
// acknowledged must read back and decode with franz-go; and the seeds that
// make the fuzzer reach every request decoder.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/volume/records/recordstest"
)

// tableSeeds is one request per API key of the dispatch table at its
// lowest and at its highest version, with default fields, so every decoder
// starts with a valid input to mutate.
func tableSeeds() []kmsg.Request {
	keys := make([]int, 0, len(handlers))
	for k := range handlers {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	var out []kmsg.Request
	for _, k := range keys {
		h := handlers[kmsg.Key(k)]
		for _, v := range []int16{h.min, h.max} {
			req := kmsg.RequestForKey(int16(k))
			req.SetVersion(v)
			out = append(out, req)
		}
	}
	return out
}

// produceSeedBatches are batches near the edge of validity: compressed,
// idempotent, and broken in one way each, for the fuzzer to mutate.
func produceSeedBatches() [][]byte {
	good := makeBatch(batchOpts{values: []string{"a", "bb", "ccc"}})
	records := good[61:]
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write(records)
	_ = zw.Close()
	withRecords := func(attrs int16, recs []byte) []byte {
		b := append(append([]byte{}, good[:61]...), recs...)
		binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
		binary.BigEndian.PutUint16(b[21:], uint16(attrs))
		fixCRC(b)
		return b
	}
	badVarint := withRecords(0, bytes.Repeat([]byte{0xff}, 11))
	outOfOrder := append([]byte{}, good...)
	outOfOrder[61+3] = 4 // the first record's offset delta (varint 2), CRC fixed below
	fixCRC(outOfOrder)
	return [][]byte{
		withRecords(1, zipped.Bytes()),
		withRecords(1, zipped.Bytes()[:zipped.Len()/2]),
		withRecords(4, records),
		withRecords(5, records),
		badVarint,
		outOfOrder,
		append(append([]byte{}, good...), good...), // two batches in one produce
		makeBatch(batchOpts{pid: 7, epoch: 1, seq: 0, values: []string{"x"}}),
	}
}

// checkStored reads c's answer to the fuzzed produce req (correlation ID
// corr) and, for each partition it acknowledged, fetches the partition
// back from the acknowledged base offset and strictly decodes what is
// stored there.
func (b *testBroker) checkStored(t *testing.T, c *rawConn, corr int32, req *kmsg.ProduceRequest, frame []byte) {
	t.Helper()
	if req.Acks == 0 {
		return // no answer comes; nothing is acknowledged
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Logf("no produce answer within 3s")
		}
		return // closed: the broker refused the frame
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if len(buf) < 4 {
		t.Fatalf("produce response frame of %d bytes for frame % x", len(buf), frame)
	}
	if _, err := io.ReadFull(c.nc, buf); err != nil {
		return
	}
	if got := int32(binary.BigEndian.Uint32(buf)); got != corr {
		t.Fatalf("produce answered correlation ID %d, want %d (frame % x)", got, corr, frame)
	}
	body := buf[4:]
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.SetVersion(req.Version)
	if resp.IsFlexible() {
		if len(body) == 0 || body[0] != 0 {
			t.Fatalf("flexible produce response header % x (frame % x)", body[:min(len(body), 4)], frame)
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode produce v%d response: %v (frame % x)", req.Version, err, frame)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				continue
			}
			if problems := b.readBackDecodes(t, rt.Topic, rp.Partition, rp.BaseOffset); len(problems) > 0 {
				t.Fatalf("produce to %s/%d acknowledged at %d stored what franz-go cannot decode: %v\nframe: % x",
					rt.Topic, rp.Partition, rp.BaseOffset, problems, frame)
			}
		}
	}
}

// readBackDecodes fetches topic/partition from offset up to its high
// watermark and returns what does not decode.
func (b *testBroker) readBackDecodes(t *testing.T, topic string, partition int32, offset int64) []string {
	t.Helper()
	c := b.dial(t)
	defer c.nc.Close()
	var problems []string
	for range 64 {
		req := fetchReq(11, topic, offset, -1, 0, 0)
		req.Topics[0].Partitions[0].Partition = partition
		req.Topics[0].Partitions[0].PartitionMaxBytes = 4 << 20
		req.MaxBytes = 4 << 20
		resp := c.do(req).(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return append(problems, fmt.Sprintf("fetch response shape: %d topics", len(resp.Topics)))
		}
		rp := &resp.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 {
			return append(problems, fmt.Sprintf("fetch at %d: error code %d", offset, rp.ErrorCode))
		}
		next, ps := recordstest.StrictDecode(topic, rp, 0, 16<<20)
		problems = append(problems, ps...)
		if next >= rp.HighWatermark || next <= offset || len(problems) > 0 {
			return problems
		}
		offset = next
	}
	return problems
}
