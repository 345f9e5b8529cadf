package ui

import (
	"context"
	"time"

	"github.com/txmq/txmq"
)

// chartMinutes is how many minutes the queue page's chart covers (what a node keeps).
const chartMinutes = 60

// queueHistory returns queue's runs per minute over the last hour across the cluster, oldest
// first, and how many nodes contributed: the sum of every node's heartbeat (core.NodeQueue's
// Minutes; stopped and stale nodes' last rows included, since what they ran still happened),
// with the serving node's own live counts in place of its row when the dashboard is mounted
// in the app. A node's row lags its runs by up to one heartbeat (5 s by default). Nil when no
// node ran the queue in the last hour (and the serving node does not listen to it).
func (s *server) queueHistory(ctx context.Context, queue string) ([]txmq.MinuteRuns, int, error) {
	end := time.Now().Truncate(time.Minute)
	start := end.Add(-(chartMinutes - 1) * time.Minute)
	out := make([]txmq.MinuteRuns, chartMinutes)
	for i := range out {
		out[i].Minute = start.Add(time.Duration(i) * time.Minute)
	}
	add := func(minute time.Time, batches, messages, failed int64) {
		i := int(minute.Sub(start) / time.Minute)
		if i < 0 || i >= chartMinutes {
			return
		}
		out[i].Batches += batches
		out[i].Messages += messages
		out[i].Failed += failed
	}
	self, nodes := "", 0
	if s.o.Node != nil {
		if h := s.o.Node.RunHistory(queue); h != nil {
			self = s.o.Node.ID()
			nodes++
			for _, m := range h {
				add(m.Minute, m.Batches, m.Messages, m.Failed)
			}
		}
	}
	beats, _, err := s.o.Store.Nodes().List(ctx)
	for _, b := range beats {
		if b.Node == self || time.Since(b.LastSeen) > chartMinutes*time.Minute {
			continue
		}
		for _, q := range b.Queues {
			if q.Queue != queue || len(q.Minutes) == 0 {
				continue
			}
			nodes++
			for _, m := range q.Minutes {
				add(time.Unix(m.Minute, 0), m.Batches, m.Messages, m.Failed)
			}
		}
	}
	if nodes == 0 {
		return nil, 0, err
	}
	return out, nodes, err
}
