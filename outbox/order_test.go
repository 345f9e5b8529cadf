package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// keyed returns a one-message batch of queue orders with ordering key key and message name.
func keyed(key, name string) core.OutgoingBatch {
	id := core.NewID()
	return core.OutgoingBatch{ID: id, Queue: "orders", Key: key, Body: envelope.Encode(&envelope.Envelope{
		ID: id, Queue: "orders", Created: time.Now(), Key: key, MessageIDs: []string{core.NewID()},
		Messages: []json.RawMessage{json.RawMessage(fmt.Sprintf(`"%s"`, name))},
	})}
}

// names lists the published batches as key:message, in publish order.
func names(bs []core.OutgoingBatch) string {
	var s []string
	for _, b := range bs {
		env, err := envelope.Decode(b.Body)
		if err != nil || env.Key != b.Key {
			return fmt.Sprintf("bad batch %s (%v)", b.ID, err)
		}
		s = append(s, b.Key+":"+strings.Trim(string(env.Messages[0]), `"`))
	}
	return strings.Join(s, " ")
}

// TestSweepKeepsKeyOrder: a keyed row that fails holds back the later rows of its key (no
// attempt counted on them), while other keys go on; once it is published, the rest of its key
// follows in order, with the key read back from the table.
func TestSweepKeepsKeyOrder(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	failA1 := true
	e.be.fn = func(_ context.Context, b core.OutgoingBatch) error {
		if failA1 && strings.Contains(string(b.Body), `"a1"`) {
			return errPlain
		}
		return nil
	}
	if err := e.store.Handoff(ctx, []core.OutgoingBatch{keyed("a", "a1"), keyed("b", "b1"), keyed("a", "a2"), keyed("b", "b2"), keyed("a", "a3")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := names(e.be.published()); got != "b:b1 b:b2" {
		t.Fatalf("first sweep published %q; want key b only (a1 failed, a2 and a3 wait)", got)
	}
	table := pgx.Identifier{e.schema, "txmq_outbox"}.Sanitize()
	var waiting int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE order_key = 'a' AND attempts = 0").Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	if waiting != 2 {
		t.Fatalf("%d rows of key a without an attempt; want 2 (a2 and a3 waited, untried)", waiting)
	}
	failA1 = false
	if _, err := e.pool.Exec(ctx, "UPDATE "+table+" SET next_attempt_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := names(e.be.published()); got != "b:b1 b:b2 a:a1 a:a2 a:a3" {
		t.Fatalf("published %q; want key a in order after key b", got)
	}
	if n := e.outboxRows(t); n != 0 {
		t.Fatalf("%d rows left", n)
	}
}
