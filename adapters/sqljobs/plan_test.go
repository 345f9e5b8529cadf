package sqljobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/txmqtest/backendtest"
)

// planCase is one statement of the adapter with literal arguments for EXPLAIN EXECUTE.
type planCase struct {
	name string
	sql  func(s statements) string
	args string // the EXECUTE argument list, SQL literals
}

// planCases lists every statement that touches the jobs table (publish is a plain INSERT and
// the heartbeat touches the queues table only; the keyed publish reads the table first; the
// grouped publish inserts from its arrays and must read nothing of the table).
var planCases = []planCase{
	{"claim_capped", func(s statements) string { return s.claim },
		`'{q1,q2}'::text[], '{1,5}'::int[], '{f,f}'::bool[], 100, 'node', 30000000, 'off'`},
	{"claim_unlimited", func(s statements) string { return s.claim },
		`'{q1,q2,q3}'::text[], '{-67,-67,-67}'::int[], '{f,f,f}'::bool[], 100, 'node', 30000000, NULL`},
	{"claim_exclusive", func(s statements) string { return s.claim },
		`'{q1}'::text[], '{1}'::int[], '{t}'::bool[], 100, 'node', 30000000, NULL`},
	{"claim_prioritized", func(s statements) string { return s.claimPrio },
		`'{q1,q2}'::text[], '{1,5}'::int[], '{f,f}'::bool[], 100, 'node', 30000000, 'off', '{t,f}'::bool[]`},
	{"claim_prioritized_exclusive", func(s statements) string { return s.claimPrio },
		`'{q1}'::text[], '{1}'::int[], '{t}'::bool[], 100, 'node', 30000000, NULL, '{t}'::bool[]`},
	{"claim_fair", func(s statements) string { return s.claimFair },
		`'{q1}'::text[], '{5}'::int[], '{f}'::bool[], 100, 'node', 30000000, 'off'`},
	{"claim_fair_exclusive", func(s statements) string { return s.claimFair },
		`'{q1}'::text[], '{1}'::int[], '{t}'::bool[], 100, 'node', 30000000, NULL`},
	{"claim_fair_prioritized", func(s statements) string { return s.claimFairPrio },
		`'{q1}'::text[], '{5}'::int[], '{f}'::bool[], 100, 'node', 30000000, 'off'`},
	{"claim_fair_prioritized_exclusive", func(s statements) string { return s.claimFairPrio },
		`'{q1}'::text[], '{1}'::int[], '{t}'::bool[], 100, 'node', 30000000, NULL`},
	{"claim_fair_prioritized_key_limited", func(s statements) string { return s.claimFairPrioLimited },
		`'{q1}'::text[], '{5}'::int[], '{f}'::bool[], 100, 'node', 30000000, NULL, 3, 2`},
	{"claim_limited", func(s statements) string { return s.claimLimited },
		`'{q1}'::text[], '{5}'::int[], '{f}'::bool[], 100, 'node', 30000000, NULL, 3`},
	{"claim_prioritized_limited", func(s statements) string { return s.claimPrioLimited },
		`'{q1}'::text[], '{5}'::int[], '{f}'::bool[], 100, 'node', 30000000, NULL, '{t}'::bool[], 3`},
	{"claim_fair_limited", func(s statements) string { return s.claimFairLimited },
		`'{q1}'::text[], '{5}'::int[], '{f}'::bool[], 100, 'node', 30000000, NULL, 3, 0`},
	{"claim_fair_key_limited", func(s statements) string { return s.claimFairLimited },
		`'{q1}'::text[], '{5}'::int[], '{f}'::bool[], 100, 'node', 30000000, NULL, 0, 2`},
	{"extend", func(s statements) string { return s.extend },
		`'{1,2,3}'::bigint[], '{7,8,9}'::bigint[], '{30000000,30000000,30000000}'::bigint[], 'off'`},
	{"ack", func(s statements) string { return s.ack },
		`'{1,2,3}'::bigint[], '{7,8,9}'::bigint[], 'chan', 'off'`},
	{"retry", func(s statements) string { return s.retry },
		`1, 7, NULL::bytea, 1000000, 'chan'`},
	{"depths", func(s statements) string { return s.depths }, `'{q1,q2}'::text[]`},
	{"reap_queues", func(s statements) string { return s.reapQueues }, `3600000000`},
	{"reap_pick", func(s statements) string { return s.reapPick }, `'q1', 3600000000, 100`},
	{"reap_delete", func(s statements) string { return s.reapDelete }, `'{1,2,3}'::bigint[]`},
	{"reap_count", func(s statements) string { return s.reapCount }, `'q1', 3600000000`},
	{"publish_many", func(s statements) string { return s.publishMany },
		`'{q1,q2,q1}'::text[], '{b1,b2,b3}'::text[], '{"\\x7b7d","\\x7b7d","\\x7b7d"}'::bytea[], '{0,1000000,0}'::bigint[], '{1,1,2}'::int[], '{0,3,0}'::smallint[], '{0,3000000,0}'::bigint[], '{"",t1,""}'::text[], 'chan'`},
	{"publish_keyed", func(s statements) string { return s.publishKeyed },
		`'q1', 'b', '\x7b7d'::bytea, 0, 1, 'chan', 'k7', 0, 0, ''`},
	{"publish_keyed_delayed", func(s statements) string { return s.publishKeyed },
		`'q1', 'b', '\x7b7d'::bytea, 1000000, 1, 'chan', 'k7', 0, 0, ''`},
	{"ack_keyed", func(s statements) string { return s.ackKeyed }, `'{1,2,3}'::bigint[], '{7,8,9}'::bigint[], 'chan'`},
	{"inspect_queues", func(s statements) string { return s.inspectQueues }, ``},
	{"inspect_page", func(s statements) string { return s.inspectPage }, `'q1', '-infinity'::timestamptz, 0, 200`},
	{"expedite", func(s statements) string { return s.expedite }, `1, '\x7b7d'::bytea, 'chan'`},
	{"inspect_find", func(s statements) string { return s.inspectFind }, `'q1', 'b77'`},
	{"replace_body", func(s statements) string { return s.replaceBody }, `1, '\x7b7d'::bytea`},
	{"remove_unclaimed", func(s statements) string { return s.removeUnclaimed }, `1, 'chan'`},
	{"holds_key", func(s statements) string { return s.holdsKey }, `'q1', 'k7'`},
	{"hold_ids", func(s statements) string { return s.holdIDs }, `'q1', '{a,b}'::text[], 1000000`},
	{"prune_ids", func(s statements) string { return s.pruneIDs }, `100`},
	{"unique_take", func(s statements) string { return s.uniqueTake }, `'q1', 'u7', 'b'`},
	{"unique_holder", func(s statements) string { return s.uniqueHolder }, `'q1', 'u7'`},
	{"unique_move", func(s statements) string { return s.uniqueMove }, `'q1', 'u7', 'b', 0, '\x7b7d'::bytea`},
	{"unique_replace", func(s statements) string { return s.uniqueReplace }, `7`},
	{"prune_unique", func(s statements) string { return s.pruneUnique }, `100`},
}

