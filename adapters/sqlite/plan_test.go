package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/txmqtest/backendtest"
)

// TestStatementPlans: every statement the Backend runs on its tables is an index access (or a
// primary key access) at 0 and at 10,000 rows (TXMQ_PLAN_ROWS sets other sizes, e.g.
// 0,10000,1000000), with fresh statistics (ANALYZE): EXPLAIN QUERY
// PLAN shows no SCAN of a txmq table (a full table scan, or a full scan of an index) and no
// temporary B-tree for an ORDER BY. The statements name their index (INDEXED BY), so SQLite
// fails to prepare them rather than plan a scan if the index could not be used.
func TestStatementPlans(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	db := w.db(nil)
	now := sql.Named("now", int64(1))
	ids := listArgs("id", []int64{1, 2, 3})
	two := func(part string) string { return parts(part, 2) }
	qArgs := []any{sql.Named("q0", "q"), sql.Named("q1", "r"), sql.Named("l0", 10), sql.Named("l1", 10), now}
	type stmt struct {
		name string
		sql  string
		args []any
	}
	named := func(kv ...any) []any {
		out := []any{now}
		for i := 0; i < len(kv); i += 2 {
			out = append(out, sql.Named(kv[i].(string), kv[i+1]))
		}
		return out
	}
	// a prioritized queue's ten levels and a plain queue, as one claim's pick statement
	prioPick, prioArgs := pickStatement(claimParams{queues: []string{"q", "r"}, limits: []int{10, 10}, prio: []bool{true, false}}.pickParts(), 1)
	// a fair, prioritized queue's parts for two keys (each key's first rows and nine levels)
	var fp []fairPart
	for _, k := range []string{"f1", "f2"} {
		for lvl := range 10 {
			fp = append(fp, fairPart{key: k, room: 5, level: lvl})
		}
	}
	fairPick, fairArgs := fairPickStatement("q", fp, 1)
	stmts := []stmt{
		{"pick", two(sqlPickQueue), qArgs},
		{"pick prioritized", prioPick, prioArgs},
		{"pick details", withList(sqlPickDetails, "id", 3), ids},
		{"running leases", sqlRunning, named("queue", "q", "limit", 5)},
		{"fair turn", sqlFairTurn, named("queue", "q")},
		{"fair move", sqlFairMove, named("queue", "q", "key", "k")},
		{"fair next key", sqlFairNextKey, named("queue", "q", "after", "f1")},
		{"fair first key", sqlFairFirstKey, named("queue", "q")},
		{"fair busy", sqlFairBusy, named("queue", "q")},
		{"fair pick", fairPick, fairArgs},
		{"lease", withList(sqlLease, "id", 3), append(named("token", 7, "node", "n", "until", 1), ids...)},
		{"peek", "SELECT MIN(t.run_at) - :now FROM (" + two(sqlPeekQueue) + ") t", qArgs},
		{"next due", "SELECT MIN(t.run_at) - :now FROM (" + two(sqlNextDueQueue) + ") t", qArgs},
		{"exclusive take", sqlExclusiveTake, named("job", 1, "until", 2, "queue", "q")},
		{"exclusive release", sqlExclusiveRelease, named("queue", "q", "job", 1)},
		{"exclusive extend", sqlExclusiveExtend, named("until", 1, "queue", "q", "job", 1)},
		{"depths", withList(sqlDepths, "q", 2), append(named(), listArgs("q", []string{"q", "r"})...)},
		{"ack one", sqlAckOne, named("id", 1, "token", 2)},
		{"lock rows", withList(sqlLockRows, "id", 3), append(named(), ids...)},
		{"delete rows", withList(sqlDeleteRows, "id", 3), ids},
		{"extend", "UPDATE txmq_jobs SET run_at = CASE id WHEN :e0 THEN :u0 END WHERE id IN (:id0)", named("e0", 1, "u0", 2, "id0", 1)},
		{"retry", sqlRetry, named("body", nil, "inplace", true, "delay", 0, "id", 1, "token", 2)},
		{"key head", sqlKeyHead, named("queue", "q", "key", "k")},
		{"next of key", sqlNextOfKey, named("queue", "q", "key", "k", "id", 1)},
		{"make due", sqlMakeDue, named("id", 1)},
		{"holds key", sqlHoldsKey, named("queue", "q", "key", "k")},
		{"take expired ids", withList(sqlTakeExpiredIDs, "i", 2), append(named("window", 1, "token", 2, "queue", "q"), listArgs("i", []string{"a", "b"})...)},
		{"held ids", withList(sqlHeldIDs, "i", 2), append(named("queue", "q", "token", 1), listArgs("i", []string{"a", "b"})...)},
		{"prune ids", sqlPruneIDs, named("limit", 100)},
		{"unique holder", sqlUniqueHolder, named("queue", "q", "ukey", "u")},
		{"unique replace", sqlUniqueReplace, named("id", 1)},
		{"unique move", sqlUniqueMove, named("queue", "q", "ukey", "u", "batch", "b", "sum", []byte("s"), "until", 1)},
		{"prune unique", sqlPruneUnique, named("limit", 100)},
		{"inspect queues", sqlInspectQueues, nil},
		{"list queues", sqlListQueues, nil},
		{"inspect page", sqlInspectPage, named("queue", "q", "at", 0, "id", 0, "limit", 200)},
		{"inspect find", sqlInspectFind, named("queue", "q", "batch", "b")},
		{"replace body", sqlReplaceBody, named("body", []byte("x"), "id", 1)},
		{"expedite", sqlExpedite, named("body", []byte("x"), "id", 1)},
		{"remove row", sqlRemoveRow, named("id", 1)},
		{"reap queues", sqlReapQueues, named("age", 1)},
		{"reap pick", sqlReapPick, named("queue", "q", "age", 1, "limit", 100)},
		{"reap count", sqlReapCount, named("queue", "q", "age", 1)},
	}
	for _, size := range backendtest.PlanRows(t, 0, 10000) {
		fill(t, db, size)
		for _, st := range stmts {
			for _, bad := range badPlanRows(t, db, st.sql, st.args) {
				t.Errorf("%d rows: statement %q plans a scan: %s\n%s", size, st.name, bad, st.sql)
			}
		}
	}
}

