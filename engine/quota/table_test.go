package quota

import "testing"

func TestResolvePrecedence(t *testing.T) {
	u, d := Named, DefaultPart()
	none := Part{}
	all := []Quota{
		{Entity{u("alice"), u("app")}, ProducerByteRate, 1},
		{Entity{u("alice"), d}, ProducerByteRate, 2},
		{Entity{u("alice"), none}, ProducerByteRate, 3},
		{Entity{d, u("app")}, ProducerByteRate, 4},
		{Entity{d, d}, ProducerByteRate, 5},
		{Entity{d, none}, ProducerByteRate, 6},
		{Entity{none, u("app")}, ProducerByteRate, 7},
		{Entity{none, d}, ProducerByteRate, 8},
	}
	// Dropping the entities one at a time from the most specific, the
	// next one in Kafka's order applies.
	wantSensor := []string{
		SensorName("alice", "app"), SensorName("alice", "app"), SensorName("alice", ""),
		SensorName("alice", "app"), SensorName("alice", "app"), SensorName("alice", ""),
		SensorName("", "app"), SensorName("", "app"),
	}
	for i := range all {
		tab := NewTable(all[i:])
		limit, sensor, ok := tab.Resolve(ProducerByteRate, "alice", "app")
		if !ok || limit != float64(i+1) || sensor != wantSensor[i] {
			t.Errorf("from entity %d: got %v %q %v, want %d %q", i, limit, sensor, ok, i+1, wantSensor[i])
		}
	}
	if _, _, ok := NewTable(nil).Resolve(ProducerByteRate, "alice", "app"); ok {
		t.Error("empty table resolved a quota")
	}
}

func TestResolvePerKeyAndOthers(t *testing.T) {
	tab := NewTable([]Quota{
		{Entity{Named("alice"), Named("app")}, ProducerByteRate, 100},
		{Entity{Named("alice"), Part{}}, ConsumerByteRate, 200},
		{Entity{DefaultPart(), Part{}}, RequestPercentage, 50},
		{Entity{Part{}, Named("app")}, ConsumerByteRate, 300},
	})
	tests := []struct {
		k         Key
		user, cid string
		limit     float64
		sensor    string
		ok        bool
	}{
		{ProducerByteRate, "alice", "app", 100, SensorName("alice", "app"), true},
		{ConsumerByteRate, "alice", "app", 200, SensorName("alice", ""), true},
		{RequestPercentage, "alice", "app", 50, SensorName("alice", ""), true},
		{RequestPercentage, "bob", "x", 50, SensorName("bob", ""), true},
		{ProducerByteRate, "bob", "app", 0, "", false},
		{ConsumerByteRate, "bob", "app", 300, SensorName("", "app"), true},
		{ConsumerByteRate, "bob", "other", 0, "", false},
		{"controller_mutation_rate", "alice", "app", 0, "", false},
	}
	for _, tt := range tests {
		limit, sensor, ok := tab.Resolve(tt.k, tt.user, tt.cid)
		if limit != tt.limit || sensor != tt.sensor || ok != tt.ok {
			t.Errorf("%s %s/%s: got %v %q %v, want %v %q %v", tt.k, tt.user, tt.cid, limit, sensor, ok, tt.limit, tt.sensor, tt.ok)
		}
	}
	if u, c := SensorTags(SensorName("alice", "app")); u != "alice" || c != "app" {
		t.Errorf("SensorTags: %q %q", u, c)
	}
}

func TestResolveAllocations(t *testing.T) {
	empty := NewTable(nil)
	tab := NewTable([]Quota{{Entity{Named("alice"), Named("app")}, ProducerByteRate, 1}})
	for name, f := range map[string]func(){
		"empty": func() { empty.Resolve(ProducerByteRate, "alice", "app") },
		"hit":   func() { tab.Resolve(ProducerByteRate, "alice", "app") },
		"miss":  func() { tab.Resolve(ProducerByteRate, "bob", "app") },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}