// fill adds rows to the world's jobs table: of every 10, 6 ready, 2 delayed and 2 in flight,
// spread over 20 queues, q1 holding half of them (a skewed, realistic distribution); a third
// of the rows have one of 997 ordering keys, a fifth one of 50 fairness keys, a seventh a
// priority 0..9 (lead a minute per level).
func (w *world) fill(ctx context.Context, rows int) {
	w.t.Helper()
	if rows == 0 {
		return
	}
	_, err := w.admin.Exec(ctx, fmt.Sprintf(`
INSERT INTO %[1]s.txmq_jobs (queue, batch_id, body, messages, deliveries, run_at, lease_owner, lease_token, order_key, fair_key, priority, lead_us)
SELECT CASE WHEN g %% 2 = 0 THEN 'q1' ELSE 'q' || (g %% 20) END,
	'b' || g, '\x7b7d'::bytea, 1,
	CASE WHEN g %% 10 >= 8 THEN 1 ELSE 0 END,
	CASE WHEN g %% 10 < 6 THEN now() - interval '1 minute'
		ELSE now() + interval '10 minutes' END,
	CASE WHEN g %% 10 >= 8 THEN 'node' END,
	CASE WHEN g %% 10 >= 8 THEN g END,
	CASE WHEN g %% 3 = 0 THEN 'k' || (g %% 997) END,
	CASE WHEN g %% 5 = 0 THEN 't' || (g %% 50) ELSE '' END,
	CASE WHEN g %% 7 = 0 THEN g %% 10 ELSE 0 END,
	CASE WHEN g %% 7 = 0 THEN (g %% 10) * 1000000 ELSE 0 END
FROM generate_series(1, %[2]d) AS g`, pgx.Identifier{w.schema}.Sanitize(), rows))
	if err != nil {
		w.t.Fatalf("filling %d rows: %v", rows, err)
	}
}

// usesIndex reports whether a node of plan reads index name.
func usesIndex(plan any, name string) bool {
	switch n := plan.(type) {
	case map[string]any:
		if n["Index Name"] == name {
			return true
		}
		for _, v := range n {
			if usesIndex(v, name) {
				return true
			}
		}
	case []any:
		for _, v := range n {
			if usesIndex(v, name) {
				return true
			}
		}
	}
	return false
}

