package sqlmigrate

import (
	"reflect"
	"testing"
	"testing/fstest"
)

func TestStatements(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"one statement", "CREATE TABLE a (x INTEGER);\n", []string{"CREATE TABLE a (x INTEGER)"}},
		{"comments and blank lines dropped", "-- a comment\n\nCREATE TABLE a (\n  x INTEGER\n);\n-- end\n", []string{"CREATE TABLE a (\n  x INTEGER\n)"}},
		{"two statements", "CREATE TABLE a (x);\nCREATE INDEX i ON a (x);\n", []string{"CREATE TABLE a (x)", "CREATE INDEX i ON a (x)"}},
		{"last statement without a semicolon", "CREATE TABLE a (x);\nCREATE TABLE b (y)\n", []string{"CREATE TABLE a (x)", "CREATE TABLE b (y)"}},
		{"empty", "-- nothing\n", nil},
	}
	for _, tt := range tests {
		if got := Statements(tt.file); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Statements = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	files := fstest.MapFS{
		"0002_b.sql": {Data: []byte("B;")},
		"0001_a.sql": {Data: []byte("A;")},
	}
	got, err := List(files)
	if err != nil || len(got) != 2 || got[0].Version != 1 || got[1].Version != 2 || got[0].Name != "0001_a.sql" {
		t.Fatalf("List = %+v, %v; want 0001_a.sql then 0002_b.sql", got, err)
	}
	if _, err := List(fstest.MapFS{"notes.txt": {Data: []byte("x")}}); err == nil {
		t.Fatal("List accepted a file not named NNNN_name.sql")
	}
}
