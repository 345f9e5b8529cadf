package ui

import (
	"context"
	"net/http"
	"time"

	"github.com/txmq/txmq/outbox"
)

// recentTicks is how many of a schedule's latest ticks its row lists.
const recentTicks = 5

// scheduleRow is one row of the Schedules page.
type scheduleRow struct {
	outbox.ScheduleRow
	// Recent are its latest claimed ticks, newest first.
	Recent []time.Time
	// Cron and Missed are its declaration, known when the dashboard is mounted in the app
	// (ForApp) and the app declares it; empty otherwise.
	Cron, Missed string
}

// schedules serves the Schedules page: every schedule that published a tick, with its queue,
// its last tick, the next one and its latest ticks (from the app database's tick tables, as
// `txmq schedule ls`), and, when mounted in the app, its cron spec and missed policy.
func (s *server) schedules(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.o.Timeout)
	defer cancel()
	list, err := s.o.Store.Ticks().Schedules(ctx)
	var errs []string
	if err != nil {
		errs = append(errs, err.Error())
	}
	rows := make([]scheduleRow, 0, len(list))
	for _, sr := range list {
		row := scheduleRow{ScheduleRow: sr}
		if row.Recent, err = s.o.Store.Ticks().Recent(ctx, sr.Schedule, recentTicks); err != nil {
			errs = append(errs, err.Error())
		}
		if s.o.Node != nil {
			if info, ok := s.o.Node.Registry().ScheduleInfo(sr.Schedule); ok {
				row.Cron, row.Missed = info.Cron, info.Missed.String()
			}
		}
		rows = append(rows, row)
	}
	s.render(w, r, "schedules.html", map[string]any{"Title": "Schedules", "Rows": rows, "Errors": errs})
}
