package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/txmqtest/testenv"
)

var errRollbackSavepoint = errors.New("roll the savepoint back")

// bizIDs returns the sorted ids of the committed business rows.
func (e *env) bizIDs(t *testing.T) []int {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), "SELECT id FROM "+e.biz+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestSavepointsDiscardTheirMessages: inside RunInTx, the messages of a savepoint follow its
// business rows, however the savepoint was made: discarded with a rollback, kept with a
// release, on Try (outbox rows), Require and Never (after-commit) queues alike.
func TestSavepointsDiscardTheirMessages(t *testing.T) {
	t.Parallel()
	// Each case runs inside RunInTx after step(1) at the top level; step(n) writes business
	// row n through h and publishes n on every queue with ctx. want is what commits.
	type stepFn func(ctx context.Context, h pgx.Tx, n int) error
	cases := []struct {
		name string
		run  func(t *testing.T, e *env, ctx context.Context, tx pgx.Tx, step stepFn) error
		want []int
	}{
		{"tx.Begin released", func(t *testing.T, e *env, ctx context.Context, tx pgx.Tx, step stepFn) error {
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if err := step(ctx, sp, 2); err != nil {
				return err
			}
			if err := sp.Commit(ctx); err != nil {
				return err
			}
			// The usual deferred Rollback after a Commit changes nothing.
			if err := sp.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
				t.Errorf("Rollback after Commit = %v, want pgx.ErrTxClosed", err)
			}
			return nil
		}, []int{1, 2}},
		{"tx.Begin rolled back", func(t *testing.T, e *env, ctx context.Context, tx pgx.Tx, step stepFn) error {
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if err := step(ctx, sp, 2); err != nil {
				return err
			}
			if err := sp.Rollback(ctx); err != nil {
				return err
			}
			return step(ctx, tx, 3)
		}, []int{1, 3}},
		{"savepoint left open commits with the transaction", func(t *testing.T, e *env, ctx context.Context, tx pgx.Tx, step stepFn) error {
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			return step(ctx, sp, 2)
		}, []int{1, 2}},
		{"BeginFunc three deep, innermost rolled back", func(t *testing.T, e *env, ctx context.Context, tx pgx.Tx, step stepFn) error {
			return pgx.BeginFunc(ctx, tx, func(l1 pgx.Tx) error {
				if err := step(ctx, l1, 2); err != nil {
					return err
				}
				if err := pgx.BeginFunc(ctx, l1, func(l2 pgx.Tx) error {
					if err := step(ctx, l2, 3); err != nil {
						return err
					}
					err := pgx.BeginFunc(ctx, l2, func(l3 pgx.Tx) error {
						if err := step(ctx, l3, 4); err != nil {
							return err
						}
						return errRollbackSavepoint
					})
					if !errors.Is(err, errRollbackSavepoint) {
						return fmt.Errorf("level 3: %w", err)
					}
					return step(ctx, l2, 5)
				}); err != nil {
					return err
				}
				return step(ctx, l1, 6)
			})
		}, []int{1, 2, 3, 5, 6}},
		{"outer rollback discards inner released", func(t *testing.T, e *env, ctx context.Context, tx pgx.Tx, step stepFn) error {
			err := pgx.BeginFunc(ctx, tx, func(l1 pgx.Tx) error {
				if err := step(ctx, l1, 2); err != nil {
					return err
				}
				if err := pgx.BeginFunc(ctx, l1, func(l2 pgx.Tx) error {
					if err := step(ctx, l2, 3); err != nil {
						return err
					}
					return pgx.BeginFunc(ctx, l2, func(l3 pgx.Tx) error { return step(ctx, l3, 4) })
				}); err != nil {
					return err
				}
				return errRollbackSavepoint
			})
			if !errors.Is(err, errRollbackSavepoint) {
				return fmt.Errorf("level 1: %w", err)
			}
			return step(ctx, tx, 7)
		}, []int{1, 7}},
		{"rollback of the outer savepoint while the inner is open", func(t *testing.T, e *env, ctx context.Context, tx pgx.Tx, step stepFn) error {
			sp1, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			sp2, err := sp1.Begin(ctx)
			if err != nil {
				return err
			}
			if err := step(ctx, sp2, 2); err != nil {
				return err
			}
			if err := sp1.Rollback(ctx); err != nil {
				return err
			}
			return step(ctx, tx, 3)
		}, []int{1, 3}},
		{"release of the outer savepoint releases the open inner", func(t *testing.T, e *env, ctx context.Context, tx pgx.Tx, step stepFn) error {
			sp1, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			sp2, err := sp1.Begin(ctx)
			if err != nil {
				return err
			}
			if err := step(ctx, sp2, 2); err != nil {
				return err
			}
			if err := sp1.Commit(ctx); err != nil {
				return err
			}
			sp3, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if err := step(ctx, sp3, 3); err != nil {
				return err
			}
			return sp3.Rollback(ctx)
		}, []int{1, 2}},
		{"Store.Savepoint and nested RunInTx inside a rolled-back tx.Begin", func(t *testing.T, e *env, ctx context.Context, tx pgx.Tx, step stepFn) error {
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if err := e.store.Savepoint(ctx, func(ctx context.Context, h pgx.Tx) error { return step(ctx, h, 2) }); err != nil {
				return err
			}
			if err := e.store.RunInTx(ctx, func(ctx context.Context, h pgx.Tx) error { return step(ctx, h, 3) }); err != nil {
				return err
			}
			if err := sp.Rollback(ctx); err != nil {
				return err
			}
			return step(ctx, tx, 4)
		}, []int{1, 4}},
		{"tx.Begin inside Store.Savepoint", func(t *testing.T, e *env, ctx context.Context, tx pgx.Tx, step stepFn) error {
			return e.store.Savepoint(ctx, func(ctx context.Context, h pgx.Tx) error {
				sp, err := h.Begin(ctx)
				if err != nil {
					return err
				}
				if err := step(ctx, sp, 2); err != nil {
					return err
				}
				if err := sp.Rollback(ctx); err != nil {
					return err
				}
				sp, err = h.Begin(ctx)
				if err != nil {
					return err
				}
				if err := step(ctx, sp, 3); err != nil {
					return err
				}
				return sp.Commit(ctx)
			})
		}, []int{1, 3}},
		{"SAVEPOINT statements through Exec", func(t *testing.T, e *env, ctx context.Context, tx pgx.Tx, step stepFn) error {
			exec := func(h pgx.Tx, q string) {
				t.Helper()
				if _, err := h.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			exec(tx, "SAVEPOINT a")
			if err := step(ctx, tx, 2); err != nil {
				return err
			}
			// A pgx savepoint inside, left open: ROLLBACK TO a undoes it too.
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if err := step(ctx, sp, 3); err != nil {
				return err
			}
			exec(tx, "rollback to savepoint A;")
			// a stays open after ROLLBACK TO: what follows is kept when it is released.
			if err := step(ctx, tx, 4); err != nil {
				return err
			}
			exec(tx, "RELEASE SAVEPOINT a")
			exec(tx, `SAVEPOINT "B"`)
			if err := step(ctx, tx, 5); err != nil {
				return err
			}
			exec(tx, `ROLLBACK TO "B"`)
			return step(ctx, tx, 6)
		}, []int{1, 4, 6}},
		{"released tx.Begin inside a rolled-back Store.Savepoint", func(t *testing.T, e *env, ctx context.Context, tx pgx.Tx, step stepFn) error {
			err := e.store.Savepoint(ctx, func(ctx context.Context, h pgx.Tx) error {
				if err := pgx.BeginFunc(ctx, h, func(sp pgx.Tx) error { return step(ctx, sp, 2) }); err != nil {
					return err
				}
				return errRollbackSavepoint
			})
			if !errors.Is(err, errRollbackSavepoint) {
				return fmt.Errorf("Savepoint: %w", err)
			}
			return nil
		}, []int{1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			ctx := context.Background()
			step := func(ctx context.Context, h pgx.Tx, n int) error {
				if _, err := h.Exec(ctx, "INSERT INTO "+e.biz+" VALUES ($1)", n); err != nil {
					return err
				}
				for _, q := range []*txmq.Queue[msg]{e.orders, e.strict, e.notes} {
					if err := q.Publish(ctx, e.node, msg{n}); err != nil {
						return err
					}
				}
				return nil
			}
			if err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
				if err := step(ctx, tx, 1); err != nil {
					return err
				}
				return tc.run(t, e, ctx, tx, step)
			}); err != nil {
				t.Fatalf("RunInTx: %v", err)
			}
			e.settle(t)
			if err := e.node.Close(ctx); err != nil { // flushes the Never messages
				t.Fatal(err)
			}
			if got := e.bizIDs(t); !slices.Equal(got, tc.want) {
				t.Fatalf("business rows %v, want %v", got, tc.want)
			}
			for _, q := range []string{"orders", "strict", "notes"} {
				got := e.be.messages(t, q)
				slices.Sort(got)
				if !slices.Equal(got, tc.want) {
					t.Errorf("queue %s published %v, want %v (the business rows)", q, got, tc.want)
				}
			}
		})
	}
}

