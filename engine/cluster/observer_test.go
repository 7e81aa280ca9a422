package cluster

import (
	"slices"
	"testing"
	"time"
)

func TestObserverLiveness(t *testing.T) {
	const lease = 2 * time.Second
	hb := func(id int32, counter uint64, inc string) Heartbeat {
		return Heartbeat{BrokerID: id, Counter: counter, Incarnation: inc, Zone: "z"}
	}
	type step struct {
		advance  time.Duration
		observe  []Heartbeat
		wantLive []int32
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first sighting is live and starts the lease", []step{
			{0, []Heartbeat{hb(1, 7, "a")}, []int32{1}},
			{lease - 1, nil, []int32{1}},
			{1, nil, nil}, // exactly one lease without progress: dead
		}},
		{"advancing counter renews the lease", []step{
			{0, []Heartbeat{hb(1, 1, "a")}, []int32{1}},
			{lease - 1, []Heartbeat{hb(1, 2, "a")}, []int32{1}},
			{lease - 1, []Heartbeat{hb(1, 3, "a")}, []int32{1}},
			{lease - 1, nil, []int32{1}},
			{1, nil, nil},
		}},
		{"same counter is no progress", []step{
			{0, []Heartbeat{hb(1, 5, "a")}, []int32{1}},
			{lease / 2, []Heartbeat{hb(1, 5, "a")}, []int32{1}},
			{lease / 2, []Heartbeat{hb(1, 5, "a")}, nil},
		}},
		{"lower counter in the same incarnation is no progress", []step{
			{0, []Heartbeat{hb(1, 5, "a")}, []int32{1}},
			{lease - 1, []Heartbeat{hb(1, 4, "a")}, []int32{1}},
			{1, []Heartbeat{hb(1, 5, "a")}, nil},
			{1, []Heartbeat{hb(1, 6, "a")}, []int32{1}},
		}},
		{"new incarnation with a reset counter is progress", []step{
			{0, []Heartbeat{hb(1, 900, "a")}, []int32{1}},
			{lease + time.Second, nil, nil},
			{0, []Heartbeat{hb(1, 1, "b")}, []int32{1}},
		}},
		{"dead broker comes back by advancing", []step{
			{0, []Heartbeat{hb(2, 1, "a")}, []int32{2}},
			{10 * lease, []Heartbeat{hb(2, 1, "a")}, nil},
			{0, []Heartbeat{hb(2, 2, "a")}, []int32{2}},
		}},
		{"absence from an observation is only no progress", []step{
			{0, []Heartbeat{hb(1, 1, "a"), hb(2, 1, "a")}, []int32{1, 2}},
			{lease / 2, []Heartbeat{hb(1, 2, "a")}, []int32{1, 2}},
			{lease / 2, []Heartbeat{hb(1, 3, "a")}, []int32{1}},
		}},
		{"leaving is dead at once, sorted output", []step{
			{0, []Heartbeat{hb(3, 1, "a"), hb(1, 1, "a"), hb(2, 1, "a")}, []int32{1, 2, 3}},
			{1, []Heartbeat{{BrokerID: 2, Counter: 2, Incarnation: "a", Leaving: true}}, []int32{1, 3}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{}
			o := NewObserver(lease, clk.Now)
			for i, s := range tc.steps {
				clk.Advance(s.advance)
				o.Observe(s.observe)
				var got []int32
				for _, b := range o.Live() {
					got = append(got, b.ID)
					if !o.IsLive(b.ID, b.Incarnation) || !o.Known(b.ID) || b.Zone != "z" {
						t.Fatalf("step %d: Live %+v disagrees with IsLive/Known", i, b)
					}
				}
				if !slices.Equal(got, s.wantLive) {
					t.Fatalf("step %d (t=%v): live %v, want %v", i, clk.Now(), got, s.wantLive)
				}
			}
		})
	}
}

func TestObserverIsLiveChecksIncarnation(t *testing.T) {
	clk := &fakeClock{}
	o := NewObserver(time.Second, clk.Now)
	o.Observe([]Heartbeat{{BrokerID: 1, Counter: 1, Incarnation: "new"}})
	if o.IsLive(1, "old") {
		t.Fatal("an earlier incarnation counts as live")
	}
	if !o.IsLive(1, "new") {
		t.Fatal("current incarnation not live")
	}
	if o.IsLive(2, "new") || o.Known(2) {
		t.Fatal("unseen broker is live or known")
	}
}
