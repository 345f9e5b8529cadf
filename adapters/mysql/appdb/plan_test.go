package appdb_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
)

// TestClaimPlans: the store's claim, key and held-key statements read an index range, not the
// table, at 0 and 20,000 rows that are not due (a backlog held by backoff), before and after
// ANALYZE.
func TestClaimPlans(t *testing.T) {
	t.Parallel()
	u := mysqlURL(t)
	db := openDB(t, u)
	schema := privateSchema(t, db)
	ctx := context.Background()
	if err := migrateFor(ctx, db, schema); err != nil {
		t.Fatal(err)
	}
	tbl := "`" + schema + "`.txmq_outbox"
	stmts := map[string]string{
		"claim": `SELECT id FROM ` + tbl + ` WHERE id > 0 AND (next_attempt_at <= 5 OR (next_attempt_at IS NULL AND created_at <= 5)) ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED`,
		"key":   `SELECT queue, order_key, id FROM ` + tbl + ` WHERE queue = 'q' AND order_key = 'k' AND id <= 5`,
		"holds": `SELECT EXISTS (SELECT 1 FROM ` + tbl + ` WHERE queue = 'q' AND order_key = 'k')`,
	}
	check := func(stage string) {
		t.Helper()
		for name, q := range stmts {
			rows, err := db.Query("EXPLAIN " + q)
			if err != nil {
				t.Fatal(err)
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]sql.NullString, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				plan := map[string]string{}
				for i, c := range cols {
					plan[c] = vals[i].String
				}
				if plan["table"] == "txmq_outbox" && (plan["type"] == "ALL" || plan["type"] == "index") {
					t.Errorf("%s, %s: %s scans the table: %v", stage, name, q, plan)
				}
			}
			_ = rows.Close()
		}
	}
	check("empty")
	var b strings.Builder
	for range 20 {
		b.Reset()
		b.WriteString("INSERT INTO " + tbl + " (queue, batch_id, body, created_at, next_attempt_at, order_key) VALUES ")
		for i := range 1000 {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("('q', 'b', 'x', 1, 9999999999999999, 'k')")
		}
		if _, err := db.Exec(b.String()); err != nil {
			t.Fatal(err)
		}
	}
	check("20k rows not due")
	if _, err := db.Exec("ANALYZE TABLE " + tbl); err != nil {
		t.Fatal(err)
	}
	check("20k rows not due, analyzed")
}
