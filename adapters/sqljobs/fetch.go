package sqljobs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// minTimer is the shortest timer a waiting Fetch arms, so rounding cannot make it spin.
const minTimer = 5 * time.Millisecond

// Fetch claims due batches for the queues in req in one statement (see the package doc): at
// most Free of each capped queue, at most one of an Exclusive queue and none while any node
// holds one, and for the Unlimited queues together at most req.Max (Options.FetchLimit when
// req.Max is 0), shared round-robin.
//
// When nothing is claimable and req.Wait > 0 it waits, on the Backend's one LISTEN
// connection, for a publish, retry or exclusive release on one of its queues, and on a timer
// for the next delayed batch or lease end among them; each wake-up claims again. When the
// wait ends with nothing it returns an empty slice without another query (the caller's next
// Fetch claims at once), unless the listener is down, when it polls once more.
//
// The claim statement runs detached from ctx's cancellation (bounded by QueryTimeout), so a
// claim the database made is always returned; cancelling ctx only ends the wait, with what
// was claimed and a nil error.
func (be *Backend) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	if err := be.usable("fetch"); err != nil {
		return nil, err
	}
	if len(req.Queues) == 0 || ctx.Err() != nil {
		return []*core.Claim{}, nil
	}
	p := be.claimParams(req)
	if err := be.heartbeat(ctx, p.queues); err != nil && errors.Is(err, core.ErrBackendUnavailable) {
		return nil, err
	}

	var (
		w        *waiter
		deadline time.Time
		timer    *time.Timer
	)
	if req.Wait > 0 {
		deadline = time.Now().Add(req.Wait)
		w = be.lis.register(p.queues) // before the first claim: no NOTIFY falls in between
		defer be.lis.unregister(w, p.queues)
		defer func() {
			if timer != nil {
				timer.Stop()
			}
		}()
	}
	for {
		claims, next, err := be.claim(ctx, p)
		if err != nil || len(claims) > 0 || req.Wait <= 0 {
			return claims, err
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return claims, nil
		}
		sleep, atDeadline := remaining, true
		if next >= 0 && next < remaining {
			sleep, atDeadline = max(next, minTimer), false
		}
		if timer == nil {
			timer = time.NewTimer(sleep)
		} else {
			timer.Reset(sleep)
		}
		select {
		case <-w.ch:
		case <-timer.C:
			if atDeadline && be.lis.healthy() {
				return claims, nil
			}
			if atDeadline {
				deadline = time.Now() // poll once more, then return
			}
		case <-ctx.Done():
			return claims, nil
		case <-be.done:
			return claims, nil
		}
	}
}

// claimParams are one Fetch's statement arguments.
type claimParams struct {
	queues []string
	limits []int32
	excl   []bool
	budget int32
	node   string
	lease  int64 // µs
}

// claimParams normalises req: queues sorted (exclusive locks are then always taken in the
// same order, so concurrent claims cannot deadlock) and deduplicated, Exclusive queues limited
// to one. Unlimited queues share the budget (req.Max or FetchLimit) round-robin; each one's
// scan may lock up to min(budget, max(2*budget/n, 10)) rows (n Unlimited queues), written as
// a negative limit, so a single busy queue still fills the budget while many busy queues do
// not lock n*budget rows to hand out budget of them.
func (be *Backend) claimParams(req core.FetchRequest) claimParams {
	qs := make([]core.QueueSlots, 0, len(req.Queues))
	seen := make(map[string]bool, len(req.Queues))
	for _, s := range req.Queues {
		if s.Queue == "" || seen[s.Queue] || (s.Free <= 0 && s.Free != core.Unlimited) {
			continue
		}
		seen[s.Queue] = true
		qs = append(qs, s)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Queue < qs[j].Queue })
	p := claimParams{
		queues: make([]string, len(qs)),
		limits: make([]int32, len(qs)),
		excl:   make([]bool, len(qs)),
		node:   req.Node,
	}
	for i, s := range qs {
		p.queues[i] = s.Queue
		p.excl[i] = s.Exclusive
		switch {
		case s.Exclusive:
			p.limits[i] = 1
		case s.Free == core.Unlimited:
			p.limits[i] = -1 // set below
		default:
			p.limits[i] = int32(min(s.Free, math.MaxInt32))
		}
	}
	budget := req.Max
	if budget <= 0 {
		budget = be.o.FetchLimit
	}
	p.budget = int32(min(budget, math.MaxInt32))
	unl := 0
	for _, l := range p.limits {
		if l < 0 {
			unl++
		}
	}
	if unl > 0 {
		per := min(int(p.budget), max((2*int(p.budget)+unl-1)/unl, 10))
		for i, l := range p.limits {
			if l < 0 {
				p.limits[i] = -int32(per)
			}
		}
	}
	lease := req.Lease
	if lease <= 0 {
		lease = be.o.DefaultLease
	}
	p.lease = micros(lease)
	return p
}