// fill brings the jobs and ids tables to n rows (of 20 queues, a fifth keyed, a third
// leased, priorities 0 to 6, fairness keys f0 to f10) and refreshes their statistics.
func fill(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	ctx := context.Background()
	var have int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM txmq_jobs").Scan(&have); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMicro()
	for have < n {
		chunk := min(5000, n-have)
		var jobs, idRows []string
		for i := range chunk {
			k := have + i
			key := "NULL"
			if k%5 == 0 {
				key = fmt.Sprintf("'k%d'", k%97)
			}
			token := "NULL"
			if k%3 == 0 {
				token = fmt.Sprint(k)
			}
			jobs = append(jobs, fmt.Sprintf("('q%d', 'b%d', x'00', 1, %d, %s, %d, %s, %d, %d, 'f%d')", k%20, k, now+int64(k%1000-500)*1000, token, now, key, k%7, k%7*1000000, k%11))
			idRows = append(idRows, fmt.Sprintf("('q%d', 'i%d', %d, 1)", k%20, k, now+int64(k%1000-500)*1000))
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO txmq_jobs (queue, batch_id, body, messages, run_at, lease_token, created_at, order_key, priority, lead_us, fair_key) VALUES "+strings.Join(jobs, ",")); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO txmq_job_ids (queue, id, expires_at, token) VALUES "+strings.Join(idRows, ",")); err != nil {
			t.Fatal(err)
		}
		have += chunk
	}
	if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
}

// badPlanRows returns the lines of EXPLAIN QUERY PLAN stmt that scan a txmq table or sort
// with a temporary B-tree.
func badPlanRows(t *testing.T, db *sql.DB, stmt string, args []any) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+stmt, args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN %s: %v", stmt, err)
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		if testing.Verbose() {
			t.Logf("%s", detail)
		}
		switch {
		case strings.HasPrefix(detail, "SCAN txmq_"), strings.HasPrefix(detail, "SCAN ") && strings.Contains(detail, "txmq_"):
			if strings.HasPrefix(detail, "SCAN txmq_jobs_queues") {
				continue // the heartbeat table, one row per queue, read whole to list them
			}
			bad = append(bad, detail)
		case strings.Contains(detail, "USE TEMP B-TREE FOR ORDER BY"):
			bad = append(bad, detail)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return bad
}
