package engine

import (
	"path/filepath"
	"testing"

	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

// TestDataLogDir: served partitions with the bytes appended to them,
// filtered by topic; a volume that cannot tell its size answers -1; a
// deleted topic is left out.
func TestDataLogDir(t *testing.T) {
	ctx := safety(t)
	e := startEngine(t, memfs.New())
	for _, name := range []string{"b", "a"} {
		if _, err := e.CreateTopic(CreateTopicRequest{Name: name, Partitions: 2}); err != nil {
			t.Fatal(err)
		}
		mustServing(t, ctx, e.Engine, name)
	}
	var want int64
	for i := range 3 {
		b := partlogtest.MakeBatch(2, 16, int64(1000+i), -1, -1, -1)
		want += int64(len(b))
		if _, err := mustPartition(t, e.Engine, "b", 1).Produce(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	abs, err := filepath.Abs(testData)
	if err != nil {
		t.Fatal(err)
	}
	d := e.DataLogDir(nil)
	if d.Path != abs || d.Space.Total != -1 || d.Space.Usable != -1 {
		t.Fatalf("dir %q space %+v, want %q and -1", d.Path, d.Space, abs)
	}
	wantAll := []LogSize{{"a", 0, 0}, {"a", 1, 0}, {"b", 0, 0}, {"b", 1, want}}
	if len(d.Partitions) != len(wantAll) {
		t.Fatalf("partitions %+v, want %+v", d.Partitions, wantAll)
	}
	for i := range wantAll {
		if d.Partitions[i] != wantAll[i] {
			t.Fatalf("partitions %+v, want %+v", d.Partitions, wantAll)
		}
	}
	if got := e.DataLogDir([]string{"b", "nope", "b"}).Partitions; len(got) != 2 || got[1] != wantAll[3] {
		t.Fatalf("topic b: %+v", got)
	}
	if got := e.DataLogDir([]string{}).Partitions; len(got) != 0 {
		t.Fatalf("no topics: %+v", got)
	}
	spec, err := e.DeleteTopic("a")
	if err != nil {
		t.Fatal(err)
	}
	if !e.WaitDeleted(ctx, "a", spec.ID) {
		t.Fatal("a never deleted")
	}
	if got := e.DataLogDir(nil).Partitions; len(got) != 2 || got[0].Topic != "b" {
		t.Fatalf("after deleting a: %+v", got)
	}
}