// claim runs the claim statement once and returns the claims and how long until the next
// row of the queues becomes claimable (-1 when none is pending).
func (be *Backend) claim(ctx context.Context, p claimParams) ([]*core.Claim, time.Duration, error) {
	claims := []*core.Claim{}
	next := time.Duration(-1)
	if len(p.queues) == 0 {
		return claims, next, nil
	}
	err := be.run(context.WithoutCancel(ctx), "fetch", func(ctx context.Context) error {
		claims, next = claims[:0], -1
		rows, err := query(ctx, be.pool, be.sql.claim, p.queues, p.limits, p.excl, p.budget, p.node, p.lease, be.syncCommit(slices.Contains(p.excl, true)))
		if err != nil {
			return err
		}
		var (
			id, token   *int64
			queue, bid  *string
			body        []byte
			deliveries  *int32
			until       *time.Time
			nextSeconds *float64
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &queue, &bid, &body, &deliveries, &token, &until, &nextSeconds}, func() error {
			if id == nil {
				if nextSeconds != nil {
					next = max(0, time.Duration(*nextSeconds*float64(time.Second)))
				}
				return nil
			}
			claims = append(claims, &core.Claim{
				Queue:      *queue,
				ID:         *bid,
				Body:       append([]byte(nil), body...),
				Deliveries: int(*deliveries),
				LeaseUntil: *until,
				Handle:     &handle{be: be, id: *id, token: *token, excl: p.exclusive(*queue)},
			})
			return nil
		})
		return err
	})
	if err != nil {
		return nil, -1, err
	}
	return claims, next, nil
}

// exclusive reports whether queue was requested as Exclusive.
func (p claimParams) exclusive(queue string) bool {
	i, ok := slices.BinarySearch(p.queues, queue) // sorted by claimParams
	return ok && p.excl[i]
}

// heartbeat records, at most every heartbeatInterval per queue, that this Backend fetched
// the queues, for the reaper. A failure is logged, returned, and tried again at the next
// Fetch.
func (be *Backend) heartbeat(ctx context.Context, queues []string) error {
	now := time.Now()
	every := be.o.heartbeatInterval()
	be.hbMu.Lock()
	var due []string
	for _, q := range queues {
		if now.Sub(be.hb[q]) >= every {
			due = append(due, q)
			be.hb[q] = now
		}
	}
	be.hbMu.Unlock()
	if len(due) == 0 {
		return nil
	}
	err := be.run(context.WithoutCancel(ctx), "recording queue heartbeats", func(ctx context.Context) error {
		_, err := be.pool.Exec(ctx, be.sql.heartbeat, due)
		return err
	})
	if err != nil {
		be.hbMu.Lock()
		for _, q := range due {
			delete(be.hb, q)
		}
		be.hbMu.Unlock()
		be.o.Logger.Warn("sqljobs: recording queue heartbeats failed; retried at the next fetch", "queues", len(due), "error", err)
	}
	return err
}

// describe names a claim in errors.
func describe(c *core.Claim) string {
	if c == nil {
		return "nil claim"
	}
	return fmt.Sprintf("batch %s of queue %q", c.ID, c.Queue)
}
