package main

import (
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume/partlog"
)

// TestDeriveFDBudget: the division of an injected fd limit, derived and
// with an explicit --max-connections. Partitions take no share of it.
func TestDeriveFDBudget(t *testing.T) {
	cases := []struct {
		name                   string
		limit                  uint64
		connections            int
		wantTransient          int
		wantConns, wantHandles int
		wantOvercommitted      bool
		wantOpens, wantSyncs   int
	}{
		// reserve 256; transient 64 × 4 + 128 × 2 = 512, at most a
		// quarter of what the reserve leaves; opens and sync workers
		// cut in proportion when it is cut
		{"2^20, derived", 1 << 20, 0, 512, 261952, 785856, false, 64, 128},
		{"65536, derived", 65536, 0, 512, 16192, 48576, false, 64, 128},
		{"20000, derived", 20000, 0, 512, 4808, 14424, false, 64, 128},
		{"1024, derived", 1024, 0, 192, 144, 432, false, 24, 48},
		{"below the reserve", 256, 0, 0, 1, 64, true, 1, 1},
		{"explicit connections", 20000, 10000, 512, 10000, 9232, false, 64, 128},
		{"explicit connections beyond the limit", 20000, 19500, 512, 19500, 64, true, 64, 128},
		{"unlimited", ^uint64(0), 0, 512, 4194112, 12582336, false, 64, 128},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := deriveFDBudget(c.limit, c.connections, partlog.DefaultSyncWorkers)
			if b.Reserve != 256 || b.Transient != c.wantTransient || b.Connections != c.wantConns ||
				b.Handles != c.wantHandles || b.Overcommitted != c.wantOvercommitted ||
				b.OpenParallel != c.wantOpens || b.SyncWorkers != c.wantSyncs {
				t.Fatalf("limit %d: %+v, want reserve 256, transient %d, %d connections, %d handles, overcommitted %v, %d opens, %d sync workers",
					c.limit, b, c.wantTransient, c.wantConns, c.wantHandles, c.wantOvercommitted, c.wantOpens, c.wantSyncs)
			}
			if b.WriteSlots != max(b.Handles/3, 1) || 2*b.WriteSlots > b.Handles {
				t.Fatalf("limit %d: %d write slots for %d handles: want a third, two handles each within the cap", c.limit, b.WriteSlots, b.Handles)
			}
			if !b.Overcommitted && uint64(b.Reserve+b.Transient+b.Connections+b.Handles) != min(c.limit, maxDerivedLimit) {
				t.Fatalf("limit %d: the shares %+v do not add up to it", c.limit, b)
			}
		})
	}
}

// TestDerivePartitionBudget: --max-partitions-per-broker from the memory
// limit, or explicit, or no bound.
func TestDerivePartitionBudget(t *testing.T) {
	for _, c := range []struct {
		explicit int
		mem      uint64
		want     int
	}{
		{0, 0, 0},
		{0, 4 << 30, 32768},
		{0, 1 << 20, 8},
		{0, 1, 1},
		{5000, 4 << 30, 5000},
		{5000, 0, 5000},
	} {
		if got := derivePartitionBudget(c.explicit, c.mem); got != c.want {
			t.Errorf("derivePartitionBudget(%d, %d) = %d, want %d", c.explicit, c.mem, got, c.want)
		}
	}
}

// TestBudgetFlags: the budget flags and their KAAS_* variables.
func TestBudgetFlags(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil || o.budgets.maxPartitionsPerBroker != 0 || o.budgets.maxProducersPerPartition != 2000 ||
		o.budgets.syncWorkers != 128 || o.budgets.handleIdle != 30*time.Second {
		t.Fatalf("defaults: %+v, %v", o.budgets, err)
	}
	t.Setenv("KAAS_MAX_PARTITIONS_PER_BROKER", "4000")
	t.Setenv("KAAS_MAX_PRODUCERS_PER_PARTITION", "500")
	t.Setenv("KAAS_SYNC_WORKERS", "16")
	t.Setenv("KAAS_HANDLE_IDLE", "5s")
	o, err = parseFlags(nil)
	if err != nil || o.budgets.maxPartitionsPerBroker != 4000 || o.budgets.maxProducersPerPartition != 500 ||
		o.budgets.syncWorkers != 16 || o.budgets.handleIdle != 5*time.Second {
		t.Fatalf("from the environment: %+v, %v", o.budgets, err)
	}
	for _, bad := range [][]string{{"--max-partitions-per-broker", "-1"}, {"--max-producers-per-partition", "0"},
		{"--sync-workers", "0"}, {"--handle-idle", "-1s"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	t.Setenv("KAAS_MAX_PARTITIONS_PER_BROKER", "many")
	if _, err := parseFlags(nil); err == nil {
		t.Errorf("KAAS_MAX_PARTITIONS_PER_BROKER=many accepted")
	}
}
