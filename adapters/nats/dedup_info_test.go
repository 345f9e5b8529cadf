package nats

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
)

// TestDedupPublishSendsNoStreamInfo: setting a queue's duplicate window on its first publish
// with a caller id sends no stream info request (it reads the create's answer): a busy cluster
// serves info requests last, and one that outlasted the call timeout failed the publish, so
// the message of a queue without an outbox was lost (parity identity/ids_dedup_within_window
// failed on the NATS cluster under load). The window is set all the same: a repeat of the id
// is refused.
func TestDedupPublishSendsNoStreamInfo(t *testing.T) {
	t.Parallel()
	url := natstest.NATSURL(t)
	be := openBackend(t, url, nil)
	ctx := context.Background()
	publish(t, be, "q", "plain", time.Time{}) // the stream is set up

	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var infos atomic.Int32
	sub, err := nc.Subscribe("$JS.API.STREAM.INFO."+be.opts.Prefix+"_q", func(*natsgo.Msg) { infos.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	dedup := func(id string) core.OutgoingBatch {
		return core.OutgoingBatch{ID: id, Queue: "q", Body: []byte("body-" + id), MessageIDs: []string{"x"}, DedupWindow: 45 * time.Second, DedupIDs: []string{"x"}}
	}
	if err := be.Publish(ctx, dedup("d1")); err != nil {
		t.Fatalf("publish with a caller id: %v", err)
	}
	if err := be.Publish(ctx, dedup("d2")); !errors.Is(err, core.ErrDuplicate) {
		t.Fatalf("publish of the same caller id again: %v; want a duplicate refusal", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := infos.Load(); n != 0 {
		t.Errorf("%d stream info requests while setting the duplicate window; want 0", n)
	}
	s, err := be.js.Stream(ctx, be.opts.Prefix+"_q")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Duplicates; got != 45*time.Second {
		t.Errorf("stream duplicate window %v; want 45s", got)
	}
}
