package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
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

// The Messages list's paging: the page size when the form names no limit, and how deep
// (offset plus page) the list may go. Pages are offsets into the newest-first list, which
// moves while work runs: a message may show on two pages or on none, as in any live view.
const (
	messagePage     = 50
	maxMessageDepth = 10000
	payloadPreview  = 200 // characters of a payload shown in the list
)

// messageRow is one line of the Messages list: the message and its payload preview.
type messageRow struct {
	core.MessageInfo
	Payload string
}

// messages serves the Messages page: one message by id (?id=) with its payload, else the
// messages filtered by queue, state and publish time (since/until), a page (limit, default
// messagePage) at a time from offset, with a preview of each payload. When no lookup is
// possible the Inspector's error is shown on the page.
func (s *server) messages(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.o.Timeout)
	defer cancel()
	q := r.URL.Query()
	id := strings.TrimSpace(q.Get("id"))
	form := messageFilter{Queue: q.Get("queue"), State: q.Get("state"), Since: q.Get("since"), Until: q.Get("until"), Limit: q.Get("limit")}
	data := map[string]any{"Title": "Messages", "ID": id, "Filter": form, "States": core.MessageStates, "HidePayloads": s.o.HidePayloads}
	var errs []string
	if id != "" {
		m, err := s.o.Inspector.Get(ctx, id)
		if err != nil {
			errs = append(errs, err.Error())
		} else {
			data["Message"] = m
			data["Cancellable"] = cancellable(m.State)
			if !s.o.HidePayloads {
				if p, err := s.o.Inspector.Payload(ctx, m.Queue, m.ID); err != nil {
					data["PayloadNote"] = err.Error()
				} else {
					data["Payload"] = s.o.FormatPayload(m.Queue, p)
				}
			}
		}
	} else if f, err := form.parse(time.Now()); err != nil {
		errs = append(errs, err.Error())
	} else if offset, err := parseOffset(q.Get("offset")); err != nil {
		errs = append(errs, err.Error())
	} else {
		page := f.Limit
		if page == 0 {
			page = messagePage
		}
		if offset+page > maxMessageDepth {
			errs = append(errs, fmt.Sprintf("offset %d: the list goes %d messages deep; narrow it by queue, state or time", offset, maxMessageDepth))
		} else {
			f.Limit = offset + page + 1
			ms, err := s.o.Inspector.List(ctx, f)
			if err != nil {
				errs = append(errs, err.Error())
			}
			ms = ms[min(offset, len(ms)):]
			if len(ms) > page {
				ms = ms[:page]
				data["Next"] = s.messagesPage(q, offset+page)
			}
			if offset > 0 {
				data["Prev"] = s.messagesPage(q, max(offset-page, 0))
			}
			rows, note := s.messageRows(ctx, f.Queue, ms)
			data["Rows"], data["Listed"], data["PayloadNote"], data["Offset"] = rows, err == nil, note, offset
			data["BulkNote"], data["BulkForm"] = s.bulkCancel(form), !s.o.ReadOnly && s.bulkCancel(form) == ""
			data["RunNowForm"], data["RunNowNote"] = s.runNowNote(form)
		}
	}
	data["Errors"] = errs
	s.render(w, r, "messages.html", data)
}

// messagesPage returns the link to the Messages list of q from offset.
func (s *server) messagesPage(q url.Values, offset int) string {
	q = maps.Clone(q)
	q.Del(msgParam)
	q.Del(msgArgParam)
	q.Del(msgSigParam)
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	} else {
		q.Del("offset")
	}
	return withQuery("messages", q)
}

// messageRows adds each message's payload preview (unless payloads are hidden), with a note
// when the backend cannot give them.
func (s *server) messageRows(ctx context.Context, queue string, ms []core.MessageInfo) ([]messageRow, string) {
	rows := make([]messageRow, len(ms))
	for i, m := range ms {
		rows[i].MessageInfo = m
	}
	if s.o.HidePayloads || len(ms) == 0 {
		return rows, ""
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	payloads, err := s.o.Inspector.Payloads(ctx, queue, ids)
	if err != nil {
		return rows, err.Error()
	}
	for i := range rows {
		if p, ok := payloads[rows[i].ID]; ok {
			rows[i].Payload = preview(s.o.FormatPayload(rows[i].Queue, p))
		}
	}
	return rows, ""
}

// preview shortens a formatted payload to one line of at most payloadPreview characters.
func preview(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > payloadPreview {
		return string(r[:payloadPreview]) + "…"
	}
	return s
}

// prettyJSON is the default Options.FormatPayload: indented JSON, or the bytes as they are
// when they are not JSON.
func prettyJSON(_ string, p []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, p, "", "  ") != nil {
		return string(p)
	}
	return out.String()
}

// parseOffset reads the list's offset: "" is 0.
func parseOffset(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("offset %q: use a number >= 0", v)
	}
	return n, nil
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
