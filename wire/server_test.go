package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawHeader builds a v1 request header (key, version, correlation ID,
// client ID) followed by body, framed with its size.
func rawFrame(key, version int16, corr int32, body []byte) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 1)
	b = append(b, 'x')
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func sizePrefix(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// TestBadInput sends what a broken or hostile client might and checks the
// connection is closed (as Kafka does) while the broker keeps serving
// everyone else.
func TestBadInput(t *testing.T) {
	b := startBroker(t, func(c *Config) { c.FrameTimeout = 200 * time.Millisecond })

	tests := []struct {
		name string
		run  func(t *testing.T, c *rawConn)
	}{
		{"frame larger than MaxFrameBytes", func(t *testing.T, c *rawConn) {
			c.write(sizePrefix(1<<20 + 1)) // the body is never sent: the size alone closes it
			c.expectClosed()
		}},
		{"negative frame size", func(t *testing.T, c *rawConn) {
			c.write(sizePrefix(0xffffffff))
			c.expectClosed()
		}},
		{"frame smaller than a header", func(t *testing.T, c *rawConn) {
			c.write(append(sizePrefix(4), 0, 18, 0, 0))
			c.expectClosed()
		}},
		{"truncated frame then close", func(t *testing.T, c *rawConn) {
			f := rawFrame(int16(kmsg.ApiVersions), 0, 1, nil)
			c.write(f[:len(f)-3])
			if err := c.nc.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			c.expectClosed()
		}},
		{"slow partial frame hits FrameTimeout", func(t *testing.T, c *rawConn) {
			// Size says 100, 10 bytes arrive, then nothing: the server must
			// give up after FrameTimeout (200ms) rather than IdleTimeout.
			c.write(append(sizePrefix(100), make([]byte, 10)...))
			c.expectClosed()
		}},
		{"unknown api key", func(t *testing.T, c *rawConn) {
			c.write(rawFrame(999, 0, 1, nil))
			c.expectClosed()
		}},
		{"known key not served", func(t *testing.T, c *rawConn) {
			c.write(rawFrame(int16(kmsg.OffsetCommit), 2, 1, nil))
			c.expectClosed()
		}},
		{"produce below the supported versions", func(t *testing.T, c *rawConn) {
			req := produceReq(2, -1, "t", 0, makeBatch(batchOpts{}))
			c.send(req)
			c.expectClosed()
		}},
		{"produce above the supported versions", func(t *testing.T, c *rawConn) {
			req := produceReq(10, -1, "t", 0, makeBatch(batchOpts{}))
			c.send(req)
			c.expectClosed()
		}},
		{"garbage after a valid header", func(t *testing.T, c *rawConn) {
			// CreateTopics v2: a topic array of 2^31-1 entries in 8 bytes.
			c.write(rawFrame(int16(kmsg.CreateTopics), 2, 1, []byte{0x7f, 0xff, 0xff, 0xff, 1, 2, 3, 4}))
			c.expectClosed()
		}},
		{"truncated flexible header tags", func(t *testing.T, c *rawConn) {
			// Metadata v12 is flexible: the header's tag count is a uvarint
			// that never ends.
			c.write(rawFrame(int16(kmsg.Metadata), 12, 1, []byte{0xff, 0xff}))
			c.expectClosed()
		}},
		{"client id longer than the frame", func(t *testing.T, c *rawConn) {
			f := rawFrame(int16(kmsg.ApiVersions), 0, 1, nil)
			binary.BigEndian.PutUint16(f[12:], 500)
			c.write(f)
			c.expectClosed()
		}},
		{"valid request then garbage: the valid one is answered first", func(t *testing.T, c *rawConn) {
			req := kmsg.NewPtrApiVersionsRequest()
			f, corr := c.frame(nil, req)
			f = append(f, rawFrame(999, 0, corr+1, nil)...)
			c.write(f)
			c.read(req, corr)
			c.expectClosed()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := b.dial(t)
			tc.run(t, c)
			b.checkServing(t)
		})
	}
}

// TestApiVersionsUnknownVersion: a probe at a version kaas does not know is
// answered at v0 with UNSUPPORTED_VERSION and the key table (KIP-511), and
// the connection stays usable.
func TestApiVersionsUnknownVersion(t *testing.T) {
	b := startBroker(t, nil)
	c := b.dial(t)
	// A v99 request: kaas cannot know its body, and must not try to parse it.
	c.write(rawFrame(int16(kmsg.ApiVersions), 99, 7, []byte{0xde, 0xad, 0xbe, 0xef}))
	corr, body, err := c.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	if corr != 7 {
		t.Fatalf("correlation ID %d", corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("v0 decode: %v", err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error %d, want %d", resp.ErrorCode, kerr.UnsupportedVersion.Code)
	}
	if !slices.Equal(apiKeyTriples(resp.ApiKeys), apiKeyTriples(apiKeys())) {
		t.Fatalf("key table %v, want %v", apiKeyTriples(resp.ApiKeys), apiKeyTriples(apiKeys()))
	}
	// The client downgrades on the same connection.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	if r := c.do(req).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("v3 after downgrade: %d", r.ErrorCode)
	}
}

// TestApiVersionsV3HeaderNotFlexible: the ApiVersions response header is v0
// whatever the request version (KIP-511): size, correlation ID, then the
// body's int16 error code at once, no tag buffer.
func TestApiVersionsV3HeaderNotFlexible(t *testing.T) {
	b := startBroker(t, nil)
	c := b.dial(t)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "wire-test", "1.0"
	corr := c.send(req)
	_ = c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	var raw [4]byte
	if _, err := c.nc.Read(raw[:]); err != nil {
		t.Fatal(err)
	}
	size := binary.BigEndian.Uint32(raw[:])
	rest := make([]byte, size)
	if _, err := readFull(c, rest); err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(rest)); got != corr {
		t.Fatalf("correlation ID %d, want %d", got, corr)
	}
	body := rest[4:]
	// Error code 0, then the v3 (compact) array length N+1. A flexible
	// header would put a 0 tag byte first and shift everything by one.
	if code := int16(binary.BigEndian.Uint16(body)); code != 0 {
		t.Fatalf("error code %d", code)
	}
	if int(body[2]) != len(handlers)+1 {
		t.Fatalf("byte after the error code is %d, want the compact array length %d (header must not be flexible)", body[2], len(handlers)+1)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode body right after the correlation ID: %v", err)
	}
	if !slices.Equal(apiKeyTriples(resp.ApiKeys), apiKeyTriples(apiKeys())) {
		t.Fatalf("key table %v", apiKeyTriples(resp.ApiKeys))
	}
}

func readFull(c *rawConn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.nc.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func apiKeyTriples(keys []kmsg.ApiVersionsResponseApiKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%d:%d-%d", k.ApiKey, k.MinVersion, k.MaxVersion)
	}
	return out
}

// TestDispatchTableDocumented: what ApiVersions advertises is the dispatch
// table, and every key in it has its NN_*.go file whose header documents
// the served versions and a Behavior section.
func TestDispatchTableDocumented(t *testing.T) {
	b := startBroker(t, nil)
	c := b.dial(t)
	resp := c.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	var want []string
	for k, h := range handlers {
		want = append(want, fmt.Sprintf("%d:%d-%d", k, h.min, h.max))
	}
	got := apiKeyTriples(resp.ApiKeys)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("advertised %v, dispatch table %v", got, want)
	}
	for _, k := range resp.ApiKeys {
		if kmsg.RequestForKey(k.ApiKey) == nil {
			t.Errorf("key %d is not a Kafka API key kmsg knows", k.ApiKey)
		}
		matches, err := filepath.Glob(fmt.Sprintf("%02d_*.go", k.ApiKey))
		if err != nil {
			t.Fatal(err)
		}
		var src []string
		for _, m := range matches {
			if !strings.HasSuffix(m, "_test.go") {
				src = append(src, m)
			}
		}
		if len(src) != 1 {
			t.Errorf("key %d (%s): want exactly one %02d_*.go file, found %v", k.ApiKey, kmsg.NameForKey(k.ApiKey), k.ApiKey, src)
			continue
		}
		data, err := os.ReadFile(src[0])
		if err != nil {
			t.Fatal(err)
		}
		header, _, _ := strings.Cut(string(data), "\nimport")
		if !strings.Contains(header, "Behavior") {
			t.Errorf("%s: header has no Behavior section", src[0])
		}
		if v := fmt.Sprintf("versions %d-%d", k.MinVersion, k.MaxVersion); !strings.Contains(header, v) {
			t.Errorf("%s: header does not say %q (the dispatch table does)", src[0], v)
		}
	}
	// No stray handler files for keys that are not served.
	files, _ := filepath.Glob("[0-9][0-9]_*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		var key int
		if _, err := fmt.Sscanf(f, "%02d_", &key); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if _, ok := handlers[kmsg.Key(key)]; !ok {
			t.Errorf("%s exists but key %d is not in the dispatch table", f, key)
		}
	}
}

