package states_test

import (
	"path"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// TestRecordNamesFit: a record of any object a legal topic name gives (a
// 249-character topic's partition) is saved, loaded, listed with its full
// object and forgotten on memfs, which refuses names longer than NAME_MAX;
// a record whose name fits keeps the name it always had; and a file that
// holds another object's record is never handed out for this object.
func TestRecordNamesFit(t *testing.T) {
	long := maxTopicName()
	mem := memfs.New()
	objects := []string{"orders/0", long, states.PartitionObject(long, 0), states.PartitionObject(long, 99999)}
	for _, obj := range objects {
		rec := &states.Record{Kind: states.PartitionOpen.Kind, Object: obj, Desired: "serving", State: "pending"}
		if err := states.Save(mem, sweepCluster, rec); err != nil {
			t.Fatalf("save %d-byte object: %v", len(obj), err)
		}
		if base := path.Base(states.RecordPath(sweepCluster, rec.Kind, obj)); len(base) > volume.NameMax {
			t.Fatalf("record name of %q is %d bytes", obj, len(base))
		}
		got, err := states.Load(mem, sweepCluster, rec.Kind, obj)
		if err != nil || got == nil || got.Object != obj {
			t.Fatalf("load %d-byte object: %+v, %v", len(obj), got, err)
		}
	}
	if got := states.RecordPath(sweepCluster, "partition-open", "orders/0"); got != sweepCluster+"/status/partition-open/orders%2F0.json" {
		t.Fatalf("a short object's record moved: %s", got)
	}
	all, err := states.LoadAll(mem, sweepCluster)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(objects) {
		t.Fatalf("LoadAll listed %d records, want %d", len(all), len(objects))
	}
	for _, rec := range all {
		found := false
		for _, obj := range objects {
			found = found || rec.Object == obj
		}
		if !found {
			t.Fatalf("LoadAll listed object %q", rec.Object)
		}
	}
	// Names are not identities: a file under obj's name holding another
	// object's record is refused.
	p := states.RecordPath(sweepCluster, states.PartitionOpen.Kind, states.PartitionObject(long, 0))
	if err := volume.WriteFileAtomic(mem, p, []byte(`{"kind":"partition-open","object":"other/0"}`)); err != nil {
		t.Fatal(err)
	}
	if rec, err := states.Load(mem, sweepCluster, states.PartitionOpen.Kind, states.PartitionObject(long, 0)); err == nil {
		t.Fatalf("loaded another object's record: %+v", rec)
	}
	for _, obj := range objects {
		if err := states.Forget(mem, sweepCluster, states.PartitionOpen.Kind, obj); err != nil {
			t.Fatal(err)
		}
	}
	if all, err := states.LoadAll(mem, sweepCluster); err != nil || len(all) != 0 {
		t.Fatalf("after forgetting: %v, %v", all, err)
	}
}

// TestTrashNamesFit: the trash entry of a topic of any legal length fits
// NAME_MAX and ends in the topic ID; a plain one parses back to topic and
// ID as before, a shortened one to the ID alone (the record and the stamp
// name the topic), and two long topics that share a prefix get different
// entries. PurgeTrashEntry removes an entry by its name.
func TestTrashNamesFit(t *testing.T) {
	long := maxTopicName()
	for _, topic := range []string{"orders", long[:218], long[:219], long} {
		name := path.Base(states.TrashPath(sweepData, topic, sweepTopicID))
		if len(name) > volume.NameMax || !strings.HasSuffix(name, "~"+sweepTopicID) {
			t.Fatalf("trash entry of a %d-character topic: %q (%d bytes)", len(topic), name, len(name))
		}
		gotTopic, id, ok := states.TrashEntry(name)
		wantTopic := topic
		if len(topic)+1+len(sweepTopicID) > volume.NameMax {
			wantTopic = ""
		}
		if !ok || id != sweepTopicID || gotTopic != wantTopic {
			t.Fatalf("TrashEntry(%q) = %q, %q, %v; want %q", name, gotTopic, id, ok, wantTopic)
		}
	}
	if states.TrashPath(sweepData, long, sweepTopicID) == states.TrashPath(sweepData, long[:248]+"x", sweepTopicID) {
		t.Fatal("two long topics share a trash entry")
	}
	mem := memfs.New()
	entry := states.TrashPath(sweepData, long, sweepTopicID)
	if err := volume.MkdirAllSync(mem, path.Join(entry, "0")); err != nil {
		t.Fatal(err)
	}
	if err := states.PurgeTrashEntry(mem, sweepData, path.Base(entry)); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Stat(entry); err == nil {
		t.Fatal("entry left after PurgeTrashEntry")
	}
	if err := states.PurgeTrashEntry(mem, sweepData, "../topics~x"); err == nil {
		t.Fatal("PurgeTrashEntry accepted a path")
	}
}
