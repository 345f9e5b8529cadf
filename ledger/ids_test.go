package ledger

import (
	"testing"

	"github.com/txmq/txmq/core"
)

func TestSpanOf(t *testing.T) {
	t.Parallel()
	a, b := core.NewID(), core.NewID()
	at, _ := core.IDTime(a)
	for _, tt := range []struct {
		name     string
		ids      []string
		rows     int
		span     bool
		unlisted bool
	}{
		{"made by NewID", []string{a, b}, 0, true, false},
		{"a caller's among them", []string{a, "order-1", b}, 1, true, false},
		{"only a caller's", []string{"order-1", "order-2"}, 2, false, false},
		{"made over an hour apart", []string{a, oldID(at.UnixMilli() - 2*3600*1000)}, 2, false, false},
		{"holding the separator", []string{a, "x" + idSep + "y"}, 2, false, true},
	} {
		s := spanOf(tt.ids)
		if len(s.rows) != tt.rows || s.lo.IsZero() == tt.span || s.unlisted != tt.unlisted {
			t.Errorf("%s: spanOf = %+v; want %d rows, span %v, unlisted %v", tt.name, s, tt.rows, tt.span, tt.unlisted)
		}
		if tt.span && (s.lo.After(at) || s.hi.Before(s.lo)) {
			t.Errorf("%s: span %v..%v does not hold %v", tt.name, s.lo, s.hi, at)
		}
	}
}

// oldID returns an id of NewID's form made at ms (Unix milliseconds).
func oldID(ms int64) string {
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	v := uint64(ms) << 2 // the first 10 characters carry 50 bits, the top 48 of them the time
	b := []byte("0000000000" + core.NewID()[10:])
	for i := 9; i >= 0; i-- {
		b[i] = alphabet[v&31]
		v >>= 5
	}
	return string(b)
}
