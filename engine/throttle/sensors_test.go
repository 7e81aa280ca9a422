package throttle

import (
	"fmt"
	"testing"
)

type fakeClock struct{ ms int64 }

func (c *fakeClock) now() int64 { return c.ms }

func TestSensorsThrottle(t *testing.T) {
	clk := &fakeClock{}
	s := NewSensors(DefaultConfig, DefaultIdleMs, 10, clk.now)
	// 1000 bytes/s limit; the young rate measures over 10 s, so 10000
	// bytes are exactly at the limit and 20000 double it.
	if got := s.Record("alice", 10000, 1000); got != 0 {
		t.Fatalf("at the limit: throttle %d, want 0", got)
	}
	if got := s.Record("alice", 10000, 1000); got != 10000 {
		t.Fatalf("double the limit: throttle %d, want 10000", got)
	}
	if got := s.Record("bob", 10000, 1000); got != 0 {
		t.Fatalf("another sensor is measured apart: throttle %d, want 0", got)
	}
}

func TestSensorsUnrecord(t *testing.T) {
	clk := &fakeClock{}
	s := NewSensors(DefaultConfig, DefaultIdleMs, 10, clk.now)
	s.Unrecord("nobody", 1) // no sensor: nothing to take back, none made
	if got := s.Len(); got != 0 {
		t.Fatalf("%d sensors after unrecording an unknown one, want 0", got)
	}
	if got := s.Record("alice", 20000, 1000); got != 10000 {
		t.Fatalf("double the limit: throttle %d, want 10000", got)
	}
	s.Unrecord("alice", 20000)
	// Without the unrecorded 20000, 10000 more are at the limit.
	if got := s.Record("alice", 10000, 1000); got != 0 {
		t.Fatalf("after Unrecord: throttle %d, want 0", got)
	}
}

func TestSensorsCapThrottle(t *testing.T) {
	clk := &fakeClock{}
	s := NewSensors(DefaultConfig, DefaultIdleMs, 10, clk.now)
	s.MaxThrottleMs = 1000
	if got := s.Record("alice", 1e9, 1000); got != 1000 {
		t.Fatalf("throttle %d, want the cap 1000", got)
	}
}

func TestSensorsExpireIdle(t *testing.T) {
	clk := &fakeClock{}
	s := NewSensors(DefaultConfig, 60000, 10, clk.now)
	s.Record("idle", 1, 1000)
	clk.ms = 40000
	s.Record("busy", 1, 1000)
	clk.ms = 70000 // idle is 70 s idle, busy 30 s
	s.Record("busy", 1, 1000)
	if got := s.Len(); got != 1 {
		t.Fatalf("after the sweep %d sensors, want 1 (busy)", got)
	}
}

func TestSensorsBounded(t *testing.T) {
	clk := &fakeClock{}
	s := NewSensors(DefaultConfig, DefaultIdleMs, 3, clk.now)
	for i := range 100 {
		clk.ms = int64(i)
		s.Record(fmt.Sprintf("client-%d", i), 1, 1000)
	}
	if got := s.Len(); got != 3 {
		t.Fatalf("%d sensors, want the cap 3", got)
	}
	// The most recent survive the eviction.
	clk.ms = 1000
	s.Record("client-99", 1, 1000)
	s.Record("new", 1, 1000)
	s.mu.Lock()
	_, kept := s.byName["client-99"]
	_, evicted := s.byName["client-97"]
	s.mu.Unlock()
	if !kept || evicted {
		t.Fatalf("kept client-99 %v, still has client-97 %v; want the least recent evicted", kept, evicted)
	}
}

func TestSensorsRecordDoesNotAllocate(t *testing.T) {
	clk := &fakeClock{}
	s := NewSensors(DefaultConfig, DefaultIdleMs, 10, clk.now)
	name := "alice"
	s.Record(name, 1, 1000)
	allocs := testing.AllocsPerRun(1000, func() {
		clk.ms += 7
		s.Record(name, 100, 1e9)
	})
	if allocs != 0 {
		t.Fatalf("Record allocates %v times per call, want 0", allocs)
	}
}
