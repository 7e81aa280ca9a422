package wire

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzDispatch feeds one arbitrary frame (header and body; the size prefix
// is added) into a live connection, then checks that no handler panicked,
// that the broker still answers ApiVersions on a new connection, and, when
// the frame was a Produce the broker acknowledged, that what it stored
// reads back and decodes with franz-go (checkStored). The seeds cover every
// API key of the dispatch table at its lowest and highest version.
//
// A plain `go test` runs the seeds only; fuzz with
//
//	go test -run '^$' -fuzz FuzzDispatch ./wire/
func FuzzDispatch(f *testing.F) {
	f.Add(rawFrame(int16(kmsg.ApiVersions), 0, 1, nil)[4:])
	f.Add(rawFrame(int16(kmsg.ApiVersions), 99, 1, []byte{1, 2, 3})[4:])
	f.Add(rawFrame(999, 0, 1, nil)[4:])
	f.Add([]byte{})
	f.Add([]byte{0, 18})
	fm := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	seed := func(req kmsg.Request) { f.Add(fm.AppendRequest(nil, req, 1)[4:]) }
	for _, v := range []int16{0, 3} {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version = v
		seed(r)
	}
	for _, v := range []int16{0, 4, 12} {
		r := kmsg.NewPtrMetadataRequest()
		r.Version = v
		name := "fuzz-topic"
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = &name
		r.Topics = append(r.Topics, t)
		r.AllowAutoTopicCreation = true
		seed(r)
	}
	for _, v := range []int16{3, 9} {
		seed(produceReq(v, -1, "fuzz-topic", 0, makeBatch(batchOpts{values: []string{"a", "b"}})))
		seed(produceReq(v, 0, "fuzz-topic", 0, makeBatch(batchOpts{pid: 1, epoch: 0, seq: 0})))
	}
	for _, v := range []int16{4, 12} {
		seed(fetchReq(v, "fuzz-topic", 0, -1, 0, 0))
	}
	seed(listOffsetsReq(7, "fuzz-topic", -3))
	seed(listOffsetsReq(1, "fuzz-topic", 1000))
	seed(createTopicsReq(7, true, "fuzz-created", 2, map[string]string{"retention.ms": "1000"}))
	seed(createTopicsReq(2, false, "bad/name", 1, nil))
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 6
	del.Topics = append(del.Topics, kmsg.NewDeleteTopicsRequestTopic())
	seed(del)
	seed(kmsg.NewPtrInitProducerIDRequest())
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.Version = 1
	seed(dc)
	for _, req := range groupSeeds() {
		seed(req)
	}
	for _, req := range txnSeeds() {
		seed(req)
	}
	for _, req := range adminSeeds() {
		seed(req)
	}
	for _, req := range tableSeeds() {
		seed(req)
	}
	for _, batch := range produceSeedBatches() {
		seed(produceReq(7, -1, "fuzz-topic", 0, batch))
	}

	b := startBroker(f, nil)
	b.createTopic(f, "fuzz-topic", 1, nil)

	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) > 1<<16 {
			return
		}
		// The decode half of dispatch, in this goroutine: a panic in the
		// header or kmsg decoding (which runs outside the handler's recover)
		// fails here with the frame instead of killing the broker.
		hdr, req := decodeFrame(frame)
		c := b.dial(t)
		c.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
		if produce, ok := req.(*kmsg.ProduceRequest); ok {
			b.checkStored(t, c, hdr.corr, produce, frame)
		}
		// Whatever the frame did (answered, closed the connection, or
		// still pending), the broker serves a new connection.
		b.checkAlive(t)
		_ = c.nc.Close()
		if p := b.panicked(); len(p) > 0 {
			t.Fatalf("handler panicked on frame % x: %v", frame, p)
		}
	})
}

// checkAlive is one raw ApiVersions round trip on a new connection.
func (b *testBroker) checkAlive(t testing.TB) {
	t.Helper()
	c := b.dial(t)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	if resp := c.do(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 || len(resp.ApiKeys) != len(handlers) {
		t.Fatalf("ApiVersions: code %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
	_ = c.nc.Close()
}

// decodeFrame runs the decoding steps of conn.dispatch on frame and returns
// the request the broker will serve (nil if it refuses the frame).
func decodeFrame(frame []byte) (header, kmsg.Request) {
	hdr, body, err := parseHeader(frame)
	if err != nil {
		return hdr, nil
	}
	h, ok := handlers[kmsg.Key(hdr.key)]
	if !ok || hdr.version < h.min || hdr.version > h.max {
		return hdr, nil
	}
	req := kmsg.RequestForKey(hdr.key)
	req.SetVersion(hdr.version)
	if req.IsFlexible() {
		tr := &tagReader{src: body}
		kmsg.SkipTags(tr)
		if tr.bad {
			return hdr, nil
		}
		body = tr.src
	}
	if req.ReadFrom(body) != nil {
		return hdr, nil
	}
	return hdr, req
}
