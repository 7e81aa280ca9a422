package cluster

import (
	"slices"
	"testing"
	"time"
)

// TestProgressAges: an age restarts when a counter advances, grows while it
// does not, and a leaving broker is not listed.
func TestProgressAges(t *testing.T) {
	clk := &fakeClock{}
	o := NewObserver(time.Second, clk.Now)
	o.Observe([]Heartbeat{{BrokerID: 1, Incarnation: "a", Counter: 1}, {BrokerID: 2, Incarnation: "b", Counter: 1}, {BrokerID: 3, Incarnation: "c", Leaving: true}})
	clk.Advance(3 * time.Second)
	o.Observe([]Heartbeat{{BrokerID: 1, Incarnation: "a", Counter: 2}, {BrokerID: 2, Incarnation: "b", Counter: 1}})
	clk.Advance(time.Second)
	want := []ProgressAge{{ID: 1, Age: time.Second}, {ID: 2, Age: 4 * time.Second}}
	if got := o.ProgressAges(); !slices.Equal(got, want) {
		t.Fatalf("ages = %v, want %v", got, want)
	}
}
