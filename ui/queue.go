package ui

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"strings"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/outbox"
)

// chart draws runs per minute as an inline SVG bar chart: batches run (grey) and failed (red),
// with a text summary for readers without images.
func chart(h []txmq.MinuteRuns) template.HTML {
	if len(h) == 0 {
		return ""
	}
	const w, hgt, bar = 600, 120, 10
	var peak, runs, failed int64
	for _, m := range h {
		peak = max(peak, m.Batches)
		runs += m.Batches
		failed += m.Failed
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" id="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%d batches run, %d failed, in the last %d minutes">`, w, hgt+14, w, hgt+14, runs, failed, len(h))
	for i, m := range h {
		x := i * bar
		if peak > 0 && m.Batches > 0 {
			bh := int(float64(m.Batches) / float64(peak) * hgt)
			fh := int(float64(m.Failed) / float64(peak) * hgt)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#889"><title>%s: %d batches, %d failed</title></rect>`, x, hgt-bh, bar-2, bh, m.Minute.Format("15:04"), m.Batches, m.Failed)
			if fh > 0 {
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#c33"/>`, x, hgt-fh, bar-2, fh)
			}
		}
	}
	fmt.Fprintf(&b, `<text x="0" y="%d" font-size="10">%s</text><text x="%d" y="%d" font-size="10" text-anchor="end">%s (peak %d/min)</text></svg>`,
		hgt+12, h[0].Minute.Format("15:04"), w, hgt+12, h[len(h)-1].Minute.Format("15:04"), peak)
	return template.HTML(b.String()) //nolint:gosec // built from numbers and formatted times only
}

func (s *server) queue(w http.ResponseWriter, r *http.Request) {
	q := r.PathValue("queue")
	if err := txmq.ValidateQueueName(q); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.o.Timeout)
	defer cancel()
	var errs []string
	data := map[string]any{"Title": "Queue " + q, "Queue": q}
	if s.o.Node != nil {
		if info, ok := s.o.Node.Registry().Info(q); ok {
			data["Info"] = info
		}
	}
	runs, err := s.loadRuns(ctx)
	if err != nil {
		errs = append(errs, "heartbeats: "+err.Error())
	}
	if h, nodes := runs.history(q); h != nil {
		data["Chart"] = chart(h)
		batches, msgs, failed := totals(h)
		data["Runs"], data["Failed"], data["RunMessages"], data["ChartNodes"] = batches, failed, msgs, nodes
	}
	if s.o.Backend != nil {
		d, err := s.o.Backend.Depths(ctx, []string{q})
		if err != nil {
			errs = append(errs, "backend: "+err.Error())
		} else {
			data["Depth"] = d[q]
		}
	}
	if backlog, err := s.o.Store.Backlog(ctx); err == nil {
		data["Backlog"] = backlog[q]
	} else {
		errs = append(errs, "outbox: "+err.Error())
	}
	if paused, err := s.o.Store.Pauses().PausedQueues(ctx); err == nil {
		if p, ok := paused[q]; ok {
			data["Paused"] = p
		}
	} else {
		errs = append(errs, "paused queues: "+err.Error())
	}
	failures, err := s.o.Store.ListDeadLetters(ctx, outbox.DLQFilter{Queue: q, Limit: 10, State: outbox.DLQDead})
	if err != nil {
		errs = append(errs, "dead letters: "+err.Error())
	}
	data["Failures"], data["Errors"] = failures, errs
	s.render(w, r, "queue.html", data)
}
