package appdb

import (
	"context"

	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/outbox/sqlread"
)

var _ outbox.InspectDialect = (*Dialect)(nil)

// ListOutbox implements outbox.InspectDialect.
func (d *Dialect) ListOutbox(ctx context.Context, f outbox.OutboxFilter) ([]outbox.OutboxRow, error) {
	return sqlread.ListOutbox(ctx, d.db, outboxTable, f)
}

// Backlog implements outbox.InspectDialect (ages on the machine's clock).
func (d *Dialect) Backlog(ctx context.Context) (map[string]outbox.Backlog, error) {
	return sqlread.Backlog(ctx, d.db, outboxTable, "?", now())
}

// DeadLetterCounts implements outbox.InspectDialect.
func (d *Dialect) DeadLetterCounts(ctx context.Context) (map[string]int64, error) {
	return sqlread.DeadLetterCounts(ctx, d.db, deadTable)
}