// seqScans returns the plan nodes that read the whole jobs table: a sequential scan, or an
// index scan without an index condition (a walk of the whole index).
func seqScans(plan any, table string) []string {
	var found []string
	var walk func(v any, parent any)
	walk = func(v any, parent any) {
		switch n := v.(type) {
		case map[string]any:
			if n["Relation Name"] == table {
				switch typ := n["Node Type"]; typ {
				case "Seq Scan":
					found = append(found, fmt.Sprintf("Seq Scan on %s (rows %v, cost %v)", table, n["Plan Rows"], n["Total Cost"]))
				case "Index Scan", "Index Only Scan":
					// Without a condition the scan walks the whole index, unless a Limit
					// above it stops at the first entries (reap_queues' skip scan).
					if _, ok := n["Index Cond"]; !ok && parent != "Limit" {
						found = append(found, fmt.Sprintf("%s of all of %v on %s (no index condition)", typ, n["Index Name"], table))
					}
				}
			}
			for _, c := range n {
				walk(c, n["Node Type"])
			}
		case []any:
			for _, c := range n {
				walk(c, parent)
			}
		}
	}
	walk(plan, nil)
	return found
}

// outline renders a JSON plan as one line per node: type, relation, index.
func outline(v any, indent string) string {
	var b strings.Builder
	switch n := v.(type) {
	case map[string]any:
		if typ, ok := n["Node Type"]; ok {
			fmt.Fprintf(&b, "%s%v", indent, typ)
			for _, k := range []string{"Relation Name", "Index Name", "Subplan Name", "CTE Name", "Join Type"} {
				if x, ok := n[k]; ok {
					fmt.Fprintf(&b, " %s=%v", k, x)
				}
			}
			b.WriteString("\n")
			indent += "  "
		}
		for k, c := range n {
			if k == "Plan" || k == "Plans" {
				b.WriteString(outline(c, indent))
			}
		}
	case []any:
		for _, c := range n {
			b.WriteString(outline(c, indent))
		}
	}
	return b.String()
}

// TestStatementPlans EXPLAINs every jobs-table statement after ANALYZE at several table
// sizes, with custom and generic plans (pgx prepares statements, so Postgres may switch to a
// generic plan after five executions), and fails when one reads the jobs table sequentially.
// TXMQ_PLAN_ROWS (comma-separated) overrides the sizes, e.g. 0,10000,1000000,5000000.
func TestStatementPlans(t *testing.T) {
	t.Parallel()
	sizes := backendtest.PlanRows(t, 0, 10_000, 100_000)
	type scenario struct {
		name  string
		rows  int
		stale bool // ANALYZE while empty, then fill: statistics that say "empty"
	}
	var scenarios []scenario
	for _, n := range sizes {
		scenarios = append(scenarios, scenario{strconv.Itoa(n), n, false})
	}
	scenarios = append(scenarios, scenario{"stale-" + strconv.Itoa(sizes[len(sizes)-1]), sizes[len(sizes)-1], true})
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			w := newWorld(t)
			analyze := "ANALYZE " + pgx.Identifier{w.schema, "txmq_jobs"}.Sanitize()
			if !sc.stale {
				w.fill(ctx, sc.rows)
			}
			if _, err := w.admin.Exec(ctx, analyze); err != nil {
				t.Fatal(err)
			}
			if sc.stale {
				w.fill(ctx, sc.rows)
			}
			st := render(w.schema)
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				for _, pc := range planCases {
					plan := explainGuarded(t, w, mode, pc.sql(st), pc.args)
					bad := append(seqScans(plan, "txmq_jobs"), seqScans(plan, "txmq_job_ids")...)
					if bad = append(bad, seqScans(plan, "txmq_jobs_unique")...); len(bad) > 0 {
						t.Errorf("%s (%s rows, %s) plans %s:\n%s", pc.name, sc.name, mode, strings.Join(bad, ", "), outline(plan, ""))
					}
					// The levels above the lowest are read through the partial priority index
					// (migration 0008): the statement must let the planner prove its predicate.
					if strings.HasPrefix(pc.name, "claim_prioritized") && !usesIndex(plan, "txmq_jobs_raised_idx") {
						t.Errorf("%s (%s rows, %s) does not read txmq_jobs_raised_idx:\n%s", pc.name, sc.name, mode, outline(plan, ""))
					}
				}
			}
		})
	}
}

// explainGuarded EXPLAINs one statement the way the adapter runs it: in a transaction that
// ran sqlPlanGuard first, with plan_cache_mode set to mode.
func explainGuarded(t *testing.T, w *world, mode, sql, args string) any {
	t.Helper()
	ctx := context.Background()
	tx, err := w.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, s := range []string{sqlPlanGuard, "SET LOCAL plan_cache_mode = " + mode, "PREPARE txmq_plan AS " + sql} {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	var out []byte
	exec := "EXECUTE txmq_plan"
	if args != "" {
		exec += "(" + args + ")"
	}
	if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+exec).Scan(&out); err != nil {
		t.Fatalf("EXPLAIN: %v\n%s", err, sql)
	}
	if _, err := tx.Exec(ctx, "DEALLOCATE txmq_plan"); err != nil {
		t.Fatal(err)
	}
	var plan any
	if err := json.Unmarshal(out, &plan); err != nil {
		t.Fatal(err)
	}
	return plan
}
