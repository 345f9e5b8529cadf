package outbox

import (
	"context"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Savepoints written as SQL text are followed too when they go through Exec on the tx that
// RunInTx or Savepoint hands out, one statement per call: SAVEPOINT name, ROLLBACK [WORK |
// TRANSACTION] TO [SAVEPOINT] name and RELEASE [SAVEPOINT] name. Statements run elsewhere
// (tx.Conn(), Query, a batch, several statements in one string) are not seen.

// savepointOp is a savepoint statement recognised in Exec.
type savepointOp int

const (
	opNone savepointOp = iota
	opSavepoint
	opRollbackTo
	opRelease
)

// savepointSQL matches one savepoint statement: the verb part, then the name.
var savepointSQL = regexp.MustCompile(`(?is)^\s*(savepoint\s+|rollback\s+(?:(?:work|transaction)\s+)?to\s+(?:savepoint\s+)?|release\s+(?:savepoint\s+)?)` +
	`("(?:[^"]|"")+"|[a-z_\x{80}-\x{10ffff}][a-z0-9_$\x{80}-\x{10ffff}]*)\s*;?\s*$`)

// parseSavepointSQL recognises a savepoint statement and returns its name as PostgreSQL
// resolves it: unquoted names fold to lower case, quoted ones are exact.
func parseSavepointSQL(sql string) (op savepointOp, name string) {
	m := savepointSQL.FindStringSubmatch(sql)
	if m == nil {
		return opNone, ""
	}
	switch verb := strings.ToLower(m[1]); {
	case strings.HasPrefix(verb, "savepoint"):
		op = opSavepoint
	case strings.HasPrefix(verb, "rollback"):
		op = opRollbackTo
	default:
		op = opRelease
	}
	name = m[2]
	if strings.HasPrefix(name, `"`) {
		name = strings.ReplaceAll(name[1:len(name)-1], `""`, `"`)
	} else {
		name = strings.ToLower(name)
	}
	return op, name
}

// Exec runs sql in the transaction; a savepoint statement that succeeded opens, rolls back
// or releases the matching frame.
func (t *scopedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := t.Tx.Exec(ctx, sql, args...)
	if err != nil || len(args) > 0 {
		return tag, err
	}
	switch op, name := parseSavepointSQL(sql); op {
	case opSavepoint:
		t.st.push(name)
	case opRollbackTo, opRelease:
		if !t.st.endNamed(name, op == opRelease) {
			t.st.s.log.Warn("txmq outbox: a savepoint statement names a savepoint RunInTx did not see open (made with tx.Conn(), Query or a multi-statement string?); the messages staged since then are kept as they were",
				"statement", sql)
		}
	}
	return tag, nil
}

// endNamed applies ROLLBACK TO SAVEPOINT name (release false) or RELEASE SAVEPOINT name to
// the latest open frame of that name, as PostgreSQL does: a rollback drops the frames above it
// and empties it but leaves it open; a release merges it and the frames above it into the
// frame below. It reports false when no open frame has that name.
func (st *txState) endNamed(name string, release bool) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i := len(st.frames) - 1; i > 0; i-- {
		fr := st.frames[i]
		if fr.name != name {
			continue
		}
		if release {
			st.releaseLocked(fr)
		} else {
			st.pop(fr)
			fr.open, fr.staged, fr.after = true, nil, nil
			st.frames = append(st.frames, fr)
		}
		return true
	}
	return false
}
