package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/txmq/txmq/txmqtest/backendtest"
)

// TestStatementPlans: every statement the Backend runs on its tables is an index access
// (or a primary key access) at 0 and at 10,000 rows (TXMQ_PLAN_ROWS sets other sizes, e.g.
// 0,10000,1000000), with fresh statistics: EXPLAIN shows no
// full table scan (type ALL) and no full index scan (type index), except the loose index scan
// that lists a table's queues ("Using index for group-by"). The statements name their index
// (FORCE INDEX), so this holds whatever the statistics say; without the hints MariaDB picks a
// full scan of the covering claim index for a lookup by primary key, which locks every row it
// reads.
func TestStatementPlans(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	_, _, cfg, err := parseConfig(w.u)
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = true // EXPLAIN with the statement's arguments inlined
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	s := renderAll(w.schema)
	ids := []any{int64(1), int64(2), int64(3)}
	twoQueues := func(part string, args ...any) (string, []any) {
		return part + "\nUNION ALL\n" + part, append(append([]any{}, args...), args...)
	}
	type stmt struct {
		name string
		sql  string
		args []any
	}
	pick, pickArgs := twoQueues(s.pickQueue, "q", 10)
	next, nextArgs := twoQueues(s.nextDueQueue, "q")
	level, levelArgs := twoQueues(s.pickLevel, "q", 9, 10)
	pickKey, pickKeyArgs := twoQueues(s.pickKey, "q", "k1", 10)
	pickKeyLevel, pickKeyLevelArgs := twoQueues(s.pickKeyLevel, "q", "k1", 9, 10)
	stmts := []stmt{
		{"pick", pick, pickArgs},
		{"pick level", level, levelArgs},
		{"lease", withMarks(s.lease, 3), append([]any{int64(7), "n", int64(1)}, ids...)},
		{"next due", "SELECT MIN(t.run_at) FROM (" + next + ") t", nextArgs},
		{"exclusive take", s.exclusiveTake, []any{int64(1), int64(2), "q"}},
		{"exclusive release", s.exclusiveRelease, []any{"q", int64(1)}},
		{"exclusive extend", s.exclusiveExtend, []any{int64(1), "q", int64(1)}},
		{"depths", withMarks(s.depths, 2), []any{"q", "r"}},
		{"ack one", s.ackOne, []any{int64(1), int64(2)}},
		{"lock rows", withMarks(s.lockRows, 3), ids},
		{"delete rows", withIDTable(s.deleteRows, 3), ids},
		{"extend", "UPDATE " + qualifier(w.schema) + "txmq_jobs FORCE INDEX (PRIMARY) SET run_at = CASE id WHEN ? THEN ? END WHERE id IN (?)", []any{int64(1), int64(2), int64(1)}},
		{"retry", s.retry, []any{nil, true, int64(0), int64(1), int64(2)}},
		{"key head", s.keyHead, []any{"q", "k"}},
		{"next of key", s.nextOfKey, []any{"q", "k", int64(1)}},
		{"make due", s.makeDue, []any{int64(1)}},
		{"holds key", s.holdsKey, []any{"q", "k"}},
		{"take expired ids", withMarks(s.takeExpiredIDs, 2), []any{int64(1), int64(2), "q", "a", "b"}},
		{"held ids", withMarks(s.heldIDs, 2), []any{"q", int64(1), "a", "b"}},
		{"prune ids", s.pruneIDs, []any{100}},
		{"unique holder", s.uniqueHolder, []any{"q", "u"}},
		{"unique replace", s.uniqueReplace, []any{int64(1)}},
		{"unique move", s.uniqueMove, []any{"b", "s", int64(0), "q", "u"}},
		{"prune unique", s.pruneUnique, []any{100}},
		{"inspect queues", s.inspectQueues, nil},
		{"inspect page", s.inspectPage, []any{"q", int64(0), int64(0), int64(0), 200}},
		{"inspect find", s.inspectFind, []any{"q", "b"}},
		{"replace body", s.replaceBody, []any{[]byte("x"), int64(1)}},
		{"expedite", render(w.schema, sqlExpedite), []any{[]byte("x"), int64(1)}},
		{"remove row", s.removeRow, []any{int64(1)}},
		{"reap queues", s.reapQueues, []any{int64(1)}},
		{"reap pick", s.reapPick, []any{"q", int64(1), 100}},
		{"reap count", s.reapCount, []any{"q", int64(1)}},
		{"limit lock", s.limitLock, []any{"q"}},
		{"limit count", s.limitCount, []any{"q"}},
		{"fair turn", s.fairTurn, []any{"q"}},
		{"fair move", s.fairMove, []any{"k", "q"}},
		{"fair keys after", s.fairKeysAfter, []any{"q", "k", 10}},
		{"fair keys up to", s.fairKeysUpTo, []any{"q", "k", 10}},
		{"fair busy", s.fairBusy, []any{"q"}},
		{"pick key", pickKey, pickKeyArgs},
		{"pick key level", pickKeyLevel, pickKeyLevelArgs},
	}
	for _, size := range backendtest.PlanRows(t, 0, 10000) {
		fill(t, db, w.schema, size)
		for _, st := range stmts {
			for _, bad := range badPlanRows(t, db, st.sql, st.args) {
				t.Errorf("%d rows: statement %q plans a scan: %s\n%s", size, st.name, bad, st.sql)
			}
		}
	}
}

// fill brings the jobs and ids tables to n rows (of 20 queues, a fifth keyed, a third
// leased) and refreshes their statistics.
func fill(t *testing.T, db *sql.DB, schema string, n int) {
	t.Helper()
	ctx := context.Background()
	q := qualifier(schema)
	var have int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+q+"txmq_jobs").Scan(&have); err != nil {
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
			jobs = append(jobs, fmt.Sprintf("('q%d', 'b%d', 'body', 1, %d, %s, %d, %s, 'k%d')", k%20, k, now+int64(k%1000-500)*1000, token, now, key, k%13))
			idRows = append(idRows, fmt.Sprintf("('q%d', 'i%d', %d, 1)", k%20, k, now+int64(k%1000-500)*1000))
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO "+q+"txmq_jobs (queue, batch_id, body, messages, run_at, lease_token, created_at, order_key, fair_key) VALUES "+strings.Join(jobs, ",")); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO "+q+"txmq_job_ids (queue, id, expires_at, token) VALUES "+strings.Join(idRows, ",")); err != nil {
			t.Fatal(err)
		}
		have += chunk
	}
	for _, table := range []string{"txmq_jobs", "txmq_job_ids", "txmq_jobs_exclusive", "txmq_jobs_queues", "txmq_jobs_fair"} {
		rows, err := db.QueryContext(ctx, "ANALYZE TABLE "+q+table)
		if err != nil {
			t.Fatal(err)
		}
		_ = rows.Close()
	}
}

// badPlanRows returns the rows of EXPLAIN stmt that read a txmq table by a full scan.
func badPlanRows(t *testing.T, db *sql.DB, stmt string, args []any) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "EXPLAIN "+stmt, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", stmt, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		r := map[string]string{}
		for i, c := range cols {
			r[strings.ToLower(c)] = vals[i].String
		}
		table, typ, extra := r["table"], r["type"], r["extra"]
		if table == "" || strings.HasPrefix(table, "<") {
			continue // a derived table, a union's result, or no table at all
		}
		if typ == "ALL" || typ == "index" && !strings.Contains(extra, "Using index for group-by") || r["key"] == "" {
			bad = append(bad, fmt.Sprintf("table %s type %s key %q extra %q", table, typ, r["key"], extra))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return bad
}
