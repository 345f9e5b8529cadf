package ui

import (
	"context"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

// chartMinutes is how many minutes the queue page's chart covers (what a node keeps).
const chartMinutes = 60

// clusterRuns is what the nodes ran over the last hour, read once per page: every node's
// heartbeat (core.NodeQueue's Minutes; stopped and stale nodes' last rows included, since what
// they ran still happened), with the serving node's own live counts in place of its row when
// the dashboard is mounted in the app. A node's row lags its runs by up to one heartbeat (5 s
// by default).
type clusterRuns struct {
	self  *txmq.Node
	beats []core.NodeBeat
	start time.Time // the first minute of the window
}

// loadRuns reads the heartbeats; on an error it still returns what the serving node knows.
func (s *server) loadRuns(ctx context.Context) (*clusterRuns, error) {
	end := time.Now().Truncate(time.Minute)
	c := &clusterRuns{self: s.o.Node, start: end.Add(-(chartMinutes - 1) * time.Minute)}
	beats, _, err := s.o.Store.Nodes().List(ctx)
	for _, b := range beats {
		if time.Since(b.LastSeen) <= chartMinutes*time.Minute && (c.self == nil || b.Node != c.self.ID()) {
			c.beats = append(c.beats, b)
		}
	}
	return c, err
}

// history returns queue's runs per minute over the last hour across the nodes, oldest first,
// and how many nodes ran it; nil when none did (and the serving node does not listen to it).
func (c *clusterRuns) history(queue string) ([]txmq.MinuteRuns, int) {
	out := make([]txmq.MinuteRuns, chartMinutes)
	for i := range out {
		out[i].Minute = c.start.Add(time.Duration(i) * time.Minute)
	}
	add := func(minute time.Time, batches, messages, failed int64) {
		i := int(minute.Sub(c.start) / time.Minute)
		if i < 0 || i >= chartMinutes {
			return
		}
		out[i].Batches += batches
		out[i].Messages += messages
		out[i].Failed += failed
	}
	nodes := 0
	if c.self != nil {
		if h := c.self.RunHistory(queue); h != nil {
			nodes++
			for _, m := range h {
				add(m.Minute, m.Batches, m.Messages, m.Failed)
			}
		}
	}
	for _, b := range c.beats {
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
		return nil, 0
	}
	return out, nodes
}

// totals adds up a history: batches, messages and failed runs.
func totals(h []txmq.MinuteRuns) (batches, messages, failed int64) {
	for _, m := range h {
		batches, messages, failed = batches+m.Batches, messages+m.Messages, failed+m.Failed
	}
	return batches, messages, failed
}