// TestProduceInvalidBatches: each bad batch gets the error Kafka gives,
// with a message (v8+), and nothing is appended.
func TestProduceInvalidBatches(t *testing.T) {
	b := startGroupBroker(t) // coordinators served: a transactional batch is verified
	b.createTopic(t, "small", 1, map[string]string{"max.message.bytes": "1024"})
	c := b.dial(t)

	tests := []struct {
		name    string
		records func() []byte
		txnID   bool
		code    int16
	}{
		{"bad crc", func() []byte {
			r := makeBatch(batchOpts{values: []string{"a", "b"}})
			r[len(r)-3] ^= 0xff
			return r
		}, false, kerr.CorruptMessage.Code},
		{"crc field wrong", func() []byte {
			r := makeBatch(batchOpts{})
			r[17] ^= 1
			return r
		}, false, kerr.CorruptMessage.Code},
		{"wrong magic", func() []byte {
			r := makeBatch(batchOpts{})
			r[16] = 1
			return r
		}, false, kerr.InvalidRecord.Code},
		{"batch length larger than sent", func() []byte {
			r := makeBatch(batchOpts{})
			binary.BigEndian.PutUint32(r[8:], uint32(len(r)))
			return r
		}, false, kerr.CorruptMessage.Code},
		{"batch length shorter than sent", func() []byte {
			r := makeBatch(batchOpts{values: []string{"a", "b", "c"}})
			binary.BigEndian.PutUint32(r[8:], uint32(len(r)-12-5))
			return r
		}, false, kerr.CorruptMessage.Code},
		{"negative batch length", func() []byte {
			r := makeBatch(batchOpts{})
			binary.BigEndian.PutUint32(r[8:], 0xfffffff0)
			return r
		}, false, kerr.CorruptMessage.Code},
		{"trailing bytes after a batch", func() []byte {
			return append(makeBatch(batchOpts{}), 0, 0, 0)
		}, false, kerr.CorruptMessage.Code},
		{"record count disagrees with last offset delta", func() []byte {
			r := makeBatch(batchOpts{values: []string{"a", "b"}})
			binary.BigEndian.PutUint32(r[57:], 5)
			fixCRC(r)
			return r
		}, false, kerr.CorruptMessage.Code},
		{"good batch then a bad one: nothing appended", func() []byte {
			bad := makeBatch(batchOpts{values: []string{"z"}})
			bad[len(bad)-2] ^= 0xff
			return append(makeBatch(batchOpts{values: []string{"a", "b"}}), bad...)
		}, false, kerr.InvalidRecord.Code},
		{"two good batches (a record set holds exactly one)", func() []byte {
			return append(makeBatch(batchOpts{values: []string{"a", "b"}}), makeBatch(batchOpts{values: []string{"c"}})...)
		}, false, kerr.InvalidRecord.Code},
		{"good batch then an old-format one", func() []byte {
			old := makeBatch(batchOpts{})
			old[16] = 1
			return append(makeBatch(batchOpts{}), old...)
		}, false, kerr.InvalidRecord.Code},
		{"empty record set", func() []byte { return []byte{} }, false, kerr.InvalidRecord.Code},
		{"larger than max.message.bytes", func() []byte {
			return makeBatch(batchOpts{padding: 2000})
		}, false, kerr.MessageTooLarge.Code},
		{"transactional batch without a transactional id", func() []byte {
			return makeBatch(batchOpts{pid: 5, epoch: 0, seq: 0, attrs: 0x10})
		}, false, kerr.InvalidRecord.Code},
		{"control batch", func() []byte {
			return makeBatch(batchOpts{pid: 5, epoch: 0, seq: 0, attrs: 0x30})
		}, false, kerr.InvalidRecord.Code},
		{"control batch with a transactional id", func() []byte {
			return makeBatch(batchOpts{pid: 5, epoch: 0, seq: 0, attrs: 0x30})
		}, true, kerr.InvalidRecord.Code},
		{"transactional batch outside any transaction", func() []byte {
			return makeBatch(batchOpts{pid: 5, epoch: 0, seq: 0, attrs: 0x10})
		}, true, kerr.InvalidTxnState.Code},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, version := range []int16{7, 9} {
				req := produceReq(version, -1, "small", 0, tc.records())
				if tc.txnID {
					id := "txn"
					req.TransactionID = &id
				}
				resp := c.do(req).(*kmsg.ProduceResponse)
				p := resp.Topics[0].Partitions[0]
				if p.ErrorCode != tc.code {
					t.Fatalf("v%d: error %d (%v), want %d; message %v", version, p.ErrorCode, kerr.ErrorForCode(p.ErrorCode), tc.code, deref(p.ErrorMessage))
				}
				if version >= 8 && (p.ErrorMessage == nil || *p.ErrorMessage == "") {
					t.Fatalf("v%d: no error message", version)
				}
				if version < 8 && p.ErrorMessage != nil {
					t.Fatalf("v%d: error message %q in a version without the field", version, *p.ErrorMessage)
				}
			}
		})
	}
	// Nothing was appended, and the connection is still fine.
	part, err := b.eng.Partition("small", 0)
	if err != nil {
		t.Fatal(err)
	}
	if end := part.Log().LogEndOffset(); end != 0 {
		t.Fatalf("log end %d after only invalid batches", end)
	}
	if p := c.produce(9, "small", makeBatch(batchOpts{})); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("valid batch after invalid ones: %+v", p)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestIdempotentProduce: a retried batch is answered with its original
