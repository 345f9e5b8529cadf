package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
)

// Limits are the app's shared rate limiter, in the store's schema (table txmq_rate_buckets): a
// token bucket per queue in one row, refilled and taken from in one statement, so every node
// of the app shares each queue's limit (txmq.QueueConfig.RateLimit). Limits implements
// core.Limiter (txmq.Open sets NodeOptions.Limiter to it). Get them with Store.Limits. The
// methods of a nil *Limits (a nil Store's) return ErrNoDatabase. Safe for concurrent use. On
// a store of another dialect the buckets are that database's table (ControlDialect).
type Limits struct {
	pool  *pgxpool.Pool
	table string    // quoted
	tab   RateTable // set on a store of another dialect: pool and table are unset
}

var _ core.Limiter = (*Limits)(nil)

// Limits returns the store's shared rate limiter; nil for a nil Store.
func (s *Store) Limits() *Limits {
	if s == nil {
		return nil
	}
	return s.limits
}

// newLimits returns the rate limiter of schema on pool.
func newLimits(pool *pgxpool.Pool, schema string) *Limits {
	return &Limits{pool: pool, table: pgx.Identifier{schema, "txmq_rate_buckets"}.Sanitize()}
}

// Take takes up to want start tokens of queue's bucket (see core.RateLimit). It implements
// core.Limiter.
func (l *Limits) Take(ctx context.Context, queue string, want int, limit core.RateLimit) (int, time.Duration, error) {
	if l == nil {
		return 0, 0, errNoStore("Limits().Take")
	}
	rate := float64(limit.Batches) / limit.Per.Seconds()
	if l.tab != nil {
		got, left, err := l.tab.Take(ctx, queue, want, limit.Burst, rate)
		if err != nil {
			return 0, 0, fmt.Errorf("txmq outbox: taking rate-limit tokens of queue %q: %w", queue, err)
		}
		return tokensTaken(got, left, rate)
	}
	// clock_timestamp(), not now(): now() is when the statement began, before it waited for the
	// row's lock, so a statement that waited would set updated_at back in time and the next one
	// would refill that interval a second time. updated_at never moves back.
	refilled := `least($3::float8, b.tokens + greatest(0, extract(epoch from clock_timestamp() - b.updated_at)) * $4::float8)`
	var got int
	var left float64
	err := l.pool.QueryRow(ctx, `INSERT INTO `+l.table+` AS b (queue, tokens, last_take, updated_at)
		VALUES ($1, $3::float8 - least($2::int, $3::int), least($2::int, $3::int), clock_timestamp())
		ON CONFLICT (queue) DO UPDATE SET
			tokens = `+refilled+` - least($2::int, floor(`+refilled+`)::int),
			last_take = least($2::int, floor(`+refilled+`)::int),
			updated_at = greatest(b.updated_at, clock_timestamp())
		RETURNING last_take, tokens`, queue, want, limit.Burst, rate).Scan(&got, &left)
	if err != nil {
		return 0, 0, fmt.Errorf("txmq outbox: taking rate-limit tokens of queue %q: %w", queue, err)
	}
	return tokensTaken(got, left, rate)
}

// tokensTaken is Take's result for got tokens taken and left in the bucket: none taken, the
// wait until the next whole token at rate a second.
func tokensTaken(got int, left, rate float64) (int, time.Duration, error) {
	if got > 0 {
		return got, 0, nil
	}
	return 0, time.Duration((1 - left) / rate * float64(time.Second)), nil
}

// Return gives back n unused tokens of queue's bucket. It implements core.Limiter.
func (l *Limits) Return(ctx context.Context, queue string, n int, limit core.RateLimit) error {
	if l == nil {
		return errNoStore("Limits().Return")
	}
	rate := float64(limit.Batches) / limit.Per.Seconds()
	if l.tab != nil {
		if err := l.tab.Return(ctx, queue, n, limit.Burst, rate); err != nil {
			return fmt.Errorf("txmq outbox: giving back rate-limit tokens of queue %q: %w", queue, err)
		}
		return nil
	}
	_, err := l.pool.Exec(ctx, `UPDATE `+l.table+` AS b SET
		tokens = least($3::float8, b.tokens + greatest(0, extract(epoch from clock_timestamp() - b.updated_at)) * $4::float8 + $2::int),
		updated_at = greatest(b.updated_at, clock_timestamp()) WHERE queue = $1`, queue, n, limit.Burst, rate)
	if err != nil {
		return fmt.Errorf("txmq outbox: giving back rate-limit tokens of queue %q: %w", queue, err)
	}
	return nil
}
