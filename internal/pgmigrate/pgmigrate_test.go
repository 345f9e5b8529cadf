package pgmigrate_test

import (
	"context"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/internal/pgmigrate"
	"github.com/txmq/txmq/txmqtest/testenv"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		fsys    fstest.MapFS
		want    []int
		wantErr string
	}{
		{"sorted", fstest.MapFS{"0002_b.sql": {Data: []byte("b")}, "0001_a.sql": {Data: []byte("a")}, "x.txt": {}}, []int{1, 2}, ""},
		{"empty", fstest.MapFS{}, nil, ""},
		{"bad name", fstest.MapFS{"init.sql": {}}, nil, "NNNN_name.sql"},
		{"zero version", fstest.MapFS{"0000_a.sql": {}}, nil, "> 0"},
		{"duplicate", fstest.MapFS{"0001_a.sql": {}, "001_b.sql": {}}, nil, "share version 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ms, err := pgmigrate.Load(tc.fsys)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.Version)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("versions = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	m := pgmigrate.Migration{SQL: "CREATE TABLE {{schema}}.t (); SELECT 1 FROM {{schema}}.t"}
	got := m.Render(`we"ird`)
	want := `CREATE TABLE "we""ird".t (); SELECT 1 FROM "we""ird".t`
	if got != want {
		t.Fatalf("Render = %q, want %q", got, want)
	}
}

func TestMigrateTwiceIsNoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	fsys := os.DirFS("testdata/ok")

	applied, err := pgmigrate.Migrate(ctx, pool, fsys, "things", schema)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied, []int{1, 2}) {
		t.Fatalf("first Migrate applied %v, want [1 2]", applied)
	}
	applied, err = pgmigrate.Migrate(ctx, pool, fsys, "things", schema)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 0 {
		t.Fatalf("second Migrate applied %v, want nothing", applied)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, "things"}.Sanitize()+" (name, extra) VALUES ('a', 1)"); err != nil {
		t.Fatalf("migrated table unusable: %v", err)
	}
	vs, err := pgmigrate.Applied(ctx, pool, "things", schema)
	if err != nil || !slices.Equal(vs, []int{1, 2}) {
		t.Fatalf("Applied = %v, %v; want [1 2]", vs, err)
	}
	// Another component in the same schema has its own versions.
	vs, err = pgmigrate.Applied(ctx, pool, "other", schema)
	if err != nil || len(vs) != 0 {
		t.Fatalf("Applied(other) = %v, %v; want none", vs, err)
	}
}

func TestAppliedMissingSchema(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	vs, err := pgmigrate.Applied(context.Background(), pool, "things", testenv.UniqueName("txmq_absent_"))
	if err != nil || vs != nil {
		t.Fatalf("Applied on a missing schema = %v, %v; want nil, nil", vs, err)
	}
}

func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	fsys := os.DirFS("testdata/ok")
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var all []int
	errs := make(chan error, 2*n)
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			component := "things"
			if i%2 == 1 { // a second component migrating the same schema at the same time
				component = "things2"
			}
			applied, err := pgmigrate.Migrate(ctx, pool, fstest.MapFS{
				"0001_init.sql": {Data: []byte(strings.ReplaceAll(mustRead(t, fsys, "0001_init.sql"), "things", component))},
			}, component, schema)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			all = append(all, applied...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(all) != 2 {
		t.Fatalf("concurrent Migrate applied versions %v in total, want version 1 once per component", all)
	}
}

func TestMigrateFailureRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	applied, err := pgmigrate.Migrate(ctx, pool, os.DirFS("testdata/bad"), "bad", schema)
	if err == nil || !strings.Contains(err.Error(), "0002_broken.sql") {
		t.Fatalf("Migrate error = %v, want one naming 0002_broken.sql", err)
	}
	if !slices.Equal(applied, []int{1}) {
		t.Fatalf("applied = %v, want [1]", applied)
	}
	var half bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", schema+".half").Scan(&half); err != nil {
		t.Fatal(err)
	}
	if half {
		t.Fatal("table from the failed migration exists: it was not rolled back")
	}
	vs, _ := pgmigrate.Applied(ctx, pool, "bad", schema)
	if !slices.Equal(vs, []int{1}) {
		t.Fatalf("recorded versions = %v, want [1]", vs)
	}
}

func mustRead(t *testing.T, fsys fs.FS, name string) string {
	t.Helper()
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		t.Error(err)
	}
	return string(b)
}