// offset and not appended again; a gap is OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestIdempotentProduce(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "idem", 1, nil)
	c := b.dial(t)
	init := c.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	if init.ErrorCode != 0 || init.ProducerID < 0 {
		t.Fatalf("InitProducerID: %+v", init)
	}
	pid, epoch := init.ProducerID, init.ProducerEpoch

	first := makeBatch(batchOpts{pid: pid, epoch: epoch, seq: 0, values: []string{"a", "b", "c"}})
	second := makeBatch(batchOpts{pid: pid, epoch: epoch, seq: 3, values: []string{"d", "e"}})
	expect := func(what string, records []byte, code int16, base int64) {
		t.Helper()
		p := c.produce(9, "idem", slices.Clone(records))
		if p.ErrorCode != code || (code == 0 && p.BaseOffset != base) {
			t.Fatalf("%s: code %d base %d (%v), want code %d base %d", what, p.ErrorCode, p.BaseOffset, deref(p.ErrorMessage), code, base)
		}
	}
	expect("first", first, 0, 0)
	expect("second", second, 0, 3)
	expect("retry of first", first, 0, 0)
	expect("retry of second", second, 0, 3)
	gap := makeBatch(batchOpts{pid: pid, epoch: epoch, seq: 10})
	expect("sequence gap", gap, kerr.OutOfOrderSequenceNumber.Code, 0)
	old := makeBatch(batchOpts{pid: pid, epoch: epoch - 1, seq: 5})
	if epoch > 0 {
		expect("older epoch", old, kerr.InvalidProducerEpoch.Code, 0)
	}
	expect("next in sequence", makeBatch(batchOpts{pid: pid, epoch: epoch, seq: 5}), 0, 5)

	part, _ := b.eng.Partition("idem", 0)
	if end := part.Log().LogEndOffset(); end != 6 {
		t.Fatalf("log end %d, want 6: duplicates must not be appended", end)
	}
	f := c.fetch(fetchReq(12, "idem", 0, -1, 0, 0))
	bases, counts := batchBases(t, f.RecordBatches)
	if !slices.Equal(bases, []int64{0, 3, 5}) || !slices.Equal(counts, []int32{3, 2, 1}) {
		t.Fatalf("stored batches %v %v", bases, counts)
	}
}

