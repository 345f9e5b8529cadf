package redis

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/txmq/txmq/core"
)

// Redis's proto-max-bulk-len: its default, and the smallest value the server accepts.
const (
	defaultBulkLimit = 512 << 20
	minBulkLimit     = 1 << 20
)

var _ core.SizeLimiter = (*Backend)(nil)

// sizeLimit is the largest batch body the server accepts: fixed by Options.MaxBatchBytes, or
// learned from the server's proto-max-bulk-len.
type sizeLimit struct {
	fixed   bool
	bytes   atomic.Int64
	learned atomic.Bool
	mu      sync.Mutex // one CONFIG GET at a time
}

func (l *sizeLimit) init(option int) {
	if option > 0 {
		l.fixed = true
		l.bytes.Store(int64(option))
		return
	}
	l.bytes.Store(defaultBulkLimit)
}

// MaxBatchBytes returns the largest batch body the server accepts: Options.MaxBatchBytes, or
// the server's proto-max-bulk-len once read (512 MB until then). It implements
// core.SizeLimiter.
func (be *Backend) MaxBatchBytes() int { return int(be.limit.bytes.Load()) }

// learnLimit reads the server's proto-max-bulk-len once, unless Options.MaxBatchBytes fixed
// it. A server that refuses CONFIG (ACL, renamed command) leaves the default in place for good;
// an unreachable one is asked again next time.
func (be *Backend) learnLimit(ctx context.Context) {
	l := &be.limit
	if l.fixed || l.learned.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.learned.Load() {
		return
	}
	v, err := be.serverLimit(ctx)
	switch {
	case err != nil && unavailable(err):
		return
	case err != nil:
		be.log.Debug("txmq/redis: cannot read proto-max-bulk-len (CONFIG GET refused); assuming Redis's default, set Options.MaxBatchBytes to the server's value", "error", err)
	case v > 0:
		l.bytes.Store(v)
	}
	l.learned.Store(true)
}

// serverLimit asks the server for its proto-max-bulk-len; 0 when it does not say.
func (be *Backend) serverLimit(ctx context.Context) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, be.callTimeout)
	defer cancel()
	vals, err := be.rdb.ConfigGet(cctx, "proto-max-bulk-len").Result()
	if err != nil {
		return 0, err
	}
	v, _ := strconv.ParseInt(vals["proto-max-bulk-len"], 10, 64)
	return max(v, 0), nil
}

// checkSize refuses a body over the limit (learned from the server first) with an error
// wrapping core.ErrRejected, before anything is sent.
func (be *Backend) checkSize(ctx context.Context, what string, size int) error {
	be.learnLimit(ctx)
	if limit := be.MaxBatchBytes(); size > limit {
		return tooLarge(what, size, int64(limit))
	}
	return nil
}

// recheckSize runs after a publish of size bytes failed like an outage: Redis closes the
// connection of a command over its proto-max-bulk-len, which the client sees as a reset. When
// the server answers and its limit is below size, that was a refusal, not an outage: the
// error wraps core.ErrRejected (and the limit is kept unless Options fixed it). Otherwise nil.
func (be *Backend) recheckSize(ctx context.Context, what string, size int) error {
	v, err := be.serverLimit(ctx)
	if err != nil || v <= 0 || int64(size) <= v {
		return nil
	}
	if !be.limit.fixed {
		be.limit.bytes.Store(v)
		be.limit.learned.Store(true)
	}
	return tooLarge(what, size, v)
}

func tooLarge(what string, size int, limit int64) error {
	return fmt.Errorf("redis: %s: the batch is %d bytes, over the server's limit of %d bytes (proto-max-bulk-len); it can never be stored as is: %w; raise proto-max-bulk-len on the server, or lower core's NodeOptions.MaxBatchBytes/MaxMessageBytes",
		what, size, limit, core.ErrRejected)
}
