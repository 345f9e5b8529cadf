package redis

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
)

var _ core.BatchInspector = (*Backend)(nil)

// inspectPage is how many batches one HSCAN page of InspectBatches reads.
const inspectPage = 200

// InspectBatches implements core.BatchInspector, for looking messages up without a ledger: it
// calls fn for each batch of the named queues (every queue under the prefix when queues is
// nil, found with SCAN on every master), reading each queue's body hash with HSCAN in pages
// and each page's due time, lease end, deliveries and held due time in one pipeline, against
// the server's TIME. A batch held behind the head of its ordering key (in no set, see
// ordering.go) is reported delayed, as Depths counts it, with its own due time when that is
// still ahead. It reads a moving queue: a batch settled meanwhile may be missed or reported in
// its old state. It is an operator's tool, not for the hot path. Cancel and run now without a
// ledger are ReplaceBatch and ExpediteBatch (edit.go).
func (be *Backend) InspectBatches(ctx context.Context, queues []string, fn func(core.StoredBatch) bool) error {
	if err := be.usable("inspect batches", ""); err != nil {
		return err
	}
	if queues == nil {
		var err error
		if queues, err = be.queueNames(ctx); err != nil {
			return be.wrap("listing queues", err)
		}
	}
	now, err := be.rdb.Time(ctx).Result()
	if err != nil {
		return be.wrap("inspect batches: TIME", err)
	}
	nowMS := float64(now.UnixMilli())
	for _, q := range queues {
		k := be.keys.keys(q).script // due, body, lease, dlv, ...
		var cursor uint64
		for {
			kv, next, err := be.rdb.HScan(ctx, k[1], cursor, "*", inspectPage).Result()
			if err != nil {
				return be.wrap(fmt.Sprintf("inspect batches of queue %q", q), err)
			}
			ids := make([]string, 0, len(kv)/2)
			for i := 0; i+1 < len(kv); i += 2 {
				ids = append(ids, kv[i])
			}
			if len(ids) > 0 {
				pipe := be.rdb.Pipeline()
				due := pipe.ZMScore(ctx, k[0], ids...)
				lease := pipe.ZMScore(ctx, k[2], ids...)
				dlv := pipe.HMGet(ctx, k[3], ids...)
				hdue := pipe.HMGet(ctx, k[7], ids...) // held behind their ordering key's head
				lead := pipe.HMGet(ctx, k[8], ids...) // a prioritized batch's score is due - lead
				if _, err := pipe.Exec(ctx); err != nil && err != goredis.Nil {
					return be.wrap(fmt.Sprintf("inspect batches of queue %q", q), err)
				}
				dues, leases, dlvs, helds := due.Val(), lease.Val(), dlv.Val(), hdue.Val()
				for i, v := range lead.Val() {
					if s, ok := v.(string); ok && i < len(dues) && dues[i] > 0 {
						ms, _ := strconv.ParseFloat(s, 64)
						dues[i] += ms
					}
				}
				for i, id := range ids {
					b := core.StoredBatch{Queue: q, ID: id, Body: []byte(kv[2*i+1]), State: core.BatchReady}
					if i < len(dlvs) {
						if s, ok := dlvs[i].(string); ok {
							n, _, _ := strings.Cut(s, ":") // "<n>:<token base>" while leased
							b.Deliveries, _ = strconv.Atoi(n)
						}
					}
					switch {
					case i < len(leases) && leases[i] > nowMS:
						b.State = core.BatchInFlight
					case i < len(dues) && dues[i] > nowMS:
						b.State, b.Due = core.BatchDelayed, time.UnixMilli(int64(dues[i]))
					case i < len(helds) && helds[i] != nil:
						b.State = core.BatchDelayed
						if s, ok := helds[i].(string); ok {
							if ms, err := strconv.ParseFloat(s, 64); err == nil && ms > nowMS {
								b.Due = time.UnixMilli(int64(ms))
							}
						}
					}
					if !fn(b) {
						return nil
					}
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return nil
}

// queueNames finds the queues with stored batches under the prefix: SCAN for their body
// hashes on every master.
func (be *Backend) queueNames(ctx context.Context) ([]string, error) {
	head := "{" + be.keys.prefix + ":"
	var (
		mu   sync.Mutex // ForEachMaster scans the masters at once
		seen = map[string]bool{}
	)
	scan := func(ctx context.Context, c goredis.Cmdable) error {
		it := c.Scan(ctx, 0, head+"*}:body", 500).Iterator()
		for it.Next(ctx) {
			name := strings.TrimSuffix(strings.TrimPrefix(it.Val(), head), "}:body")
			mu.Lock()
			seen[name] = true
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	if cc, ok := be.rdb.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, be.rdb)
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(seen))
	for q := range seen {
		out = append(out, q)
	}
	sort.Strings(out)
	return out, nil
}