// TestFetchErrors: out of range offsets and KIP-320 leader epoch checks.
func TestFetchErrors(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "f", 1, nil)
	c := b.dial(t)
	if p := c.produce(9, "f", makeBatch(batchOpts{values: []string{"a", "b"}})); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	part, _ := b.eng.Partition("f", 0)
	epoch := part.Epoch()
	if epoch < 1 {
		t.Fatalf("leader epoch %d", epoch)
	}

	tests := []struct {
		name        string
		offset      int64
		leaderEpoch int32
		code        int16
		batches     int
	}{
		{"at start", 0, -1, 0, 1},
		{"at the high watermark", 2, -1, 0, 0},
		{"beyond the high watermark", 3, -1, kerr.OffsetOutOfRange.Code, 0},
		{"far beyond", 1 << 40, -1, kerr.OffsetOutOfRange.Code, 0},
		{"negative", -5, -1, kerr.OffsetOutOfRange.Code, 0},
		{"current epoch", 0, epoch, 0, 1},
		{"older epoch", 0, epoch - 1, kerr.FencedLeaderEpoch.Code, 0},
		{"newer epoch", 0, epoch + 1, kerr.UnknownLeaderEpoch.Code, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := c.fetch(fetchReq(12, "f", tc.offset, tc.leaderEpoch, 0, 0))
			if p.ErrorCode != tc.code {
				t.Fatalf("error %d (%v), want %d", p.ErrorCode, kerr.ErrorForCode(p.ErrorCode), tc.code)
			}
			if bases, _ := batchBases(t, p.RecordBatches); len(bases) != tc.batches {
				t.Fatalf("%d batches, want %d", len(bases), tc.batches)
			}
			if tc.code == 0 && p.HighWatermark != 2 {
				t.Fatalf("high watermark %d", p.HighWatermark)
			}
		})
	}
	// Unknown topic: UNKNOWN_TOPIC_OR_PARTITION (no auto-create on fetch).
	if p := c.fetch(fetchReq(12, "nope", 0, -1, 0, 0)); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %d", p.ErrorCode)
	}
	// ListOffsets does the same epoch check.
	lo := listOffsetsReq(7, "f", -1)
	lo.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch + 1
	if p := c.do(lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("ListOffsets newer epoch: %d", p.ErrorCode)
	}
}

