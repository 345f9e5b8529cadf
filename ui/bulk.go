package ui

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/txmq/txmq"
)

// bulkCancel returns what the Messages list shows about cancelling what it lists: "" when
// the form is offered (one queue and a waiting state listed, the Inspector can cancel, not
// read-only), else why not (shown instead of the form; nothing in read-only mode).
func (s *server) bulkCancel(f messageFilter) string {
	switch {
	case s.o.ReadOnly:
		return ""
	case s.o.Inspector.CanCancel() != nil:
		return "Bulk cancel unavailable: " + s.o.Inspector.CanCancel().Error()
	case f.Queue == "" || !slices.Contains(txmq.BulkStates, txmq.MessageState(f.State)):
		return fmt.Sprintf("To cancel in bulk, list one queue and one state of %v.", txmq.BulkStates)
	}
	return ""
}

// cancelWhere cancels every message of the form's queue in its state (and time range) once
// the queue's name is typed in the confirmation box, as a purge asks.
func (s *server) cancelWhere(ctx context.Context, r *http.Request) (banner, error) {
	form := messageFilter{Queue: r.PostFormValue("queue"), State: r.PostFormValue("state"), Since: r.PostFormValue("since"), Until: r.PostFormValue("until")}
	f, err := form.parse(time.Now())
	if err != nil {
		return banner{}, err
	}
	if f.Queue == "" {
		return banner{}, fmt.Errorf("name the queue whose messages to cancel")
	}
	if r.PostFormValue("confirm") != f.Queue {
		return banner{}, fmt.Errorf("not cancelled: type the queue name %q in the confirmation box", f.Queue)
	}
	res, err := s.o.Inspector.CancelWhere(ctx, f)
	if err != nil {
		return banner{}, fmt.Errorf("cancelled %d message(s) of %s, then: %w", res.Done, f.Queue, err)
	}
	return banner{"cancelledq", []string{strconv.Itoa(res.Done), string(f.State), f.Queue, strconv.Itoa(res.Skipped)}}, nil
}

// runNowNote says whether the Messages list offers to run what it lists now (one queue and
// state delayed or retry listed, the backend can, not read-only), and, when it does not only
// because the backend cannot, why.
func (s *server) runNowNote(f messageFilter) (offered bool, note string) {
	if s.o.ReadOnly || f.Queue == "" || !slices.Contains(txmq.RunNowStates, txmq.MessageState(f.State)) {
		return false, ""
	}
	if err := s.o.Inspector.CanRunNow(); err != nil {
		return false, "Run now unavailable: " + err.Error()
	}
	return true, ""
}

// runNow makes every batch of the form's queue holding messages in its state (delayed or
// retry, and time range) due now, once the queue's name is typed in the confirmation box.
func (s *server) runNow(ctx context.Context, r *http.Request) (banner, error) {
	form := messageFilter{Queue: r.PostFormValue("queue"), State: r.PostFormValue("state"), Since: r.PostFormValue("since"), Until: r.PostFormValue("until")}
	f, err := form.parse(time.Now())
	if err != nil {
		return banner{}, err
	}
	if f.Queue == "" {
		return banner{}, fmt.Errorf("name the queue whose messages to run now")
	}
	if r.PostFormValue("confirm") != f.Queue {
		return banner{}, fmt.Errorf("not run: type the queue name %q in the confirmation box", f.Queue)
	}
	res, err := s.o.Inspector.RunNow(ctx, f)
	if err != nil {
		return banner{}, fmt.Errorf("made %d message(s) of %s due now, then: %w", res.Done, f.Queue, err)
	}
	return banner{"rannow", []string{strconv.Itoa(res.Done), string(f.State), f.Queue, strconv.Itoa(res.Skipped)}}, nil
}
