package states_test

import (
	"testing"
	"time"

	"github.com/kaas-dev/kaas/states"
)

func TestNewRecord(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.FixedZone("x", 3600))
	got := states.PartitionOpen.NewRecord("orders/0", "id-1", "broker-0", now)
	want := states.Record{Kind: "partition-open", Object: "orders/0", Desired: "serving", State: "pending",
		TopicID: "id-1", Since: now.UTC(), Owner: "broker-0"}
	if got.Kind != want.Kind || got.Object != want.Object || got.Desired != want.Desired || got.State != want.State ||
		got.TopicID != want.TopicID || got.Owner != want.Owner || got.Attempts != 0 || got.LastError != "" ||
		got.Epoch != 0 || got.FencedFrom != nil {
		t.Fatalf("NewRecord = %+v, want %+v", *got, want)
	}
	if !got.Since.Equal(now) || got.Since.Location() != time.UTC {
		t.Fatalf("Since = %v, want %v in UTC", got.Since, now)
	}
}
