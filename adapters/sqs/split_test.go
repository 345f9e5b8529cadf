package sqs

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
)

// splitReplayOnFIFO: a dead-letter replay (a PublishID of its own) of a batch too large for
// one message, on an Exclusive queue (a FIFO queue, which drops a repeated deduplication id),
// published through be, which has no overflow store: the batch is split, and every part
// arrives. Each part has a new batch id and no PublishID (core/envelope.Split), so no part is
// taken for a repeat of another. TestBigBatches runs it.
func splitReplayOnFIFO(t *testing.T, be *Backend) {
	t.Helper()
	var ids []string
	var msgs []json.RawMessage
	for i := range 8 {
		ids = append(ids, fmt.Sprint("m", i))
		msgs = append(msgs, json.RawMessage(strconv.Quote(randomString(30<<10))))
	}
	b := parity.EncodeBatch("splitfifo", ids, msgs...)
	b.Exclusive, b.PublishID = true, "replay-"+core.NewID()
	mustPublish(t, be, b)
	got := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < len(ids) && time.Now().Before(deadline) {
		cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n-" + core.NewID(), Lease: 10 * time.Second, Wait: time.Second,
			Queues: []core.QueueSlots{{Queue: "splitfifo", Free: 1, Exclusive: true}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			partIDs, _, err := parity.DecodeBatch(c.Body)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range partIDs {
				got[id] = true
			}
			if err := be.Ack(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) != len(ids) {
		t.Fatalf("%d of %d messages of the split replay arrived: %v", len(got), len(ids), got)
	}
}
