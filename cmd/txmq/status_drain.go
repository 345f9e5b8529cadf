package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/txmq/txmq/core"
)

// oldDepth is one old backend's depth of one queue during a backend swap.
type oldDepth struct {
	Backend  string `json:"backend"`
	Ready    int64  `json:"ready"`
	InFlight int64  `json:"in_flight"`
	Delayed  int64  `json:"delayed"`
}

// oldBackendStatus is one old backend (TXMQ_DRAIN_BACKENDS) with its depths over every row.
type oldBackendStatus struct {
	name   string     // redacted URL
	total  core.Depth // over every queue of the report
	settle int64      // core.DepthsSettle in seconds: 0 when its counts are exact
}

// statusFromOldBackends adds each old backend's depths to every row and returns one summary per
// old backend, in the order given.
func statusFromOldBackends(ctx context.Context, urls []string, rows map[string]*queueStatus) ([]oldBackendStatus, error) {
	names := make([]string, 0, len(rows))
	for q := range rows {
		names = append(names, q)
	}
	var out []oldBackendStatus
	for _, raw := range urls {
		s, err := oldBackendDepths(ctx, raw, names, rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func oldBackendDepths(ctx context.Context, raw string, names []string, rows map[string]*queueStatus) (oldBackendStatus, error) {
	s := oldBackendStatus{name: core.Redact(raw)}
	be, err := openBackend(ctx, drainSetting, raw, false)
	if err != nil {
		return s, fmt.Errorf("old backend (--drain) %s: %w", s.name, err)
	}
	defer func() { _ = be.Close() }()
	s.settle = int64(core.DepthsSettle(be).Seconds())
	if len(names) == 0 {
		return s, nil
	}
	depths, err := be.Depths(ctx, names)
	if err != nil {
		return s, core.RedactError(fmt.Errorf("asking old backend (--drain) %s for depths: %w", s.name, err), raw)
	}
	for _, q := range names {
		d := depths[q]
		rows[q].Old = append(rows[q].Old, oldDepth{Backend: s.name, Ready: d.Ready, InFlight: d.InFlight, Delayed: d.Delayed})
		s.total.Ready += d.Ready
		s.total.InFlight += d.InFlight
		s.total.Delayed += d.Delayed
	}
	return s, nil
}

// printOldBackends prints the old backends' section of the status table.
func printOldBackends(w io.Writer, olds []oldBackendStatus) error {
	if len(olds) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OLD BACKEND (draining)\tREADY\tIN FLIGHT\tDELAYED\tSTATE\t")
	for _, o := range olds {
		state := "holds batches: nodes with the drain setting poll it"
		if o.total == (core.Depth{}) {
			state = "empty: nodes with the drain setting only re-check it"
			if o.settle > 0 {
				state += fmt.Sprintf(" (approximate counts: trust it once it reads empty for %ds and a lease)", o.settle)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", o.name, o.total.Ready, o.total.InFlight, o.total.Delayed, state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "An old backend is retired by removing it from TXMQ_DRAIN_BACKENDS once no node runs the old\n"+
		"setting any more and it shows empty here; until then nodes re-check it (TXMQ_DRAIN_RECHECK_INTERVAL).")
	return err
}
