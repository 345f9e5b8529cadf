package schemaset

import (
	"errors"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	names := Names{Schema: "TXMQ_SCHEMA", Backend: "TXMQ_BACKEND"}
	const pg = "postgres://u:secret@db:5432/app?sslmode=disable"
	tests := []struct {
		name, schema, backend string
		wantSchema            string
		wantParam             string // txmq_schema of the returned URL; "" for non-postgres
		wantErr               []string
	}{
		{name: "nothing", wantSchema: "txmq"},
		{name: "memory default", backend: "memory://", wantSchema: "txmq"},
		{name: "memory with setting", schema: "app", backend: "redis://127.0.0.1:6379/0", wantSchema: "app"},
		{name: "postgres neither", backend: pg, wantSchema: "txmq", wantParam: "txmq"},
		{name: "postgres setting only", schema: "app", backend: pg, wantSchema: "app", wantParam: "app"},
		{name: "postgresql setting only", schema: "app", backend: "postgresql://db/app", wantSchema: "app", wantParam: "app"},
		{name: "postgres URL only", backend: pg + "&txmq_schema=jobs", wantSchema: "jobs", wantParam: "jobs"},
		{name: "postgres URL key case", backend: pg + "&TXMQ_SCHEMA=jobs", wantSchema: "jobs", wantParam: "jobs"},
		{name: "postgres both agree", schema: "app", backend: pg + "&txmq_schema=app", wantSchema: "app", wantParam: "app"},
		{name: "postgres conflict", schema: "app", backend: pg + "&txmq_schema=jobs",
			wantErr: []string{`TXMQ_SCHEMA="app"`, `TXMQ_BACKEND parameter txmq_schema="jobs"`, "one schema"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			schema, backend, err := Resolve(tt.schema, tt.backend, names)
			if len(tt.wantErr) > 0 {
				if err == nil || !errors.Is(err, core.ErrInvalidConfig) {
					t.Fatalf("err = %v, want ErrInvalidConfig", err)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("error %q shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if schema != tt.wantSchema {
				t.Errorf("schema = %q, want %q", schema, tt.wantSchema)
			}
			_, got, isPG := urlSchema(backend)
			if isPG != (tt.wantParam != "") || got != tt.wantParam {
				t.Errorf("backend %q: txmq_schema = %q, want %q", backend, got, tt.wantParam)
			}
			if !isPG && backend != tt.backend {
				t.Errorf("non-postgres backend changed: %q -> %q", tt.backend, backend)
			}
		})
	}
}

func TestForDrain(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"redis://127.0.0.1:6379/1", ""},
		{"postgres://db/old", "app"},
		{"postgres://db/old?txmq_schema=old", "old"},
	} {
		_, got, _ := urlSchema(ForDrain("app", tt.in))
		if got != tt.want {
			t.Errorf("ForDrain(app, %q): txmq_schema %q, want %q", tt.in, got, tt.want)
		}
	}
}
