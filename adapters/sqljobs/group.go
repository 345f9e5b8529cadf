package sqljobs

import (
	"context"
	"time"

	"github.com/txmq/txmq/core/groupcommit"
)

// group runs concurrent requests of one kind (Ack/Drop deletes, or lease extensions) as one
// statement, the way a database group-commits (package core/groupcommit): a request that
// finds no statement of its kind running goes at once; otherwise it waits up to
// Options.SettleWindow, or until Options.SettleBatch are pending, and they run together.
// Every request learns its own row's outcome from the statement's RETURNING rows. The
// statement runs detached from the callers' cancellation (bounded by QueryTimeout); a caller
// whose ctx ends first returns ctx's error, and the statement's effect on its claim is still
// recorded in the claim's handle.
type group = groupcommit.Group[*groupReq]

// groupReq is one claim's request in a round.
type groupReq struct {
	h     *handle
	lease int64 // µs, extensions only

	ok    bool      // the row matched the id, token and a live lease
	until time.Time // the new lease end, extensions only
}

// newGroup returns a group running exec (which sets each request's ok, and until) with
// QueryTimeout, once more at once when the first failure is retryable, each request's outcome
// reset before each try. Its error is returned unclassified: each caller names its own claim.
func newGroup(be *Backend, exec func(context.Context, []*groupReq) error) *group {
	return groupcommit.New(be.o.SettleWindow, be.o.SettleBatch, func(ctx context.Context, reqs []*groupReq) error {
		return be.attempt(ctx, func(ctx context.Context) error {
			for _, q := range reqs {
				q.ok = false
			}
			return exec(ctx, reqs)
		})
	})
}
