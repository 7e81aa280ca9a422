package wire

import (
	"context"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/quota"
	"github.com/kaas-dev/kaas/volume/records/recordstest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeQuotas gives every user in limits its producer_byte_rate, its own
// sensor.
type fakeQuotas map[string]float64

func (f fakeQuotas) ClientQuota(k quota.Key, user, clientID string) (float64, string, bool) {
	l, ok := f[user]
	if !ok || k != quota.ProducerByteRate {
		return 0, "", false
	}
	return l, user, true
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
			q := newProduceQuotas(tt.broker, func() int64 { return now })
			src := fakeQuotas{}
			if tt.client > 0 {
				src["alice"] = tt.client
			}
			if got := q.record(src, "alice", "app", tt.bytes); got != tt.wantMs {
				t.Errorf("alice throttled %d ms, want %d", got, tt.wantMs)
			}
			if got := q.record(src, "bob", "app", 10000); got != tt.wantBobMs {
				t.Errorf("bob throttled %d ms, want %d", got, tt.wantBobMs)
			}
		})
	}
}

func TestThrottleAction(t *testing.T) {
	tests := []struct {
		key            kmsg.Key
		version        int16
		ms             int64
		delay, muteFor time.Duration
	}{
		{kmsg.Produce, 9, 0, 0, 0},
		{kmsg.Produce, 5, 300, 300 * time.Millisecond, 0},
		{kmsg.Produce, 6, 300, 0, 300 * time.Millisecond},
		{kmsg.Fetch, 7, 40, 40 * time.Millisecond, 0},
		{kmsg.Fetch, 8, 40, 0, 40 * time.Millisecond},
	}
	for _, tt := range tests {
		delay, mute := throttleAction(int16(tt.key), tt.version, tt.ms)
		if delay != tt.delay || mute != tt.muteFor {
			t.Errorf("%v v%d %d ms: delay %v mute %v, want %v and %v", tt.key, tt.version, tt.ms, delay, mute, tt.delay, tt.muteFor)
		}
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
