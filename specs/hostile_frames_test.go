package specs

// Raw Kafka frames for the hostile-client spec: connections from chosen
// loopback source addresses, requests framed by hand, and record batches
// built byte by byte so they can be wrong in exactly one way.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// hostileSources are the loopback source addresses hostile connections
// dial from, so a per-IP connection limit separates them from the good
// clients (which dial from 127.0.0.1). Every one of them is on lo.
var hostileSources = []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}

// hostileConn is one raw connection to the broker.
type hostileConn struct {
	nc   net.Conn
	fm   *kmsg.RequestFormatter
	corr int32
}

// dialHostile connects to addr from source (a loopback IP).
func dialHostile(addr, source string) (*hostileConn, error) {
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s from %s: %w", addr, source, err)
	}
	return &hostileConn{nc: nc, fm: kmsg.NewRequestFormatter(kmsg.FormatterClientID("hostile"))}, nil
}

func (c *hostileConn) close() { _ = c.nc.Close() }

// frame returns req framed (size prefix included) with the next correlation ID.
func (c *hostileConn) frame(req kmsg.Request) []byte {
	c.corr++
	return c.fm.AppendRequest(nil, req, c.corr)
}

func (c *hostileConn) write(b []byte) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := c.nc.Write(b)
	return err
}

// send writes req.
func (c *hostileConn) send(req kmsg.Request) error { return c.write(c.frame(req)) }

// readSize reads the next response's size prefix only.
func (c *hostileConn) readSize(within time.Duration) (int64, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(within))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint32(size[:])), nil
}

