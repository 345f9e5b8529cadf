package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/txmq/txmq/internal/envelope"
	"github.com/txmq/txmq/outbox"
)

// deadPage is how many dead letters one page of the list shows.
const deadPage = 50

// deadList lists dead letters, deadPage at a time in id order: ?after=ID shows the page after
// that id (keyset paging, so a page stays cheap however many there are), with a link to the
// next page while there are more.
func (s *server) deadList(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.o.Timeout)
	defer cancel()
	query := r.URL.Query()
	queue := query.Get("queue")
	state := outbox.DLQDead
	if query.Get("all") != "" {
		state = outbox.DLQAll
	}
	after, _ := strconv.ParseInt(query.Get("after"), 10, 64)
	rows, err := s.o.Store.ListDeadLetters(ctx, outbox.DLQFilter{Queue: queue, AfterID: max(after, 0), Limit: deadPage + 1, State: state})
	var errs []string
	if err != nil {
		errs = append(errs, err.Error())
	}
	data := map[string]any{"Title": "Dead letters", "Queue": queue, "All": state == outbox.DLQAll, "Errors": errs, "PageSize": deadPage}
	if len(rows) > deadPage {
		rows = rows[:deadPage]
		next := url.Values{"after": {strconv.FormatInt(rows[len(rows)-1].ID, 10)}}
		if queue != "" {
			next.Set("queue", queue)
		}
		if state == outbox.DLQAll {
			next.Set("all", "1")
		}
		if v := query.Get("refresh"); v != "" {
			next.Set("refresh", v)
		}
		data["Next"] = "dead?" + next.Encode()
	}
	if after > 0 {
		first := url.Values{}
		for _, k := range []string{"queue", "all", "refresh"} {
			if v := query.Get(k); v != "" {
				first.Set(k, v)
			}
		}
		data["First"] = "dead?" + first.Encode()
	}
	data["Rows"] = rows
	s.render(w, r, "dead.html", data)
}

// shownMessage is one message of a dead letter, decoded for display.
type shownMessage struct {
	ID   string
	JSON string
}

func (s *server) deadShow(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.o.Timeout)
	defer cancel()
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "no such dead letter", http.StatusNotFound)
		return
	}
	row, err := s.o.Store.GetDeadLetter(ctx, id)
	if err != nil {
		if errors.Is(err, outbox.ErrNotFound) {
			http.Error(w, "no such dead letter", http.StatusNotFound)
			return
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var msgs []shownMessage
	var decodeErr string
	if env, err := envelope.Decode(row.Body); err != nil {
		decodeErr = err.Error()
	} else {
		for i, m := range env.Messages {
			sm := shownMessage{}
			if !s.o.HidePayloads {
				sm.JSON = s.o.FormatPayload(row.Queue, m)
			}
			if i < len(env.MessageIDs) {
				sm.ID = env.MessageIDs[i]
			}
			msgs = append(msgs, sm)
		}
	}
	s.render(w, r, "letter.html", map[string]any{"Title": fmt.Sprintf("Dead letter %d", id), "Row": row, "Messages": msgs, "DecodeErr": decodeErr, "HidePayloads": s.o.HidePayloads})
}

func (s *server) replay(ctx context.Context, r *http.Request) (banner, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return banner{}, fmt.Errorf("no dead letter %q", r.PathValue("id"))
	}
	if err := s.o.Store.Replay(ctx, id); err != nil {
		return banner{}, err
	}
	return banner{"replayed", []string{strconv.FormatInt(id, 10)}}, nil
}

// replayQueue replays every dead (not replayed) letter of the form's queue, oldest first. A
// failure part way says how many were replayed before it: the rest stay dead, replayable.
func (s *server) replayQueue(ctx context.Context, r *http.Request) (banner, error) {
	queue := r.PostFormValue("queue")
	if queue == "" {
		return banner{}, errors.New("name the queue whose dead letters to replay")
	}
	n, err := s.o.Store.ReplayQueue(ctx, queue)
	if err != nil {
		return banner{}, fmt.Errorf("replayed %d dead letter(s) of %s, then: %w", n, queue, err)
	}
	return banner{"replayedq", []string{strconv.Itoa(n), queue}}, nil
}

func (s *server) purge(ctx context.Context, r *http.Request) (banner, error) {
	queue := r.PostFormValue("queue")
	if queue == "" {
		return banner{}, errors.New("name the queue whose dead letters to purge")
	}
	if r.PostFormValue("confirm") != queue {
		return banner{}, fmt.Errorf("not purged: type the queue name %q in the confirmation box", queue)
	}
	n, err := s.o.Store.Purge(ctx, outbox.DLQFilter{Queue: queue})
	if err != nil {
		return banner{}, err
	}
	return banner{"purged", []string{strconv.FormatInt(n, 10), queue}}, nil
}
