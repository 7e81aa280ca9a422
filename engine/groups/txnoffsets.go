package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// CONTRACT STUB: the helper that owns transactional offset commits
// replaces this file.

// TxnOffsetCommit stores a transaction's offset commits as pending: they
// are durable before the answer but visible to OffsetFetch only once the
// transaction commits (CompleteTxn).
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	return req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
}

// CompleteTxn ends producerID's pending offset commits in every group of
// the shard: on commit they become the committed offsets, on abort they
// are dropped; durable before it returns. With nothing pending it is a
// no-op (a re-sent marker).
func (c *Coordinator) CompleteTxn(ctx context.Context, producerID int64, epoch int16, commit bool) error {
	return nil
}