// TestFetchEmptyPartitionRecordsNotNull: an empty partition's records are an
// empty, not a null, set: librdkafka refuses a null one.
func TestFetchEmptyPartitionRecordsNotNull(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "empty", 1, nil)
	c := b.dial(t)
	for _, version := range []int16{4, 11, 12} {
		req := fetchReq(version, "empty", 0, -1, 0, 0)
		corr := c.send(req)
		got, body, err := c.readFrame()
		if err != nil || got != corr {
			t.Fatalf("v%d: corr %d err %v", version, got, err)
		}
		if version < 12 {
			// Records (int32 length) is the last field of the only partition.
			n := int32(binary.BigEndian.Uint32(body[len(body)-4:]))
			if n != 0 {
				t.Fatalf("v%d: records length %d, want 0 (empty, not null)", version, n)
			}
		} else {
			// Compact bytes: uvarint length+1 (1 = empty, 0 = null), then the
			// partition's, topic's and response's empty tag buffers.
			tail := body[len(body)-4:]
			if !bytes.Equal(tail, []byte{1, 0, 0, 0}) {
				t.Fatalf("v%d: tail % x, want 01 00 00 00 (empty records, not null)", version, tail)
			}
		}
	}
}

// TestMetadataTopics: invalid names, unknown topics and IDs.
func TestMetadataTopics(t *testing.T) {
	b := startBroker(t, nil)
	c := b.dial(t)
	tests := []struct {
		name      string
		topic     string
		allowAuto bool
		code      int16
	}{
		{"invalid characters", "bad/name", true, kerr.InvalidTopicException.Code},
		{"dot", ".", true, kerr.InvalidTopicException.Code},
		{"too long", strings.Repeat("a", 250), true, kerr.InvalidTopicException.Code},
		{"unknown without auto-create", "never-created", false, kerr.UnknownTopicOrPartition.Code},
		{"Kafka's internal offsets topic is listed as internal, not auto-created", "__consumer_offsets", true, 0},
		{"Kafka's internal transaction topic is not auto-created", "__transaction_state", true, kerr.InvalidTopicException.Code},
		{"auto-created", "auto", true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = 12
			req.AllowAutoTopicCreation = tc.allowAuto
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = &tc.topic
			req.Topics = append(req.Topics, rt)
			resp := c.do(req).(*kmsg.MetadataResponse)
			if len(resp.Topics) != 1 {
				t.Fatalf("%d topics", len(resp.Topics))
			}
			got := resp.Topics[0]
			// A just auto-created topic may still be opening.
			if got.ErrorCode != tc.code && !(tc.code == 0 && got.ErrorCode == kerr.LeaderNotAvailable.Code) {
				t.Fatalf("error %d (%v), want %d", got.ErrorCode, kerr.ErrorForCode(got.ErrorCode), tc.code)
			}
			if deref(got.Topic) != tc.topic {
				t.Fatalf("topic %q", deref(got.Topic))
			}
			if got.IsInternal != (tc.topic == "__consumer_offsets") {
				t.Fatalf("internal %v", got.IsInternal)
			}
		})
	}
	if _, ok := b.eng.Topic("__consumer_offsets"); ok {
		t.Fatal("metadata auto-created __consumer_offsets as a data topic")
	}
	if _, ok := b.eng.Topic("never-created"); ok {
		t.Fatal("metadata with AllowAutoTopicCreation=false created a topic")
	}
	// By an unknown topic ID (v10+).
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = uuid.New()
	req.Topics = append(req.Topics, rt)
	if resp := c.do(req).(*kmsg.MetadataResponse); len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic ID: %+v", resp.Topics)
	}
}

