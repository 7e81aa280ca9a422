package datametrics

import (
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/volume/partlog"
)

func TestWriteSlotsCollector(t *testing.T) {
	c := NewWriteSlots(partlog.NewWriteSlots(7))
	got := gather(t, c, "kaas_write_slots")
	for _, want := range []string{`kaas_write_slots{state="max"} 7`, `kaas_write_slots{state="held"} 0`, `kaas_write_slots{state="waiting"} 0`} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if got := gather(t, c, "kaas_write_slot_waits_total"); !strings.Contains(got, "kaas_write_slot_waits_total 0") {
		t.Errorf("waits: %s", got)
	}
}
