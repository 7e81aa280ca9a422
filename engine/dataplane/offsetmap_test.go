package dataplane

import (
	"fmt"
	"testing"
)

func TestOffsetMap(t *testing.T) {
	type op struct {
		put    bool
		key    string
		offset int64 // put: the offset; get: the answer wanted
		ok     bool  // put: accepted
	}
	tests := []struct {
		name   string
		budget int
		ops    []op
		len    int
		latest int64
	}{
		{"empty", 24 * 10, []op{{key: "a", offset: -1}}, 0, -1},
		{"offset zero is a value", 24 * 10, []op{{put: true, key: "a", offset: 0, ok: true}, {key: "a", offset: 0}}, 1, 0},
		{"later offset replaces", 24 * 10, []op{
			{put: true, key: "a", offset: 3, ok: true}, {put: true, key: "a", offset: 9, ok: true},
			{key: "a", offset: 9}, {key: "b", offset: -1}}, 1, 9},
		{"empty key is a key", 24 * 10, []op{{put: true, key: "", offset: 4, ok: true}, {key: "", offset: 4}, {key: "x", offset: -1}}, 1, 4},
		// 2 slots hold 1 key (0.9 * 2).
		{"full refuses a new key", 48, []op{
			{put: true, key: "a", offset: 1, ok: true}, {put: true, key: "b", offset: 2},
			{key: "b", offset: -1}, {key: "a", offset: 1}}, 1, 1},
		{"full still updates a key", 48, []op{
			{put: true, key: "a", offset: 1, ok: true}, {put: true, key: "a", offset: 5, ok: true}, {key: "a", offset: 5}}, 1, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewOffsetMap(tt.budget)
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range tt.ops {
				if o.put {
					if ok := m.Put([]byte(o.key), o.offset); ok != o.ok {
						t.Errorf("op %d: Put(%q, %d) = %v, want %v", i, o.key, o.offset, ok, o.ok)
					}
				} else if got := m.Get([]byte(o.key)); got != o.offset {
					t.Errorf("op %d: Get(%q) = %d, want %d", i, o.key, got, o.offset)
				}
			}
			if m.Len() != tt.len || m.LatestOffset() != tt.latest {
				t.Errorf("Len %d LatestOffset %d, want %d %d", m.Len(), m.LatestOffset(), tt.len, tt.latest)
			}
		})
	}
}

// TestOffsetMapProbing fills small maps to their limit, so most keys
// collide on their first slot and probes wrap past the last slot: every
// key keeps its own offset, absent keys stay absent.
func TestOffsetMapProbing(t *testing.T) {
	for _, slots := range []int{2, 3, 7, 10, 64, 1000} {
		m, err := NewOffsetMap(slots * 24)
		if err != nil {
			t.Fatal(err)
		}
		if m.Slots() != slots {
			t.Fatalf("Slots %d, want %d", m.Slots(), slots)
		}
		limit := int(float64(slots) * 0.9)
		for i := range limit {
			if !m.Put(fmt.Appendf(nil, "key-%d", i), int64(i*10)) {
				t.Fatalf("%d slots: Put %d refused before the limit %d", slots, i, limit)
			}
		}
		if !m.Full() || m.Put([]byte("one more"), 1) {
			t.Fatalf("%d slots: not full at %d keys", slots, limit)
		}
		for i := range limit {
			if got := m.Get(fmt.Appendf(nil, "key-%d", i)); got != int64(i*10) {
				t.Fatalf("%d slots: key-%d = %d, want %d", slots, i, got, i*10)
			}
		}
		for i := limit; i < limit+50; i++ {
			if got := m.Get(fmt.Appendf(nil, "key-%d", i)); got != -1 {
				t.Fatalf("%d slots: absent key-%d = %d", slots, i, got)
			}
		}
		m.Clear()
		if m.Len() != 0 || m.Full() || m.LatestOffset() != -1 || m.Get([]byte("key-0")) != -1 {
			t.Fatalf("%d slots: not empty after Clear", slots)
		}
		if !m.Put([]byte("key-0"), 7) || m.Get([]byte("key-0")) != 7 {
			t.Fatalf("%d slots: unusable after Clear", slots)
		}
	}
}

func TestOffsetMapBudget(t *testing.T) {
	for _, budget := range []int{-1, 0, 24, 47} {
		if _, err := NewOffsetMap(budget); err == nil {
			t.Errorf("budget %d: accepted, holds no key", budget)
		}
	}
	m, err := NewOffsetMap(128 << 10)
	if err != nil {
		t.Fatal(err)
	}
	if m.Slots() != (128<<10)/24 {
		t.Errorf("Slots %d", m.Slots())
	}
}

func TestOffsetMapNoAllocs(t *testing.T) {
	m, err := NewOffsetMap(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, 100)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "some-longer-key-%d", i)
	}
	var off int64
	allocs := testing.AllocsPerRun(100, func() {
		for _, k := range keys {
			off++
			m.Put(k, off)
			_ = m.Get(k)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per run of Put and Get", allocs)
	}
}
