package outbox

import "testing"

func TestParseSavepointSQL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		sql  string
		op   savepointOp
		name string
	}{
		{"SAVEPOINT a", opSavepoint, "a"},
		{"  savepoint My_SP1 ; ", opSavepoint, "my_sp1"},
		{`SAVEPOINT "My ""odd"" one"`, opSavepoint, `My "odd" one`},
		{"ROLLBACK TO SAVEPOINT a", opRollbackTo, "a"},
		{"rollback to a", opRollbackTo, "a"},
		{"ROLLBACK WORK TO SAVEPOINT A", opRollbackTo, "a"},
		{"rollback transaction\n\tto b;", opRollbackTo, "b"},
		{"RELEASE SAVEPOINT a", opRelease, "a"},
		{"release a", opRelease, "a"},
		{"ROLLBACK", opNone, ""},
		{"RELEASE", opNone, ""},
		{"SAVEPOINT a; INSERT INTO t VALUES (1)", opNone, ""},
		{"INSERT INTO savepoint VALUES (1)", opNone, ""},
		{"SELECT 'SAVEPOINT a'", opNone, ""},
		{"-- SAVEPOINT a", opNone, ""},
	}
	for _, tc := range cases {
		op, name := parseSavepointSQL(tc.sql)
		if op != tc.op || name != tc.name {
			t.Errorf("parseSavepointSQL(%q) = %v, %q; want %v, %q", tc.sql, op, name, tc.op, tc.name)
		}
	}
}