// TestCreateDeleteTopics covers CreateTopics and DeleteTopics errors.
func TestCreateDeleteTopics(t *testing.T) {
	b := startBroker(t, nil)
	c := b.dial(t)
	create := func(version int16, validateOnly bool, name string, parts int32, configs map[string]string) kmsg.CreateTopicsResponseTopic {
		t.Helper()
		resp := c.do(createTopicsReq(version, validateOnly, name, parts, configs)).(*kmsg.CreateTopicsResponse)
		if len(resp.Topics) != 1 {
			t.Fatalf("%d topics", len(resp.Topics))
		}
		return resp.Topics[0]
	}

	t.Run("validate only writes nothing", func(t *testing.T) {
		got := create(7, true, "dry", 3, map[string]string{"retention.ms": "1000"})
		if got.ErrorCode != 0 || got.NumPartitions != 3 {
			t.Fatalf("validate-only: %+v", got)
		}
		if got.TopicID != [16]byte{} {
			t.Fatalf("validate-only returned a topic ID %v", got.TopicID)
		}
		if _, ok := b.eng.Topic("dry"); ok {
			t.Fatal("validate-only created the topic")
		}
		_ = filepath.WalkDir(b.dir, func(p string, d fs.DirEntry, err error) error {
			if strings.Contains(filepath.Base(p), "dry") {
				t.Errorf("validate-only wrote %s", p)
			}
			return nil
		})
		// And creating it for real afterwards works.
		if got := create(7, false, "dry", 3, nil); got.ErrorCode != 0 {
			t.Fatalf("real create after validate-only: %d", got.ErrorCode)
		}
	})
	t.Run("duplicate", func(t *testing.T) {
		if got := create(7, false, "dup", 1, nil); got.ErrorCode != 0 {
			t.Fatalf("first create: %d", got.ErrorCode)
		}
		for _, validateOnly := range []bool{false, true} {
			got := create(7, validateOnly, "dup", 1, nil)
			if got.ErrorCode != kerr.TopicAlreadyExists.Code || got.ErrorMessage == nil {
				t.Fatalf("validateOnly=%v: %d %v", validateOnly, got.ErrorCode, deref(got.ErrorMessage))
			}
		}
	})
	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			name    string
			topic   string
			parts   int32
			configs map[string]string
			code    int16
		}{
			{"unknown config", "cfg", 1, map[string]string{"no.such.config": "1"}, kerr.InvalidConfig.Code},
			{"bad config value", "cfg", 1, map[string]string{"retention.ms": "soon"}, kerr.InvalidConfig.Code},
			{"unsupported config value", "cfg", 1, map[string]string{"cleanup.policy": "compact,forever"}, kerr.InvalidConfig.Code},
			{"invalid name", "a b", 1, nil, kerr.InvalidTopicException.Code},
			{"reserved name", "__transaction_state", 1, nil, kerr.InvalidTopicException.Code},
			{"zero partitions", "cfg", 0, nil, kerr.InvalidPartitions.Code},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				for _, version := range []int16{4, 7} {
					got := create(version, false, tc.topic, tc.parts, tc.configs)
					if got.ErrorCode != tc.code || got.ErrorMessage == nil {
						t.Fatalf("v%d: %d (%v), want %d", version, got.ErrorCode, deref(got.ErrorMessage), tc.code)
					}
				}
				if _, ok := b.eng.Topic(tc.topic); ok {
					t.Fatal("refused create left a topic")
				}
			})
		}
	})
	t.Run("delete unknown", func(t *testing.T) {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version = 5
		req.TimeoutMillis = 15000
		req.TopicNames = []string{"ghost"}
		resp := c.do(req).(*kmsg.DeleteTopicsResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("delete unknown name: %+v", resp.Topics)
		}

		req = kmsg.NewPtrDeleteTopicsRequest()
		req.Version = 6
		req.TimeoutMillis = 15000
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.TopicID = uuid.New()
		req.Topics = append(req.Topics, dt)
		resp = c.do(req).(*kmsg.DeleteTopicsResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicID.Code || resp.Topics[0].TopicID != dt.TopicID {
			t.Fatalf("delete unknown ID: %+v", resp.Topics)
		}

		ghost := "ghost"
		req = kmsg.NewPtrDeleteTopicsRequest()
		req.Version = 6
		req.TimeoutMillis = 15000
		dt = kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = &ghost
		req.Topics = append(req.Topics, dt)
		resp = c.do(req).(*kmsg.DeleteTopicsResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("delete unknown name v6: %+v", resp.Topics)
		}
	})
	t.Run("delete by id", func(t *testing.T) {
		got := create(7, false, "byid", 1, nil)
		if got.ErrorCode != 0 {
			t.Fatalf("create: %d", got.ErrorCode)
		}
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version = 6
		req.TimeoutMillis = 15000
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.TopicID = got.TopicID
		req.Topics = append(req.Topics, dt)
		resp := c.do(req).(*kmsg.DeleteTopicsResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || deref(resp.Topics[0].Topic) != "byid" {
			t.Fatalf("delete by id: %+v", resp.Topics)
		}
		if v, ok := b.eng.Topic("byid"); ok && !v.Spec.Deleted {
			t.Fatal("topic still live after delete")
		}
	})
}

func listOffsetsReq(version int16, topic string, ts int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = version
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = 0
	rp.CurrentLeaderEpoch = -1
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestListOffsets: earliest, latest, max timestamp and by timestamp.
func TestListOffsets(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "lo", 1, nil)
	c := b.dial(t)
	// [0,3) at ts 1000-1002, [3,5) at 5000-5001, [5,6) at 3000.
	for _, bo := range []batchOpts{
		{ts: 1000, values: []string{"a", "b", "c"}},
		{ts: 5000, values: []string{"d", "e"}},
		{ts: 3000, values: []string{"f"}},
	} {
		if p := c.produce(9, "lo", makeBatch(bo)); p.ErrorCode != 0 {
			t.Fatalf("produce: %d", p.ErrorCode)
		}
	}
	tests := []struct {
		name     string
		ts       int64
		offsets  []int64 // acceptable offsets (batch granularity)
		wantTS   []int64
		minVersn int16
	}{
		{"earliest", -2, []int64{0}, []int64{-1}, 1},
		{"latest", -1, []int64{6}, []int64{-1}, 1},
		{"max timestamp", -3, []int64{3, 4}, []int64{5001}, 7},
		{"before everything", 0, []int64{0}, []int64{1000, 1002}, 1},
		{"inside the first batch", 1001, []int64{0, 1}, []int64{1001, 1002}, 1},
		{"between batches", 2000, []int64{3}, []int64{5000, 5001}, 1},
		{"after everything", 6000, []int64{-1}, []int64{-1}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, version := range []int16{1, 4, 7} {
				if version < tc.minVersn {
					continue
				}
				resp := c.do(listOffsetsReq(version, "lo", tc.ts)).(*kmsg.ListOffsetsResponse)
				p := resp.Topics[0].Partitions[0]
				if p.ErrorCode != 0 {
					t.Fatalf("v%d: error %d", version, p.ErrorCode)
				}
				if !slices.Contains(tc.offsets, p.Offset) {
					t.Fatalf("v%d: offset %d, want one of %v", version, p.Offset, tc.offsets)
				}
				if !slices.Contains(tc.wantTS, p.Timestamp) {
					t.Fatalf("v%d: timestamp %d, want one of %v", version, p.Timestamp, tc.wantTS)
				}
			}
		})
	}
	resp := c.do(listOffsetsReq(7, "nope", -1)).(*kmsg.ListOffsetsResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %d", p.ErrorCode)
	}
}

