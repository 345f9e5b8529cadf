package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// The Store is the app's shared rate limiter: a token bucket per queue in one row, refilled
// and taken from in one statement, so every node of the app shares each queue's limit.
var _ core.Limiter = (*Store)(nil)

func (s *Store) bucketsTable() string {
	return pgx.Identifier{s.o.Schema, "txmq_rate_buckets"}.Sanitize()
}

// Take takes up to want start tokens of queue's bucket (see core.RateLimit). It implements
// core.Limiter.
func (s *Store) Take(ctx context.Context, queue string, want int, limit core.RateLimit) (int, time.Duration, error) {
	if s == nil {
		return 0, 0, errNoStore("Take")
	}
	rate := float64(limit.Batches) / limit.Per.Seconds()
	// clock_timestamp(), not now(): now() is when the statement began, before it waited for the
	// row's lock, so a statement that waited would set updated_at back in time and the next one
	// would refill that interval a second time. updated_at never moves back.
	refilled := `least($3::float8, b.tokens + greatest(0, extract(epoch from clock_timestamp() - b.updated_at)) * $4::float8)`
	var got int
	var left float64
	err := s.pool.QueryRow(ctx, `INSERT INTO `+s.bucketsTable()+` AS b (queue, tokens, last_take, updated_at)
		VALUES ($1, $3::float8 - least($2::int, $3::int), least($2::int, $3::int), clock_timestamp())
		ON CONFLICT (queue) DO UPDATE SET
			tokens = `+refilled+` - least($2::int, floor(`+refilled+`)::int),
			last_take = least($2::int, floor(`+refilled+`)::int),
			updated_at = greatest(b.updated_at, clock_timestamp())
		RETURNING last_take, tokens`, queue, want, limit.Burst, rate).Scan(&got, &left)
	if err != nil {
		return 0, 0, fmt.Errorf("txmq outbox: taking rate-limit tokens of queue %q: %w", queue, err)
	}
	if got > 0 {
		return got, 0, nil
	}
	return 0, time.Duration((1 - left) / rate * float64(time.Second)), nil
}

// Return gives back n unused tokens of queue's bucket. It implements core.Limiter.
func (s *Store) Return(ctx context.Context, queue string, n int, limit core.RateLimit) error {
	if s == nil {
		return errNoStore("Return")
	}
	rate := float64(limit.Batches) / limit.Per.Seconds()
	_, err := s.pool.Exec(ctx, `UPDATE `+s.bucketsTable()+` AS b SET
		tokens = least($3::float8, b.tokens + greatest(0, extract(epoch from clock_timestamp() - b.updated_at)) * $4::float8 + $2::int),
		updated_at = greatest(b.updated_at, clock_timestamp()) WHERE queue = $1`, queue, n, limit.Burst, rate)
	if err != nil {
		return fmt.Errorf("txmq outbox: giving back rate-limit tokens of queue %q: %w", queue, err)
	}
	return nil
}
