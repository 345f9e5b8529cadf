package memory

import (
	"time"

	"github.com/txmq/txmq/core"
)

// idMarks are the caller ids a queue holds for deduplication (core.IDDeduper): each id until
// its expiry, and the same ids in publish order so that expired ones are forgotten from the
// front without a scan.
type idMarks struct {
	until map[string]time.Time
	order []idMark
}

type idMark struct {
	id    string
	until time.Time
}

// taken returns the ids of ids held at now (forgetting expired ones first).
func (m *idMarks) taken(ids []string, now time.Time) []string {
	for len(m.order) > 0 && !m.order[0].until.After(now) {
		if u, ok := m.until[m.order[0].id]; ok && !u.After(now) {
			delete(m.until, m.order[0].id)
		}
		m.order[0] = idMark{}
		m.order = m.order[1:]
	}
	var out []string
	for _, id := range ids {
		if u, ok := m.until[id]; ok && u.After(now) {
			out = append(out, id)
		}
	}
	return out
}

// hold records ids until until.
func (m *idMarks) hold(ids []string, until time.Time) {
	if m.until == nil {
		m.until = make(map[string]time.Time, len(ids))
	}
	for _, id := range ids {
		m.until[id] = until
		m.order = append(m.order, idMark{id: id, until: until})
	}
}

// DedupIDs implements core.IDDeduper: any window, per message, on the Backend's clock.
func (be *Backend) DedupIDs() (core.DedupSupport, error) { return core.DedupSupport{}, nil }