// TestProduceAcksZero: no response is sent, the data becomes readable, and
// the next request on the connection is answered normally.
func TestProduceAcksZero(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "fire", 1, nil)
	c := b.dial(t)
	c.send(produceReq(9, 0, "fire", 0, makeBatch(batchOpts{values: []string{"x", "y"}})))
	// The next frame on the wire must be the ApiVersions answer.
	av := kmsg.NewPtrApiVersionsRequest()
	c.read(av, c.send(av))
	// Long poll until the data is durable: woken by the sync, no sleep.
	p := c.fetch(fetchReq(12, "fire", 0, -1, 15000, 1))
	if p.ErrorCode != 0 {
		t.Fatalf("fetch: %d", p.ErrorCode)
	}
	if _, counts := batchBases(t, p.RecordBatches); !slices.Equal(counts, []int32{2}) {
		t.Fatalf("batches %v", counts)
	}
}

// TestPipelinedProduce: many requests written at once on one connection are
// answered in request order, with offsets in that order.
func TestPipelinedProduce(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "pipe", 1, nil)
	c := b.dial(t)
	const n = 20
	var buf []byte
	var corrs []int32
	var reqs []kmsg.Request
	for i := 0; i < n; i++ {
		var req kmsg.Request = produceReq(9, -1, "pipe", 0, makeBatch(batchOpts{values: []string{fmt.Sprint(i)}}))
		if i%5 == 4 {
			req = kmsg.NewPtrApiVersionsRequest() // a different kind in between
		}
		var corr int32
		buf, corr = c.frame(buf, req)
		corrs = append(corrs, corr)
		reqs = append(reqs, req)
	}
	c.write(buf)
	next := int64(0)
	for i, req := range reqs {
		resp := c.read(req, corrs[i])
		if pr, ok := resp.(*kmsg.ProduceResponse); ok {
			p := pr.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.BaseOffset != next {
				t.Fatalf("request %d: code %d base %d, want base %d", i, p.ErrorCode, p.BaseOffset, next)
			}
			next++
		}
	}
}

