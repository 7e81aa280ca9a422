package wire

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kaas-dev/kaas/volume/partlog"
)

func TestNoSpaceIsRetriableStorageError(t *testing.T) {
	err := fmt.Errorf("batch 1: %w", fmt.Errorf("%w: data/t/0: append: %w", partlog.ErrNoSpace, syscall.ENOSPC))
	code := errorCode(err)
	if code != kerr.KafkaStorageError.Code || !kerr.IsRetriable(kerr.ErrorForCode(code)) {
		t.Fatalf("code %d, want the retriable KAFKA_STORAGE_ERROR", code)
	}
	if msg := errMessage(err); msg == nil || *msg != err.Error() {
		t.Fatalf("message %v", msg)
	}
}
