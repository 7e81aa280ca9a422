package engine

import (
	"testing"

	"github.com/kaas-dev/kaas/engine/quota"
	"github.com/kaas-dev/kaas/volume/memfs"
)

func TestClientQuotasStoreAndReload(t *testing.T) {
	ctx := safety(t)
	fsys := memfs.New()
	e := startEngine(t, fsys)
	if _, _, ok := e.ClientQuota(quota.ProducerByteRate, "alice", "app"); ok {
		t.Fatal("a quota applies before any was set")
	}
	alice := quota.Entity{User: quota.Named("alice")}
	everyone := quota.Entity{User: quota.DefaultPart()}
	steps := []struct {
		name    string
		changes []QuotaChange
		user    string
		limit   float64
		sensor  string
		ok      bool
	}{
		{"set alice", []QuotaChange{{Entity: alice, Key: quota.ProducerByteRate, Value: 1024}}, "alice", 1024, quota.SensorName("alice", ""), true},
		{"set the default", []QuotaChange{{Entity: everyone, Key: quota.ProducerByteRate, Value: 10}}, "bob", 10, quota.SensorName("bob", ""), true},
		{"remove alice", []QuotaChange{{Entity: alice, Key: quota.ProducerByteRate, Remove: true}}, "alice", 10, quota.SensorName("alice", ""), true},
		{"remove the default", []QuotaChange{{Entity: everyone, Key: quota.ProducerByteRate, Remove: true}}, "alice", 0, "", false},
		{"set again", []QuotaChange{{Entity: alice, Key: quota.ProducerByteRate, Value: 7}}, "alice", 7, quota.SensorName("alice", ""), true},
	}
	for _, s := range steps {
		if err := e.AlterClientQuotas(ctx, s.changes); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		limit, sensor, ok := e.ClientQuota(quota.ProducerByteRate, s.user, "app")
		if limit != s.limit || sensor != s.sensor || ok != s.ok {
			t.Errorf("%s: got %v %q %v, want %v %q %v", s.name, limit, sensor, ok, s.limit, s.sensor, s.ok)
		}
	}
	e.stop(t)
	// A broker that starts on the volume loads what is stored.
	e2 := startEngine(t, fsys)
	if limit, _, ok := e2.ClientQuota(quota.ProducerByteRate, "alice", "x"); !ok || limit != 7 {
		t.Errorf("after a restart: %v %v, want 7", limit, ok)
	}
	if n := e2.ClientQuotas().Len(); n != 1 {
		t.Errorf("after a restart: %d entities, want 1", n)
	}
}