// TestRunInTxTxCommitAndRollbackByFn: RunInTx owns the end of its transaction. Commit on the
// tx it hands out is refused (RunInTx commits when fn returns nil, staged messages included);
// Rollback rolls everything back and RunInTx then reports it, publishing nothing.
func TestRunInTxTxCommitAndRollbackByFn(t *testing.T) {
	t.Parallel()
	t.Run("commit refused", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		ctx := context.Background()
		if err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			if err := e.orders.Publish(ctx, e.node, msg{1}); err != nil {
				return err
			}
			if err := tx.Commit(ctx); err == nil || !strings.Contains(err.Error(), "return nil") {
				t.Errorf("Commit inside RunInTx = %v, want an error saying to return nil from fn", err)
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+e.biz+" VALUES (1)")
			return err
		}); err != nil {
			t.Fatalf("RunInTx: %v", err)
		}
		e.settle(t)
		if got := e.be.messages(t, "orders"); !slices.Equal(got, []int{1}) {
			t.Errorf("published %v, want [1]", got)
		}
		if got := e.bizIDs(t); !slices.Equal(got, []int{1}) {
			t.Errorf("business rows %v, want [1]", got)
		}
	})
	t.Run("rollback", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		ctx := context.Background()
		err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO "+e.biz+" VALUES (1)"); err != nil {
				return err
			}
			if err := e.orders.Publish(ctx, e.node, msg{1}); err != nil {
				return err
			}
			if err := e.notes.Publish(ctx, e.node, msg{1}); err != nil {
				return err
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Errorf("Rollback inside RunInTx = %v", err)
			}
			if err := e.orders.Publish(ctx, e.node, msg{2}); err == nil {
				t.Errorf("publish after the transaction was rolled back succeeded")
			}
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), "rolled back") {
			t.Fatalf("RunInTx = %v, want an error saying fn rolled the transaction back", err)
		}
		if err := e.node.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if n := e.be.callCount() + e.outboxRows(t) + e.bizRows(t); n != 0 {
			t.Errorf("%d publishes or rows after fn rolled back", n)
		}
	})
}

