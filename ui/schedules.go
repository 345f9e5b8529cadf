package ui

import (
	"context"
	"net/http"
)

// schedules serves the Schedules page: every schedule that published a tick, with its queue,
// its last tick and the next one (from the app database's tick table, as `txmq schedule ls`).
func (s *server) schedules(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.o.Timeout)
	defer cancel()
	rows, err := s.o.Store.Ticks().Schedules(ctx)
	var errs []string
	if err != nil {
		errs = append(errs, err.Error())
	}
	s.render(w, r, "schedules.html", map[string]any{"Title": "Schedules", "Rows": rows, "Errors": errs})
}
