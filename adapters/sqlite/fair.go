package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/roundrobin"
)

// Fair share by key (core.FairSharer), as in sqljobs and mysql. A batch's fairness key
// (core.OutgoingBatch.FairKey) is stored with its row (column fair_key, migration 0004; '' on
// other queues) by every publish path (plain, keyed, dedup, unique) and keeps through every
// later change of the row: a retry, a lease, an expired lease, an expedite and the head of an
// ordering key move run_at, never the column. The claim of a fair queue
// (core.QueueSlots.Fair) runs inside the claim's BEGIN IMMEDIATE transaction, which holds the
// file's write lock, so the fair claims of every process take turns with nothing locked row
// by row, and each reads the turn the previous one left:
//
//   - reads the queue's turn (txmq_jobs_fair.last_key: the key of the last row claimed; ''
//     before the first claim);
//   - with a KeyLimit, counts each key's live leases (rows with a lease token and run_at after
//     now, through the claim index) and passes over the keys at their limit;
//   - walks the queue's keys from the one after the turn to the last and then from the first
//     to the turn's own (sqlFairNextKey, sqlFairFirstKey: one probe of (queue, fair_key,
//     run_at, ...) per key, whose first entry is the key's earliest run_at, so it also tells
//     whether the key has a ready row), until it has as many keys with a ready row and room
//     as the claim may take, or has probed fairScanKeys keys;
//   - reads up to each chosen key's room of its ready rows by run_at from that index alone
//     (sqlFairPickKey; the rows are bare and the claim reads the body of those it takes), and
//     takes them round-robin: each key's first row in turn order, then each key's second, ...;
//   - records the key of the last row claimed as the queue's turn.
//
// A claim of one therefore takes the next key's first ready row, so a ready batch waits at
// most one claim per other key with ready rows. A key's room is also cut to what the
// round-robin can give it (the claim's limit less one row for each other chosen key), so a
// claim reads no more rows than it may take. On a queue both Fair and Prioritized
// (core.FairPrioritizer) each key's rows rank by run_at minus lead: its part is then its first
// ready rows by run_at (any priority) and the first ready rows of each priority 1..9
// (sqlFairPickLevel, through the partial (queue, fair_key, priority, run_at, id, lead_us)
// index), ranked and cut to the key's room. Exact: a priority-0 row among the key's best n is
// among its first n by run_at, since every row due before it ranks ahead of it. Fairness
// comes first: the turn picks the key. Ordered queues: only a key's head is ever ready (the
// rows behind it are held), so per-key order comes first.
//
// Cost: one more index entry per row on every queue (and one on the partial index per row of
// a prioritized queue); a fair claim adds the turn's read and write, one probe per key it
// passes (at most fairScanKeys), the chosen keys' index ranges and one read of the taken
// rows' bodies by primary key; a KeyLimit adds one range scan of the queue's live leases.

// fairScanKeys caps the keys one fair claim probes.
const fairScanKeys = 1000

var (
	_ core.FairSharer      = (*Backend)(nil)
	_ core.FairPrioritizer = (*Backend)(nil)
)

// SharesFairly implements core.FairSharer: the jobs table shares claims fairly by key.
func (be *Backend) SharesFairly() error { return nil }

// SharesFairlyByPriority implements core.FairPrioritizer: within each key of a fair queue the
// jobs table ranks rows by run_at minus lead.
func (be *Backend) SharesFairlyByPriority() error { return nil }

// sqlFairTurn reads a fair queue's turn: the key of the last row claimed.
const sqlFairTurn = `SELECT last_key FROM txmq_jobs_fair WHERE queue = :queue`

// sqlFairMove records a fair queue's turn.
const sqlFairMove = `INSERT INTO txmq_jobs_fair (queue, last_key) VALUES (:queue, :key)
ON CONFLICT (queue) DO UPDATE SET last_key = excluded.last_key`

// sqlFairNextKey reads the first index entry of the queue's first key after :after: the key
// and its earliest run_at (the key has a ready row when that is <= now). sqlFairFirstKey does
// the same for the queue's first key.
const (
	sqlFairNextKey = `SELECT fair_key, run_at FROM txmq_jobs INDEXED BY txmq_jobs_fair_idx
WHERE queue = :queue AND fair_key > :after ORDER BY fair_key, run_at LIMIT 1`
	sqlFairFirstKey = `SELECT fair_key, run_at FROM txmq_jobs INDEXED BY txmq_jobs_fair_idx
WHERE queue = :queue AND fair_key >= '' ORDER BY fair_key, run_at LIMIT 1`
)

