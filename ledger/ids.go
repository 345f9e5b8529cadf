package ledger

import (
	"strings"
	"time"

	"github.com/txmq/txmq/core"
)

// maxIDSpan bounds the span of id times a batch's row may hold (ids_at): a lookup by id reads
// every batch whose span holds the id's time, so a batch whose ids were made far apart (a
// drain or replay that gathered old messages) gives its messages rows instead.
const maxIDSpan = time.Hour

// idSep joins a batch's ids into the one string a grouped write sends for them (the database
// splits it): ids never hold a control character (the publish calls refuse them).
const idSep = "\x1f"

// idSpan is how a batch's messages are found by id: the span of their ids' times, which the
// batch's row holds (lo and hi zero: none), and the ids that need a row of their own because
// they carry no time (ids a caller chose) or the span would pass maxIDSpan (then all of them).
type idSpan struct {
	lo, hi time.Time
	rows   []string
	// unlisted: an id holds idSep (not one a publish call made), so the batch's row cannot
	// list its ids; all of them get rows.
	unlisted bool
}

// spanOf returns the idSpan of a batch's ids.
func spanOf(ids []string) idSpan {
	var s idSpan
	for _, id := range ids {
		if strings.Contains(id, idSep) {
			return idSpan{rows: ids, unlisted: true}
		}
		at, ok := core.IDTime(id)
		switch {
		case !ok:
			s.rows = append(s.rows, id)
		case s.lo.IsZero():
			s.lo, s.hi = at, at
		case at.Before(s.lo):
			s.lo = at
		case at.After(s.hi):
			s.hi = at
		}
	}
	if !s.lo.IsZero() && s.hi.Sub(s.lo) > maxIDSpan {
		return idSpan{rows: ids}
	}
	return s
}

// idTime returns the time of an id for the rows' id_at column: nil when it carries none.
func idTime(id string) *time.Time {
	at, ok := core.IDTime(id)
	if !ok {
		return nil
	}
	return &at
}
