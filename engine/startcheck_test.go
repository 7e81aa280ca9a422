package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// TestSecondProcessWithSameBrokerID: a second engine for a running
// broker's ID is refused by its start check; one that got past it (both
// started at once, nobody's heartbeat there yet) meets the first in the
// heartbeat file, and exactly one of the two stops with a
// SupplantedError, without writing a leaving mark over the other's file,
// while the other keeps beating. No fence fight.
func TestSecondProcessWithSameBrokerID(t *testing.T) {
	ctx := safety(t)
	fsys := memfs.New()
	cfg := Config{FS: fsys, DataDir: testData, ClusterDir: testCluster, BrokerID: 3,
		HeartbeatInterval: 10 * time.Millisecond, Lease: 200 * time.Millisecond}
	first := startWith(t, cfg)
	poll(t, ctx, "first heartbeat", func() error {
		_, err := cluster.ReadHeartbeat(fsys, testCluster, 3)
		return err
	})

	second, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var running *cluster.AlreadyRunningError
	if err := second.StartCheck(ctx); !errors.As(err, &running) || running.Incarnation != first.incarnation {
		t.Fatalf("start check of a second engine: %v, want AlreadyRunningError naming %s", err, first.incarnation)
	}
	if err := second.Run(ctx); !errors.As(err, &running) {
		t.Fatalf("Run of a second engine: %v, want AlreadyRunningError", err)
	}

	// As if its start check had seen no heartbeat: started at the same time.
	third, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	third.guard.checked = true
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	thirdDone := make(chan error, 1)
	go func() { thirdDone <- third.Run(tctx) }()

	var se *cluster.SupplantedError
	var survivor *Engine
	select {
	case err := <-first.done:
		first.cancel = nil // Run returned
		if !errors.As(err, &se) {
			t.Fatalf("first stopped with %v, want SupplantedError", err)
		}
		survivor = third
	case err := <-thirdDone:
		if !errors.As(err, &se) {
			t.Fatalf("third stopped with %v, want SupplantedError", err)
		}
		survivor = first.Engine
	case <-ctx.Done():
		t.Fatal("two engines with broker ID 3 ran side by side")
	}
	if se.Other != survivor.incarnation {
		t.Fatalf("stopped for incarnation %s, survivor is %s", se.Other, survivor.incarnation)
	}
	// The survivor owns the file and beats on.
	hb, err := cluster.ReadHeartbeat(fsys, testCluster, 3)
	if err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "the survivor beating on", func() error {
		now, err := cluster.ReadHeartbeat(fsys, testCluster, 3)
		switch {
		case err != nil:
			return err
		case now.Incarnation != survivor.incarnation || now.Leaving:
			return errors.New("the heartbeat file is not the survivor's")
		case now.Counter < hb.Counter+5:
			return errors.New("not advanced yet")
		}
		return nil
	})
	if survivor == third {
		cancel()
		if err := <-thirdDone; err != nil {
			t.Fatalf("survivor stopped with %v", err)
		}
	}
}