// sqlFairBusy lists the fairness keys of a queue's live leases, one row per lease, for a
// KeyLimit (counted by the caller: SQLite would group them in a temporary B-tree).
const sqlFairBusy = `SELECT fair_key FROM txmq_jobs INDEXED BY txmq_jobs_claim_idx
WHERE queue = :queue AND run_at > :now AND run_at < 9223372036854775807 AND lease_token IS NOT NULL`

// sqlFairPickKey is one key's part of a fair queue's pick (its index {{i}}): the key's first
// ready rows by run_at, read from txmq_jobs_fair_idx alone. sqlFairPickLevel is one priority
// level ({{p}}, a constant from 1) of one key's part on a fair, prioritized queue. The rows
// are bare: the claim reads the rest of those it takes (sqlPickDetails).
const (
	sqlFairPickKey = `SELECT * FROM (SELECT id, fair_key, run_at, lead_us
FROM txmq_jobs INDEXED BY txmq_jobs_fair_idx
WHERE queue = :queue AND fair_key = :k{{i}} AND run_at <= :now
ORDER BY run_at LIMIT :l{{i}})`
	sqlFairPickLevel = `SELECT * FROM (SELECT id, fair_key, run_at, lead_us
FROM txmq_jobs INDEXED BY txmq_jobs_fair_priority_idx
WHERE queue = :queue AND fair_key = :k{{i}} AND priority > 0 AND priority = {{p}} AND run_at <= :now
ORDER BY run_at LIMIT :l{{i}})`
)

// fairKeyRoom is one key a fair claim reads, with the most rows it may take of it.
type fairKeyRoom struct {
	key  string
	room int
}

// fairQueue reports whether queue was requested as fair.
func (p claimParams) fairQueue(queue string) bool {
	if p.fair == nil {
		return false
	}
	i, ok := slices.BinarySearch(p.queues, queue) // sorted by claimParamsOf
	return ok && p.fair[i]
}

// applyFair picks the rows of each fair queue of p (in queue order, within the request's
// budget: roundrobin.FairFirst; bare, the claim reads their details) and returns p with those
// queues left out of the plain pick and the budget reduced.
func (be *Backend) applyFair(ctx context.Context, tx execer, p claimParams, now int64) (claimParams, []picked, error) {
	if p.fair == nil {
		return p, nil, nil
	}
	limits, budget, rows, err := roundrobin.FairFirst(p.fair, p.limits, p.budget, func(i, n int) ([]picked, error) {
		return pickFair(ctx, tx, p.queues[i], n, p.keyLim[i], p.prio != nil && p.prio[i], now)
	})
	if err != nil {
		return p, nil, err
	}
	p.limits, p.budget = limits, budget
	return p, rows, nil
}

// pickFair returns up to limit of fair queue's ready rows in fair order (see the comment at
// the top of this file), bare; keyLimit > 0 caps each key's live leases; prio ranks each
// key's rows by run_at minus lead.
func pickFair(ctx context.Context, tx execer, queue string, limit, keyLimit int, prio bool, now int64) ([]picked, error) {
	if limit <= 0 {
		return nil, nil
	}
	var last string
	err := tx.QueryRowContext(ctx, sqlFairTurn, sql.Named("queue", queue)).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	var busy map[string]int
	if keyLimit > 0 {
		busy = map[string]int{}
		var k string
		rows, err := tx.QueryContext(ctx, sqlFairBusy, sql.Named("queue", queue), sql.Named("now", now))
		if err := eachRow(rows, err, []any{&k}, func() error { busy[k]++; return nil }); err != nil {
			return nil, err
		}
	}
	keys, err := fairKeys(ctx, tx, queue, last, limit, now, func(k string) int {
		if keyLimit > 0 {
			return min(limit, keyLimit-busy[k])
		}
		return limit
	})
	if err != nil || len(keys) == 0 {
		return nil, err
	}
	for i := range keys { // the round-robin gives a key at most its first round plus what the others leave
		keys[i].room = min(keys[i].room, limit-len(keys)+1)
	}
	all, err := readFairRows(ctx, tx, queue, keys, prio, now)
	if err != nil {
		return nil, err
	}
	pos := make(map[string]int, len(keys))
	for i, k := range keys {
		pos[k.key] = i
	}
	// per key by run_at (minus lead), keys in turn order, each cut to its room (a prioritized
	// key's levels read up to its room each), then round-robin
	all = roundrobin.Order(all, func(c *picked) roundrobin.Row {
		return roundrobin.Row{Lane: pos[c.fairKey], Due: c.runAt - c.lead, ID: c.id}
	}, func(lane int) int { return keys[lane].room })
	return all[:min(len(all), limit)], nil
}

