package wire

import (
	"context"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/quota"
	"github.com/kaas-dev/kaas/volume/records/recordstest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeQuotas gives each user the quotas listed as "user/key", on a
// sensor of its own.
type fakeQuotas map[string]float64

func (f fakeQuotas) ClientQuota(k quota.Key, user, clientID string) (float64, string, bool) {
	l, ok := f[user+"/"+string(k)]
	return l, user, ok
}

func TestQuotaUser(t *testing.T) {
	for in, want := range map[string]string{"User:alice": "alice", "User:ANONYMOUS": "ANONYMOUS", "": ""} {
		if got := quotaUser(in); got != want {
			t.Errorf("quotaUser(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestProduceQuotasPrecedence(t *testing.T) {
	// A young rate is measured over 10 s: 10000 bytes at 1000/s is at
	// the limit, 20000 twice it (10 s of throttle), 30000 three times.
	tests := []struct {
		name      string
		client    float64 // alice's producer_byte_rate; 0: none
		broker    float64 // the broker-wide guard; 0: off
		bytes     int64
		wantMs    int64
		wantBobMs int64 // bob, without a client quota, then sends 10000
	}{
		{name: "no quota", bytes: 1 << 20},
		{name: "within the client quota", client: 1000, bytes: 10000},
		{name: "over the client quota", client: 1000, bytes: 20000, wantMs: 10000},
		{name: "over the broker guard only", broker: 1000, bytes: 20000, wantMs: 10000, wantBobMs: 20000},
		{name: "the client quota throttles longer", client: 500, broker: 1000, bytes: 15000, wantMs: 20000, wantBobMs: 15000},
		{name: "the broker guard throttles longer", client: 1000, broker: 500, bytes: 15000, wantMs: 20000, wantBobMs: 40000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := int64(0)
			src := fakeQuotas{}
			if tt.client > 0 {
				src["alice/producer_byte_rate"] = tt.client
			}
			q := newQuotaMeters(src, tt.broker, func() int64 { return now })
			if got := q.recordProduce("alice", "app", tt.bytes); got != tt.wantMs {
				t.Errorf("alice throttled %d ms, want %d", got, tt.wantMs)
			}
			if got := q.recordProduce("bob", "app", 10000); got != tt.wantBobMs {
				t.Errorf("bob throttled %d ms, want %d", got, tt.wantBobMs)
			}
		})
	}
}

func TestThrottleResponse(t *testing.T) {
	tests := []struct {
		name           string
		resp           kmsg.Response // nil: an acks=0 produce
		version        int16
		delay, muteFor time.Duration
	}{
		{"Produce v5 is answered late", kmsg.NewPtrProduceResponse(), 5, 300 * time.Millisecond, 0},
		{"Produce v6 mutes after", kmsg.NewPtrProduceResponse(), 6, 0, 300 * time.Millisecond},
		{"Fetch v7 is answered late", kmsg.NewPtrFetchResponse(), 7, 300 * time.Millisecond, 0},
		{"Fetch v8 mutes after", kmsg.NewPtrFetchResponse(), 8, 0, 300 * time.Millisecond},
		{"Metadata v5 is answered late", kmsg.NewPtrMetadataResponse(), 5, 300 * time.Millisecond, 0},
		{"Metadata v6 mutes after", kmsg.NewPtrMetadataResponse(), 6, 0, 300 * time.Millisecond},
		{"DescribeClientQuotas mutes after from v0", kmsg.NewPtrDescribeClientQuotasResponse(), 0, 0, 300 * time.Millisecond},
		{"an answer without the field mutes after", kmsg.NewPtrSASLHandshakeResponse(), 1, 0, 300 * time.Millisecond},
		{"an acks=0 produce mutes", nil, 9, 0, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &reply{resp: tt.resp, version: tt.version}
			delay, mute := throttleResponse(r, 300)
			if delay != tt.delay || mute != tt.muteFor {
				t.Errorf("delay %v mute %v, want %v and %v", delay, mute, tt.delay, tt.muteFor)
			}
			if tr, ok := tt.resp.(kmsg.ThrottleResponse); ok {
				if ms, _ := tr.Throttle(); ms != 300 {
					t.Errorf("ThrottleTimeMs %d, want 300", ms)
				}
			}
		})
	}
}

// TestApplyQuotas: a young rate is measured over 10 s, so 10 s of the
// limit is within it and 20 s of it twice it (10 s of throttle). Every
// case uses versions whose clients wait out the throttle (the connection
// is muted after the answer, nothing waits here).
func TestApplyQuotas(t *testing.T) {
	fetchWithRecords := func() *kmsg.FetchResponse {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 12
		resp.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{{RecordBatches: []byte{1}}}}}
		return resp
	}
	tests := []struct {
		name    string
		quotas  fakeQuotas
		key     kmsg.Key
		version int16
		size    int64
		spent   time.Duration
		exempt  bool
		wantMs  int32
		empty   bool // a fetch answered without records
		// thenMs is the throttle of the same request again, 0 ms later.
		thenMs int32
	}{
		{name: "a fetch within its consumer quota", quotas: fakeQuotas{"alice/consumer_byte_rate": 1000},
			key: kmsg.Fetch, version: 12, size: 5000, thenMs: 0},
		{name: "a fetch over its consumer quota is answered empty and unrecorded", quotas: fakeQuotas{"alice/consumer_byte_rate": 1000},
			key: kmsg.Fetch, version: 12, size: 20000, wantMs: 10000, empty: true, thenMs: 10000},
		{name: "a fetch over the request quota is answered empty, its bytes unrecorded",
			quotas: fakeQuotas{"alice/consumer_byte_rate": 1000, "alice/request_percentage": 1},
			key:    kmsg.Fetch, version: 12, size: 6000, spent: 200 * time.Millisecond, wantMs: 1000, empty: true, thenMs: 1000},
		{name: "request time over request_percentage is throttled at most one window", quotas: fakeQuotas{"alice/request_percentage": 1},
			key: kmsg.Metadata, version: 12, spent: 200 * time.Millisecond, wantMs: 1000, thenMs: 1000},
		{name: "request time within request_percentage", quotas: fakeQuotas{"alice/request_percentage": 10},
			key: kmsg.Metadata, version: 12, spent: 20 * time.Millisecond},
		{name: "an exempt request is not metered", quotas: fakeQuotas{"alice/request_percentage": 1},
			key: kmsg.ApiVersions, version: 3, spent: 200 * time.Millisecond, exempt: true},
		{name: "no quota", key: kmsg.Fetch, version: 12, size: 1 << 30, spent: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := time.Unix(1000, 0)
			nowMs := func() int64 { return clock.UnixMilli() }
			s := &Server{now: func() time.Time { return clock }, quotas: newQuotaMeters(tt.quotas, 0, nowMs)}
			c := &conn{s: s, ctx: context.Background()}
			handled := func() *reply {
				r := &reply{key: int16(tt.key), version: tt.version, quotaUser: "alice", clientID: "app",
					size: tt.size, spent: tt.spent, exempt: tt.exempt}
				switch tt.key {
				case kmsg.Fetch:
					r.resp = fetchWithRecords()
				default:
					r.resp = kmsg.ResponseForKey(int16(tt.key))
				}
				if !c.applyQuotas(r) {
					t.Fatal("applyQuotas reported a closed connection")
				}
				return r
			}
			r := handled()
			ms, _ := r.resp.(kmsg.ThrottleResponse).Throttle()
			if ms != tt.wantMs {
				t.Errorf("ThrottleTimeMs %d, want %d", ms, tt.wantMs)
			}
			if fr, ok := r.resp.(*kmsg.FetchResponse); ok && (len(fr.Topics) == 0) != tt.empty {
				t.Errorf("fetch answered with %d topics, want empty %v", len(fr.Topics), tt.empty)
			}
			if muted := c.muteUntil.Load() != 0; muted != (tt.wantMs > 0) {
				t.Errorf("muted %v, want %v", muted, tt.wantMs > 0)
			}
			if ms, _ := handled().resp.(kmsg.ThrottleResponse).Throttle(); ms != tt.thenMs {
				t.Errorf("then ThrottleTimeMs %d, want %d", ms, tt.thenMs)
			}
		})
	}
}

