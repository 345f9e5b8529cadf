package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

// messageFilter is the Messages page's list form as submitted.
type messageFilter struct {
	Queue, State, Since, Until, Limit string
}

// messages serves the Messages page: one message by id (?id=), else the messages filtered by
// queue, state and publish time (since/until) with a limit. When no lookup is possible the
// Inspector's error is shown on the page.
func (s *server) messages(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.o.Timeout)
	defer cancel()
	q := r.URL.Query()
	id := strings.TrimSpace(q.Get("id"))
	form := messageFilter{Queue: q.Get("queue"), State: q.Get("state"), Since: q.Get("since"), Until: q.Get("until"), Limit: q.Get("limit")}
	data := map[string]any{"Title": "Messages", "ID": id, "Filter": form, "States": core.MessageStates}
	var errs []string
	if id != "" {
		m, err := s.o.Inspector.Get(ctx, id)
		if err != nil {
			errs = append(errs, err.Error())
		} else {
			data["Message"] = m
			data["Cancellable"] = cancellable(m.State)
		}
	} else if f, err := form.parse(time.Now()); err != nil {
		errs = append(errs, err.Error())
	} else {
		ms, err := s.o.Inspector.List(ctx, f)
		if err != nil {
			errs = append(errs, err.Error())
		}
		data["Rows"], data["Listed"] = ms, err == nil
	}
	data["Errors"] = errs
	s.render(w, r, "messages.html", data)
}

// cancellable reports whether a message in state may still be cancelled.
func cancellable(st core.MessageState) bool {
	return st != core.StateCompleted && st != core.StateCancelled && st != core.StateDead
}

// parse checks the list form and returns its filter.
func (f messageFilter) parse(now time.Time) (core.MessageFilter, error) {
	out := core.MessageFilter{Queue: strings.TrimSpace(f.Queue), State: core.MessageState(f.State)}
	if out.State != "" && !slices.Contains(core.MessageStates, out.State) {
		return out, fmt.Errorf("state %q: choose one of the listed states", f.State)
	}
	if f.Limit != "" {
		n, err := strconv.Atoi(f.Limit)
		if err != nil || n <= 0 {
			return out, fmt.Errorf("limit %q: use a number > 0", f.Limit)
		}
		out.Limit = n
	}
	var err error
	if out.Since, err = parseWhen("since", f.Since, now); err != nil {
		return out, err
	}
	if out.Until, err = parseWhen("until", f.Until, now); err != nil {
		return out, err
	}
	return out, nil
}

// parseWhen reads a time field: RFC 3339, a browser's datetime-local value (UTC), or a
// duration meaning that long before now; "" is zero.
func parseWhen(name, v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%s %q: use an RFC 3339 time (2026-01-02T15:04:05Z, UTC without a zone) or a duration ago (90m)", name, v)
}

func (s *server) cancelMessage(ctx context.Context, r *http.Request) (banner, error) {
	id := strings.TrimSpace(r.PostFormValue("id"))
	if id == "" {
		return banner{}, errors.New("name the message to cancel")
	}
	m, err := s.o.Inspector.Cancel(ctx, id)
	if err != nil {
		if errors.Is(err, txmq.ErrNotCancellable) || errors.Is(err, txmq.ErrMessageNotFound) || errors.Is(err, txmq.ErrLookupUnsupported) {
			return banner{}, fmt.Errorf("message %s not cancelled: %w", id, err)
		}
		return banner{}, err
	}
	return banner{"cancelled", []string{id, m.Queue, string(m.State)}}, nil
}