// TestShutdownWithPendingLongPoll: Shutdown returns once its context ends
// even while a fetch is long-polling with a long MaxWait.
func TestShutdownWithPendingLongPoll(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "idle", 1, nil)
	c := b.dial(t)
	// A fetch that would wait 10 minutes, then an ApiVersions. The writer
	// takes the fetch's reply slot and waits on it; once the ApiVersions
	// slot is queued behind it, the fetch is surely long-polling. Wait for
	// that without sleeping.
	c.send(fetchReq(12, "idle", 0, -1, 600000, 1))
	c.send(kmsg.NewPtrApiVersionsRequest())
	for !b.pendingReplies() {
		runtime.Gosched()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // no grace at all
		b.shutdown(ctx)
	}()
	select {
	case <-done:
	case <-time.After(ioTimeout): // a hang guard, not a timing assertion
		t.Fatal("Shutdown with an expired context did not return while a fetch long-polled")
	}
}

// TestQueuedBytesBudget: frames share one memory budget, charged as their
// bytes arrive. While one client holds the whole budget with a frame it has
// sent all but one byte of, another client's request waits (the broker
// allocates nothing beyond the budget); once the first frame is given up,
// the other request is served.
func TestQueuedBytesBudget(t *testing.T) {
	b := startBroker(t, func(c *Config) {
		c.FrameTimeout = time.Minute
		c.MaxFrameBytes = 1 << 20
		c.MaxQueuedBytes = 1 << 20
	})
	hog := b.dial(t)
	hog.write(append(sizePrefix(1<<20), make([]byte, 1<<20-1)...)) // takes the whole budget
	// Wait until the broker has really charged the whole frame (its
	// connection may be scheduled after the next one's otherwise).
	for b.srv.budget.held() < 1<<20 {
		runtime.Gosched()
	}
	b.checkServingBudgetHeld(t, hog)
}

// checkServingBudgetHeld shows a request waiting while hog holds the budget,
// then answered once hog goes away.
func (b *testBroker) checkServingBudgetHeld(t *testing.T, hog *rawConn) {
	t.Helper()
	other := b.dial(t)
	corr := other.send(kmsg.NewPtrApiVersionsRequest())
	_ = other.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var one [1]byte
	if n, err := other.nc.Read(one[:]); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a request was answered (%d bytes, %v) while another frame held the whole budget", n, err)
	}
	_ = hog.nc.Close() // the budget comes back when the broker gives the frame up
	resp := other.read(kmsg.NewPtrApiVersionsRequest(), corr).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions once the budget was back: error %d", resp.ErrorCode)
	}
	b.checkServing(t)
}

// TestOffsetForLeaderEpoch: the current epoch ends at the high watermark;
// epochs older or newer than the partition's, and unknown partitions, get
// Kafka's errors.
func TestOffsetForLeaderEpoch(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "e", 1, nil)
	c := b.dial(t)
	if p := c.produce(9, "e", makeBatch(batchOpts{values: []string{"a", "b", "c"}})); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	part, _ := b.eng.Partition("e", 0)
	epoch := part.Epoch()
	ask := func(version int16, topic string, current, leader int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.Version = version
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = current, leader
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.do(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	}
	tests := []struct {
		name          string
		version       int16
		topic         string
		current, want int32
		code          int16
		epoch         int32
		end           int64
	}{
		{"current epoch, v2", 2, "e", epoch, epoch, 0, epoch, 3},
		{"current epoch, v4 (flexible)", 4, "e", -1, epoch, 0, epoch, 3},
		{"an epoch before any history", 4, "e", epoch, epoch - 1, 0, epoch - 1, 0},
		{"an epoch after the current one", 4, "e", epoch, epoch + 1, 0, -1, -1},
		{"fenced current epoch", 4, "e", epoch - 1, epoch, kerr.FencedLeaderEpoch.Code, -1, -1},
		{"unknown current epoch", 4, "e", epoch + 1, epoch, kerr.UnknownLeaderEpoch.Code, -1, -1},
		{"unknown topic", 4, "nope", -1, 0, kerr.UnknownTopicOrPartition.Code, -1, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ask(tc.version, tc.topic, tc.current, tc.want)
			if p.ErrorCode != tc.code || p.LeaderEpoch != tc.epoch || p.EndOffset != tc.end {
				t.Fatalf("got error %d epoch %d end %d; want error %d epoch %d end %d",
					p.ErrorCode, p.LeaderEpoch, p.EndOffset, tc.code, tc.epoch, tc.end)
			}
		})
	}
}
