package main

import "testing"

// TestDeriveFDBudget: the division of an injected fd limit, derived and
// with explicit flags.
func TestDeriveFDBudget(t *testing.T) {
	cases := []struct {
		name                    string
		limit                   uint64
		connections, partitions int
		wantConns, wantParts    int
		wantOvercommitted       bool
	}{
		// reserve 256 + 16 shards × 5 = 336
		{"2^20, derived", 1 << 20, 0, 0, 262060, 157236, false},
		{"65536, derived", 65536, 0, 0, 16300, 9780, false},
		{"20000, derived", 20000, 0, 0, 4916, 2949, false},
		{"1024, derived", 1024, 0, 0, 172, 103, false},
		{"below the reserve", 256, 0, 0, 1, 1, true},
		{"explicit connections", 20000, 10000, 0, 10000, 1932, false},
		{"explicit partitions", 20000, 0, 1000, 4916, 1000, false},
		{"explicit partitions beyond the limit", 20000, 0, 5200, 4916, 5200, true},
		{"unlimited", ^uint64(0), 0, 0, 4194220, 2516532, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := deriveFDBudget(c.limit, c.connections, c.partitions)
			if b.Reserve != 336 || b.Connections != c.wantConns || b.Partitions != c.wantParts || b.Overcommitted != c.wantOvercommitted {
				t.Fatalf("limit %d: %+v, want reserve 336, %d connections, %d partitions, overcommitted %v",
					c.limit, b, c.wantConns, c.wantParts, c.wantOvercommitted)
			}
		})
	}
}

// TestBudgetFlags: the budget flags and their KAAS_* variables.
func TestBudgetFlags(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil || o.budgets.maxPartitionsPerBroker != 0 || o.budgets.maxProducersPerPartition != 2000 {
		t.Fatalf("defaults: %+v, %v", o.budgets, err)
	}
	t.Setenv("KAAS_MAX_PARTITIONS_PER_BROKER", "4000")
	t.Setenv("KAAS_MAX_PRODUCERS_PER_PARTITION", "500")
	o, err = parseFlags(nil)
	if err != nil || o.budgets.maxPartitionsPerBroker != 4000 || o.budgets.maxProducersPerPartition != 500 {
		t.Fatalf("from the environment: %+v, %v", o.budgets, err)
	}
	for _, bad := range [][]string{{"--max-partitions-per-broker", "-1"}, {"--max-producers-per-partition", "0"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	t.Setenv("KAAS_MAX_PARTITIONS_PER_BROKER", "many")
	if _, err := parseFlags(nil); err == nil {
		t.Errorf("KAAS_MAX_PARTITIONS_PER_BROKER=many accepted")
	}
}
