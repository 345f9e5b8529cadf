package sqljobs

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// minTimer is the shortest timer a waiting Fetch arms, so rounding cannot make it spin.
const minTimer = 5 * time.Millisecond

// Fetch claims due batches for the queues in req (normalised: see core.FetchRequest.Normalize)
// in one statement (see the package doc): at most Free of each queue and req.Max in all,
// shared round-robin, and none of an Exclusive queue while any node holds one.
//
// When nothing is claimable and req.Wait > 0 it waits (core.ClaimWait), on the Backend's one
// LISTEN connection, for a publish, retry or exclusive release on one of its queues, and on a
// timer for the next delayed batch or lease end among them; each wake-up claims again. When
// the wait ends with nothing it returns an empty slice without another query (the caller's
// next Fetch claims at once), unless the listener is down, when it polls once more. Without
// a LISTEN connection (Options.PgBouncer and no ListenURL) it claims again every
// Options.PollInterval instead.
//
// The claim statement runs detached from ctx's cancellation (bounded by QueryTimeout), so a
// claim the database made is always returned; cancelling ctx only ends the wait, with what
// was claimed and a nil error.
func (be *Backend) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	if err := be.usable("fetch"); err != nil {
		return nil, err
	}
	req = req.Normalize()
	if len(req.Queues) == 0 || ctx.Err() != nil {
		return []*core.Claim{}, nil
	}
	p := claimParamsOf(req)
	if err := be.heartbeat(ctx, p.queues); err != nil && errors.Is(err, core.ErrBackendUnavailable) {
		return nil, err
	}
	wo := core.WaitOptions{Wait: req.Wait, Done: be.done, MinTimer: minTimer}
	switch {
	case req.Wait <= 0:
	case be.o.polls():
		// No LISTEN through a transaction pooler: claim again every PollInterval.
		wo.Wake = func() <-chan struct{} { return pollTimer(be.o.PollInterval) }
	default:
		w := be.lis.register(p.queues) // before the first claim: no NOTIFY falls in between
		defer be.lis.unregister(w, p.queues)
		wo.Wake = func() <-chan struct{} { return w.ch }
		wo.LastLook = func() bool { return !be.lis.healthy() }
	}
	return core.ClaimWait(ctx, wo, func() ([]*core.Claim, time.Duration, error) { return be.claim(ctx, p) })
}

// pollTimer returns a channel closed after d.
func pollTimer(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(d, func() { close(ch) })
	return ch
}

// claimParams are one Fetch's statement arguments.
type claimParams struct {
	queues []string
	limits []int32
	excl   []bool
	budget int32
	node   string
	lease  int64  // µs
	prio   []bool // the prioritized queues; nil when none is (see priority.go)
	fair   []bool // the fair queues; nil when none is (see fair.go)
	// lim and keyLim are the queues' cluster-wide limits (core.QueueSlots.Limit, KeyLimit);
	// nil when no queue has one (see clusterlimit.go).
	lim, keyLim []int32
}

// limitedAt reports whether the i-th queue has a cluster-wide limit.
func (p claimParams) limitedAt(i int) bool {
	return p.lim != nil && (p.lim[i] > 0 || p.keyLim[i] > 0)
}

// claimParamsOf turns a normalised request into statement arguments (core's ScanLimits:
// queues sorted, so exclusive locks are always taken in the same order and concurrent claims
// cannot deadlock, and each one's scan limit); the queues share req.Max round-robin.
func claimParamsOf(req core.FetchRequest) claimParams {
	qs, limits := req.ScanLimits()
	p := claimParams{
		queues: make([]string, len(qs)),
		limits: make([]int32, len(qs)),
		excl:   make([]bool, len(qs)),
		budget: int32(min(req.Max, math.MaxInt32)),
		node:   req.Node,
		lease:  micros(req.Lease),
	}
	for i, s := range qs {
		p.queues[i], p.excl[i], p.limits[i] = s.Queue, s.Exclusive, int32(min(limits[i], math.MaxInt32))
		if s.Fair {
			if p.fair == nil {
				p.fair = make([]bool, len(qs))
			}
			p.fair[i] = true
		}
		if s.Prioritized {
			if p.prio == nil {
				p.prio = make([]bool, len(qs))
			}
			p.prio[i] = true
		}
		if s.Limit > 0 || s.KeyLimit > 0 {
			if p.lim == nil {
				p.lim, p.keyLim = make([]int32, len(qs)), make([]int32, len(qs))
			}
			p.lim[i], p.keyLim[i] = int32(min(max(s.Limit, 0), math.MaxInt32)), int32(min(max(s.KeyLimit, 0), math.MaxInt32))
		}
	}
	return p
}