// fairKeys walks queue's keys from the one after last to the end and then from the first to
// last itself, one index probe each, and returns up to want of those with a ready row and a
// positive room (room(key)), in that order; it probes at most fairScanKeys keys.
func fairKeys(ctx context.Context, tx execer, queue, last string, want int, now int64, room func(string) int) ([]fairKeyRoom, error) {
	var out []fairKeyRoom
	after, wrapped, first := last, false, false
	for probes := 0; len(out) < want && probes < fairScanKeys; probes++ {
		stmt, args := sqlFairNextKey, []any{sql.Named("queue", queue), sql.Named("after", after)}
		if first {
			stmt, args = sqlFairFirstKey, args[:1]
		}
		var (
			key   string
			runAt int64
		)
		err := tx.QueryRowContext(ctx, stmt, args...).Scan(&key, &runAt)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if wrapped || first {
				return out, nil
			}
			wrapped, first = true, true // from the queue's first key on
			continue
		case err != nil:
			return nil, err
		}
		first = false
		if wrapped && key > last {
			return out, nil // back past the turn: every key seen once
		}
		after = key
		if runAt > now {
			continue // nothing ready: in flight, delayed or held
		}
		if r := room(key); r > 0 {
			out = append(out, fairKeyRoom{key: key, room: r})
		}
		if wrapped && key == last {
			return out, nil
		}
	}
	return out, nil
}

// fairPart is one part of a fair queue's pick: a key's first ready rows by run_at (level 0)
// or those of one priority level 1..9 of the key.
type fairPart struct {
	key         string
	room, level int
}

// readFairRows reads the ready rows of each of keys, up to its room (and, on a prioritized
// queue, up to its room of each priority 1..9 too), bare, without duplicates.
func readFairRows(ctx context.Context, tx execer, queue string, keys []fairKeyRoom, prio bool, now int64) ([]picked, error) {
	var parts []fairPart
	for _, k := range keys {
		parts = append(parts, fairPart{key: k.key, room: k.room})
		if prio {
			for lvl := core.MinPriority + 1; lvl <= core.MaxPriority; lvl++ {
				parts = append(parts, fairPart{key: k.key, room: k.room, level: lvl})
			}
		}
	}
	var all []picked
	seen := map[int64]bool{} // a prioritized key's first rows by run_at and its levels' overlap
	r := picked{queue: queue, bare: true}
	for chunk := range slices.Chunk(parts, maxPickParts) {
		stmt, args := fairPickStatement(queue, chunk, now)
		rows, err := tx.QueryContext(ctx, stmt, args...)
		err = eachRow(rows, err, []any{&r.id, &r.fairKey, &r.runAt, &r.lead}, func() error {
			if seen[r.id] {
				return nil
			}
			seen[r.id] = true
			c := r
			if !prio {
				c.lead = 0
			}
			all = append(all, c)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return all, nil
}

// fairPickStatement returns the statement joining a fair queue's parts with UNION ALL and its
// arguments.
func fairPickStatement(queue string, parts []fairPart, now int64) (string, []any) {
	stmts := make([]string, len(parts))
	args := make([]any, 0, 2*len(parts)+2)
	for i, pt := range parts {
		s := sqlFairPickKey
		if pt.level > 0 {
			s = strings.ReplaceAll(sqlFairPickLevel, "{{p}}", fmt.Sprint(pt.level))
		}
		stmts[i] = strings.ReplaceAll(s, "{{i}}", fmt.Sprint(i))
		args = append(args, sql.Named(fmt.Sprint("k", i), pt.key), sql.Named(fmt.Sprint("l", i), pt.room))
	}
	return strings.Join(stmts, "\nUNION ALL\n"), append(args, sql.Named("queue", queue), sql.Named("now", now))
}

// moveTurns records, for each fair queue claimed from, the key of its last row claimed.
func moveTurns(ctx context.Context, tx execer, turns map[string]string) error {
	for q, k := range turns {
		if _, err := tx.ExecContext(ctx, sqlFairMove, sql.Named("queue", q), sql.Named("key", k)); err != nil {
			return err
		}
	}
	return nil
}