// read reads the response to req (sent last) and decodes it.
func (c *hostileConn) read(req kmsg.Request, within time.Duration) (kmsg.Response, error) {
	n, err := c.readSize(within)
	if err != nil {
		return nil, err
	}
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("response frame of %d bytes", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.nc, buf); err != nil {
		return nil, err
	}
	body := buf[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		if len(body) == 0 {
			return nil, fmt.Errorf("empty flexible response")
		}
		body = body[1:] // the header's empty tag section
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// waitClosed reports whether the broker closed the connection within d.
func (c *hostileConn) waitClosed(d time.Duration) bool {
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		if _, err := c.nc.Read(buf); err != nil {
			ne, ok := err.(net.Error)
			return !(ok && ne.Timeout())
		}
	}
}

// ---------------------------------------------------------------------------
// Requests

func produceRequest(topic string, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 7
	req.Acks = -1
	req.TimeoutMillis = 10000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition, p.Records = partition, batch
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// fetchRequest names partition of topic copies times, from offset.
func fetchRequest(topic string, partition int32, offset int64, copies int, maxWait int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis = maxWait
	req.MinBytes = 1
	req.MaxBytes = 0x7fffffff
	req.SessionEpoch = -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	for range copies {
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes = partition, offset, 1<<20
		p.CurrentLeaderEpoch, p.LogStartOffset = -1, -1
		t.Partitions = append(t.Partitions, p)
	}
	req.Topics = append(req.Topics, t)
	return req
}

// ---------------------------------------------------------------------------
// Record batches

// recordBytes is one v2 record (length-prefixed) at offsetDelta.
func recordBytes(offsetDelta int64, value []byte) []byte {
	var body []byte
	body = append(body, 0)              // attributes
	body = binary.AppendVarint(body, 0) // timestamp delta
	body = binary.AppendVarint(body, offsetDelta)
	body = binary.AppendVarint(body, -1) // null key
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // no headers
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// batchSpec is the header of a record batch; records are the bytes after it.
type batchSpec struct {
	attrs           int16
	lastOffsetDelta int32
	numRecords      int32
	pid             int64
	epoch           int16
	seq             int32
}

// plainBatch is a batch header for n records, no producer.
func plainBatch(attrs int16, n int32) batchSpec {
	return batchSpec{attrs: attrs, lastOffsetDelta: n - 1, numRecords: n, pid: -1, epoch: -1, seq: -1}
}

// rawBatch encodes a v2 record batch with a correct length and CRC around
// whatever records holds.
func rawBatch(s batchSpec, records []byte) []byte {
	now := time.Now().UnixMilli()
	b := make([]byte, 0, 61+len(records))
	b = binary.BigEndian.AppendUint64(b, 0)          // base offset
	b = binary.BigEndian.AppendUint32(b, 0)          // length, below
	b = binary.BigEndian.AppendUint32(b, ^uint32(0)) // partition leader epoch -1
	b = append(b, 2)                                 // magic
	b = binary.BigEndian.AppendUint32(b, 0)          // crc, below
	b = binary.BigEndian.AppendUint16(b, uint16(s.attrs))
	b = binary.BigEndian.AppendUint32(b, uint32(s.lastOffsetDelta))
	b = binary.BigEndian.AppendUint64(b, uint64(now))
	b = binary.BigEndian.AppendUint64(b, uint64(now))
	b = binary.BigEndian.AppendUint64(b, uint64(s.pid))
	b = binary.BigEndian.AppendUint16(b, uint16(s.epoch))
	b = binary.BigEndian.AppendUint32(b, uint32(s.seq))
	b = binary.BigEndian.AppendUint32(b, uint32(s.numRecords))
	b = append(b, records...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32c))
	return b
}

// goodRecords is n valid records with contiguous offset deltas.
func goodRecords(n int, value string) []byte {
	var out []byte
	for i := range n {
		out = append(out, recordBytes(int64(i), []byte(value))...)
	}
	return out
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

// poison is one record batch that must be refused, with its name.
type poison struct {
	name  string
	batch []byte
}

// poisonBatches are batches with a correct header, length and CRC whose
// records are wrong: the finding-3 list of issue 15.
func poisonBatches(random func(int) []byte) []poison {
	good3 := goodRecords(3, "poison-ok")
	zipped := gzipBytes(good3)
	var out []poison
	add := func(name string, s batchSpec, records []byte) {
		out = append(out, poison{name, rawBatch(s, records)})
	}
	add("bad varint", plainBatch(0, 1), bytes.Repeat([]byte{0xff}, 11))
	add("record length overrun", plainBatch(0, 1), append(binary.AppendVarint(nil, 1000), good3[1:12]...))
	add("offset deltas out of order", plainBatch(0, 3),
		append(append(recordBytes(0, []byte("a")), recordBytes(2, []byte("b"))...), recordBytes(1, []byte("c"))...))
	add("offset delta repeated", plainBatch(0, 2), append(recordBytes(0, []byte("a")), recordBytes(0, []byte("b"))...))
	add("record count above records", plainBatch(0, 5), goodRecords(2, "short"))
	add("trailing garbage", plainBatch(0, 3), append(append([]byte{}, good3...), random(17)...))
	add("codec 5", plainBatch(5, 3), good3)
	add("codec 7", plainBatch(7, 3), good3)
	for codec, name := range map[int16]string{1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"} {
		add("random bytes under "+name, plainBatch(codec, 3), random(256))
	}
	add("truncated gzip", plainBatch(1, 3), zipped[:len(zipped)/2])
	return out
}

// bombBatches returns a gzip and a zstd batch whose one record claims a
// value of size bytes of zeros, so each inflates to about size. Both
// formats allow concatenated members (frames), which every reader (Go's,
// klauspost's, the JVM's) decodes as one stream: one compressed chunk of
// zeros repeated builds a 1 GiB bomb in milliseconds.
func bombBatches(size int) ([]poison, error) {
	const chunk = 8 << 20
	size = max(size/chunk, 1) * chunk
	var hdr []byte
	hdr = append(hdr, 0)               // attributes
	hdr = binary.AppendVarint(hdr, 0)  // timestamp delta
	hdr = binary.AppendVarint(hdr, 0)  // offset delta
	hdr = binary.AppendVarint(hdr, -1) // null key
	hdr = binary.AppendVarint(hdr, int64(size))
	head := append(binary.AppendVarint(nil, int64(len(hdr)+size+1)), hdr...)
	zeros := make([]byte, chunk)
	tail := []byte{0} // no headers

	zenc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		return nil, err
	}
	defer zenc.Close()
	codecs := []struct {
		name  string
		attrs int16
		pack  func([]byte) []byte
	}{
		{"gzip", 1, gzipBytes},
		{"zstd", 4, func(b []byte) []byte { return zenc.EncodeAll(b, nil) }},
	}
	var out []poison
	for _, c := range codecs {
		z := c.pack(zeros)
		stream := c.pack(head)
		for range size / chunk {
			stream = append(stream, z...)
		}
		stream = append(stream, c.pack(tail)...)
		out = append(out, poison{fmt.Sprintf("%s bomb %d KiB -> %d MiB", c.name, len(stream)>>10, size>>20),
			rawBatch(plainBatch(c.attrs, 1), stream)})
	}
	return out, nil
}