// claim runs the claim statement once and returns the claims and how long until the next
// row of the queues becomes claimable (-1 when none is pending). A request with fair queues
// runs sqlClaimFair for each of them first, then the claim of the others with what is left of
// the budget (see fair.go); a queue with a cluster-wide limit gets a claim of its own the same
// way (see clusterlimit.go).
func (be *Backend) claim(ctx context.Context, p claimParams) ([]*core.Claim, time.Duration, error) {
	if p.fair == nil && p.lim == nil {
		return be.claimOnce(ctx, p, false)
	}
	var claims []*core.Claim
	next := time.Duration(-1)
	later := func(d time.Duration) {
		if d >= 0 && (next < 0 || d < next) {
			next = d
		}
	}
	rest := claimParams{budget: p.budget, node: p.node, lease: p.lease}
	for i, q := range p.queues {
		fair := p.fair != nil && p.fair[i]
		if !fair && !p.limitedAt(i) {
			rest.queues, rest.limits, rest.excl = append(rest.queues, q), append(rest.limits, p.limits[i]), append(rest.excl, p.excl[i])
			if p.prio != nil {
				rest.prio = append(rest.prio, p.prio[i])
			}
			continue
		}
		if rest.budget <= 0 {
			continue
		}
		one := claimParams{queues: []string{q}, limits: []int32{p.limits[i]}, excl: []bool{p.excl[i]}, budget: rest.budget, node: p.node, lease: p.lease}
		if p.limitedAt(i) {
			one.lim, one.keyLim = []int32{p.lim[i]}, []int32{p.keyLim[i]}
		}
		if p.prio != nil && p.prio[i] {
			one.prio = []bool{true}
		}
		cs, d, err := be.claimOnce(ctx, one, fair)
		if err != nil {
			if len(claims) > 0 {
				return claims, 0, nil // what was claimed is returned; the next Fetch tries again
			}
			return nil, -1, err
		}
		claims = append(claims, cs...)
		rest.budget -= int32(len(cs))
		later(d)
	}
	if len(rest.queues) > 0 && rest.budget > 0 {
		if !slices.Contains(rest.prio, true) {
			rest.prio = nil
		}
		cs, d, err := be.claimOnce(ctx, rest, false)
		if err != nil {
			if len(claims) > 0 {
				return claims, 0, nil
			}
			return nil, -1, err
		}
		claims = append(claims, cs...)
		later(d)
	}
	if claims == nil {
		claims = []*core.Claim{}
	}
	return claims, next, nil
}

// claimOnce runs one claim statement (sqlClaimFair for one fair queue when fair is set,
// sqlClaimFairPrio when it is also prioritized) and returns the claims and, when there are
// none, how long until the next row of the queues becomes claimable (-1 when it claimed
// some: the statement skips that probe, see sqlClaim).
func (be *Backend) claimOnce(ctx context.Context, p claimParams, fair bool) ([]*core.Claim, time.Duration, error) {
	claims := []*core.Claim{}
	next := time.Duration(-1)
	if len(p.queues) == 0 {
		return claims, next, nil
	}
	err := be.run(context.WithoutCancel(ctx), "fetch", func(ctx context.Context) error {
		claims, next = claims[:0], -1
		limited := p.lim != nil // one queue with a limit (see claim)
		args := []any{p.queues, p.limits, p.excl, p.budget, p.node, p.lease, be.syncCommit(limited || slices.Contains(p.excl, true))}
		stmt := be.sql.claim
		switch {
		case fair && p.prio != nil && limited:
			stmt, args = be.sql.claimFairPrioLimited, append(args, p.lim[0], p.keyLim[0])
		case fair && p.prio != nil:
			stmt = be.sql.claimFairPrio
		case fair && limited:
			stmt, args = be.sql.claimFairLimited, append(args, p.lim[0], p.keyLim[0])
		case fair:
			stmt = be.sql.claimFair
		case p.prio != nil && limited:
			stmt, args = be.sql.claimPrioLimited, append(args, p.prio, p.lim[0])
		case p.prio != nil:
			stmt, args = be.sql.claimPrio, append(args, p.prio)
		case limited:
			stmt, args = be.sql.claimLimited, append(args, p.lim[0])
		}
		var rows pgx.Rows
		var err error
		if limited {
			rows, err = queryLimited(ctx, be.on(be.pool), p.queues[0], stmt, args...)
		} else {
			rows, err = query(ctx, be.on(be.pool), stmt, args...)
		}
		if err != nil {
			return err
		}
		var (
			id, token   *int64
			queue, bid  *string
			key         *string
			body        []byte
			deliveries  *int32
			until       *time.Time
			nextSeconds *float64
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &queue, &bid, &body, &deliveries, &token, &until, &nextSeconds, &key}, func() error {
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
				Handle:     &handle{be: be, id: *id, token: *token, excl: p.lim != nil || p.exclusive(*queue), limited: p.lim != nil, queue: *queue, key: deref(key)},
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
	due := be.hb.Due(queues, time.Now(), be.o.heartbeatInterval())
	if len(due) == 0 {
		return nil
	}
	err := be.run(context.WithoutCancel(ctx), "recording queue heartbeats", func(ctx context.Context) error {
		_, err := be.pool.Exec(ctx, be.sql.heartbeat, due)
		return err
	})
	if err != nil {
		be.hb.Failed(due)
		be.o.Logger.Warn("sqljobs: recording queue heartbeats failed; retried at the next fetch", "queues", len(due), "error", err)
	}
	return err
}

// deref returns *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