func TestWaitUnmuted(t *testing.T) {
	clock := time.Unix(1000, 0)
	closed, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name      string
		muteUntil time.Time // zero: never muted
		ctx       context.Context
		want      bool
	}{
		{"never muted", time.Time{}, context.Background(), true},
		{"the mute is over", clock.Add(-time.Millisecond), context.Background(), true},
		{"a closed connection ends the wait", clock.Add(time.Hour), closed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &conn{s: &Server{now: func() time.Time { return clock }}, ctx: tt.ctx}
			if !tt.muteUntil.IsZero() {
				c.muteUntil.Store(tt.muteUntil.UnixNano())
			}
			if got := c.waitUnmuted(); got != tt.want {
				t.Errorf("waitUnmuted = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBrokerGuardThrottlesProduce: over the broker-wide guard, a Produce
// v9 answer carries the throttle time (the young rate is measured over
// 10 s, so a request of twice 10 s of the limit waits about 10 s).
func TestBrokerGuardThrottlesProduce(t *testing.T) {
	br := startBroker(t, func(c *Config) { c.MaxProduceBytesPerSecond = 1000 })
	br.createTopic(t, "guarded", 1, nil)
	c := br.dial(t)
	batch := recordstest.Batch{Records: recordstest.Text(20, 1000)}.Bytes()
	resp := c.do(produceReq(9, 1, "guarded", 0, batch)).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("error %d: a throttled produce is still appended", code)
	}
	if resp.ThrottleMillis < 5000 || resp.ThrottleMillis > 20000 {
		t.Fatalf("ThrottleMillis %d, want about 10000", resp.ThrottleMillis)
	}
}

// TestConsumerQuotaBoundsFetch: a consumer_byte_rate bounds one Fetch
// answer to the quota's bytes in one window, as Kafka does, though the
// request asks for more; without the quota the same fetch answers all.
func TestConsumerQuotaBoundsFetch(t *testing.T) {
	br := startBroker(t, nil)
	br.createTopic(t, "metered", 1, nil)
	c := br.dial(t)
	batch := recordstest.Batch{Records: recordstest.Text(1, 1000)}.Bytes()
	for range 10 {
		if code := c.do(produceReq(9, 1, "metered", 0, batch)).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce: error %d", code)
		}
	}
	fetched := func() int {
		resp := c.do(fetchReq(12, "metered", 0, -1, 0, 1)).(*kmsg.FetchResponse)
		if resp.ThrottleMillis != 0 {
			t.Fatalf("throttled %d ms: this test measures the bound, not the rate", resp.ThrottleMillis)
		}
		return len(resp.Topics[0].Partitions[0].RecordBatches)
	}
	if got := fetched(); got != 10*len(batch) {
		t.Fatalf("without a quota %d bytes fetched, want all %d", got, 10*len(batch))
	}
	limit := float64(3 * len(batch))
	user := alterEntry([]qcomp{{quota.TypeUser, nil}}, setOp("consumer_byte_rate", limit))
	if resp := alterQuotas(c, false, user); resp.Entries[0].ErrorCode != 0 {
		t.Fatalf("alter: %d %v", resp.Entries[0].ErrorCode, resp.Entries[0].ErrorMessage)
	}
	if got := fetched(); got != 3*len(batch) {
		t.Fatalf("with a consumer quota of %v bytes/s %d bytes fetched, want %d", limit, got, 3*len(batch))
	}
}

// TestRequestQuotaThrottlesMetadata: with a request_percentage too small
// for any client, Metadata answers soon carry a throttle time, at most one
// window, and answer in full (a request quota slows, never refuses).
// ApiVersions, exempt, never does.
func TestRequestQuotaThrottlesMetadata(t *testing.T) {
	br := startBroker(t, nil)
	c := br.dial(t)
	entry := alterEntry([]qcomp{{quota.TypeUser, nil}}, setOp("request_percentage", 1e-9))
	if resp := alterQuotas(c, false, entry); resp.Entries[0].ErrorCode != 0 {
		t.Fatalf("alter: %d %v", resp.Entries[0].ErrorCode, resp.Entries[0].ErrorMessage)
	}
	// c is muted now, the AlterClientQuotas answer itself throttled by
	// the quota it set: go on on another connection (the rate is the
	// user's, the mute only c's).
	c = br.dial(t)
	versions := kmsg.NewPtrApiVersionsRequest()
	versions.Version = 3
	if ms := c.do(versions).(*kmsg.ApiVersionsResponse).ThrottleMillis; ms != 0 {
		t.Fatalf("ApiVersions throttled %d ms: it is exempt", ms)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp := c.do(req).(*kmsg.MetadataResponse)
	if resp.ThrottleMillis <= 0 || resp.ThrottleMillis > 1000 {
		t.Fatalf("Metadata throttled %d ms, want (0, 1000]", resp.ThrottleMillis)
	}
	if len(resp.Brokers) != 1 {
		t.Fatalf("a throttled Metadata answers %d brokers, want 1", len(resp.Brokers))
	}
}
