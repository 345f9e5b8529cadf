package nats

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// numDelivered reads the delivery count of both ack subject layouts, and refuses what
// jetstream.Msg.Metadata refuses.
func TestNumDelivered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply string
		want  uint64
		ok    bool
	}{
		{"v1", "$JS.ACK.S.txmq.3.10.9.1733445600000000000.0", 3, true},
		{"v2", "$JS.ACK._.ACCHASH.S.txmq.12.10.9.1733445600000000000.5.tok", 12, true},
		{"v2 without the last token", "$JS.ACK.dom.ACCHASH.S.txmq.7.10.9.1733445600000000000.5", 7, true},
		{"v2 with more tokens", "$JS.ACK.dom.ACCHASH.S.txmq.2.10.9.1.5.tok.extra", 2, true},
		{"malformed number reads as 0", "$JS.ACK.S.txmq.x3.10.9.1.0", 0, true},
		{"empty number reads as 0", "$JS.ACK.S.txmq..10.9.1.0", 0, true},
		{"empty", "", 0, false},
		{"not an ack subject", "_INBOX.abc.def.g.h.i.j.k.l", 0, false},
		{"too few tokens", "$JS.ACK.S.txmq.3.10.9.1", 0, false},
		{"ten tokens", "$JS.ACK.d.h.S.txmq.3.10.9.1", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := numDelivered(tc.reply)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("numDelivered(%q) = %d, %v; want %d, %v", tc.reply, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// numDelivered agrees with jetstream.Msg.Metadata on what a real server sends, first
// delivery and redelivery.
func TestNumDeliveredMatchesMetadata(t *testing.T) {
	t.Parallel()
	nc, err := natsgo.Connect(natstest.NATSURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := testenv.UniqueName("nd")
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = js.DeleteStream(context.Background(), name) }()
	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, name+".r", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for want := uint64(1); want <= 2; want++ {
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("delivery %d: %v", want, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		got, ok := numDelivered(m.Reply())
		if !ok || got != meta.NumDelivered || got != want {
			t.Fatalf("numDelivered(%q) = %d, %v; Metadata says %d, want %d", m.Reply(), got, ok, meta.NumDelivered, want)
		}
		if err := m.Nak(); err != nil {
			t.Fatal(err)
		}
	}
}
