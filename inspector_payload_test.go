package txmq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/txmqtest"
)

// TestInspectorPayloads: the backend's native lookup gives the payloads of the messages it
// holds, one or several in one pass; an id it does not hold has none (ErrMessageNotFound),
// and a backend without lookup says so (ErrLookupUnsupported).
func TestInspectorPayloads(t *testing.T) {
	t.Parallel()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "payloads", txmq.QueueConfig[map[string]int]{Transactional: txmq.Try})
	be := memory.New(nil)
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	ctx := context.Background()
	if err := q.PublishMany(ctx, n, []map[string]int{{"a": 1}, {"b": 2}}, txmq.IDs("p-1", "p-2"), txmq.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	in := n.Inspector()
	var p []byte
	txmqtest.Eventually(t, 10*time.Second, func() bool { p, err = in.Payload(ctx, "", "p-2"); return err == nil }, "p-2 stored")
	if string(p) != `{"b":2}` {
		t.Errorf("Payload(p-2) = %s, want {\"b\":2}", p)
	}
	got, err := in.Payloads(ctx, "payloads", []string{"p-1", "p-2", "p-9"})
	if err != nil || len(got) != 2 || string(got["p-1"]) != `{"a":1}` {
		t.Errorf("Payloads = %q, %v; want p-1 and p-2 only", got, err)
	}
	if _, err := in.Payload(ctx, "payloads", "p-9"); !errors.Is(err, txmq.ErrMessageNotFound) {
		t.Errorf("Payload of an unknown id: %v; want ErrMessageNotFound", err)
	}
	if _, err := txmq.NewInspector(nil, opaque{be}).Payload(ctx, "", "p-1"); !errors.Is(err, txmq.ErrLookupUnsupported) {
		t.Errorf("Payload on a backend without lookup: %v; want ErrLookupUnsupported", err)
	}
}