// TestAppTxSavepoints: with WithTx and WithSQLTx each publish writes its rows into the app's
// transaction at once, so any savepoint of it, pgx's tx.Begin or a raw SAVEPOINT statement,
// discards them when rolled back, as it does the business rows.
func TestAppTxSavepoints(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	db, err := sql.Open("pgx", testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	step := func(tctx context.Context, exec func(string, ...any) error, n int) {
		t.Helper()
		if err := exec("INSERT INTO "+e.biz+" VALUES ($1)", n); err != nil {
			t.Fatal(err)
		}
		if err := e.orders.Publish(tctx, e.node, msg{n}); err != nil {
			t.Fatal(err)
		}
	}
	mustExec := func(exec func(string, ...any) error, q string) {
		t.Helper()
		if err := exec(q); err != nil {
			t.Fatal(err)
		}
	}

	// pgx: tx.Begin and a raw SAVEPOINT, each rolled back and released.
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	tctx := e.store.WithTx(ctx, tx)
	execTx := func(q string, args ...any) error { _, err := tx.Exec(ctx, q, args...); return err }
	step(tctx, execTx, 1)
	sp, err := tx.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	step(tctx, execTx, 2)
	if err := sp.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	sp, err = tx.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	step(tctx, execTx, 3)
	if err := sp.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(execTx, "SAVEPOINT app_sp")
	step(tctx, execTx, 4)
	mustExec(execTx, "ROLLBACK TO SAVEPOINT app_sp")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// database/sql: no nested transactions, raw SAVEPOINT statements only.
	stx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stx.Rollback() }()
	sctx := e.store.WithSQLTx(ctx, stx)
	execSQL := func(q string, args ...any) error { _, err := stx.ExecContext(ctx, q, args...); return err }
	step(sctx, execSQL, 11)
	mustExec(execSQL, "SAVEPOINT app_sp")
	step(sctx, execSQL, 12)
	mustExec(execSQL, "ROLLBACK TO SAVEPOINT app_sp")
	mustExec(execSQL, "SAVEPOINT app_sp2")
	step(sctx, execSQL, 13)
	mustExec(execSQL, "RELEASE SAVEPOINT app_sp2")
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}

	want := []int{1, 3, 11, 13}
	if got := e.bizIDs(t); !slices.Equal(got, want) {
		t.Fatalf("business rows %v, want %v", got, want)
	}
	if _, err := e.store.SweepOnce(ctx); err != nil { // the rows are due at once
		t.Fatal(err)
	}
	got := e.be.messages(t, "orders")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("published %v, want %v (the business rows)", got, want)
	}
}
