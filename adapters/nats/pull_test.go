package nats

import (
	"context"
	"errors"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// parseAck reads both ack subject layouts, and refuses what jetstream.Msg.Metadata refuses.
func TestParseAck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply string
		want  ackMeta
		ok    bool
	}{
		{"v1", "$JS.ACK.S.txmq.3.10.9.1733445600000000000.0", ackMeta{3, 10, time.Unix(0, 1733445600000000000)}, true},
		{"v2", "$JS.ACK._.ACCHASH.S.txmq.12.11.9.1733445600000000001.5.tok", ackMeta{12, 11, time.Unix(0, 1733445600000000001)}, true},
		{"v2 without the last token", "$JS.ACK.dom.ACCHASH.S.txmq.7.10.9.5.5", ackMeta{7, 10, time.Unix(0, 5)}, true},
		{"v2 with more tokens", "$JS.ACK.dom.ACCHASH.S.txmq.2.10.9.1.5.tok.extra", ackMeta{2, 10, time.Unix(0, 1)}, true},
		{"malformed numbers read as 0", "$JS.ACK.S.txmq.x3.-1.9.t.0", ackMeta{0, 0, time.Unix(0, 0)}, true},
		{"empty numbers read as 0", "$JS.ACK.S.txmq....1.0", ackMeta{0, 0, time.Unix(0, 1)}, true},
		{"empty", "", ackMeta{}, false},
		{"not an ack subject", "_INBOX.abc.def.g.h.i.j.k.l", ackMeta{}, false},
		{"too few tokens", "$JS.ACK.S.txmq.3.10.9.1", ackMeta{}, false},
		{"ten tokens", "$JS.ACK.d.h.S.txmq.3.10.9.1", ackMeta{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parseAck(tc.reply)
			if ok != tc.ok || got.delivered != tc.want.delivered || got.streamSeq != tc.want.streamSeq || (ok && !got.timestamp.Equal(tc.want.timestamp)) {
				t.Fatalf("parseAck(%q) = %+v, %v; want %+v, %v", tc.reply, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// pullStatus reads status messages as jetstream's Fetch does.
func TestPullStatus(t *testing.T) {
	t.Parallel()
	status := func(code, descr string) *natsgo.Msg {
		return &natsgo.Msg{Header: natsgo.Header{"Status": []string{code}, "Description": []string{descr}}}
	}
	tests := []struct {
		name string
		msg  *natsgo.Msg
		user bool
		err  error // errAny: some error other than the sentinels below
	}{
		{"data", &natsgo.Msg{Data: []byte("x"), Header: natsgo.Header{"Status": []string{"404"}}}, true, nil},
		{"no header", &natsgo.Msg{}, true, nil},
		{"header without status", &natsgo.Msg{Header: natsgo.Header{"Txmq-Batch": []string{"b"}}}, true, nil},
		{"heartbeat", status("100", "Idle Heartbeat"), false, errControlMsg},
		{"no messages", status("404", "No Messages"), false, nil},
		{"request timeout", status("408", "Request Timeout"), false, nil},
		{"no responders", status("503", ""), false, natsgo.ErrNoResponders},
		{"bad request", status("400", "Bad Request"), false, jetstream.ErrBadRequest},
		{"leadership change", status("409", "Leadership Change"), false, jetstream.ErrConsumerLeadershipChanged},
		{"consumer deleted", status("409", "Consumer Deleted"), false, jetstream.ErrConsumerDeleted},
		{"server shutdown", status("409", "Server Shutdown"), false, jetstream.ErrServerShutdown},
		{"max bytes", status("409", "Message Size Exceeds MaxBytes"), false, nil},
		{"other conflict", status("409", "Exceeded MaxWaiting"), false, errAny},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			user, err := pullStatus(tc.msg)
			if user != tc.user {
				t.Fatalf("user = %v, want %v", user, tc.user)
			}
			switch {
			case tc.err == errAny:
				if err == nil || err == errControlMsg {
					t.Fatalf("err = %v, want an error", err)
				}
			case !errors.Is(err, tc.err) || (tc.err == nil && err != nil):
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
		})
	}
}

// errAny stands for "an error" in TestPullStatus.
var errAny = errors.New("any error")

// parseAck agrees with jetstream.Msg.Metadata on what a real server sends, first delivery
// and redelivery, and a pull ends with its batch.
func TestParseAckMatchesMetadata(t *testing.T) {
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
		got, ok := parseAck(m.Reply())
		if !ok || got.delivered != meta.NumDelivered || got.delivered != want || got.streamSeq != meta.Sequence.Stream || !got.timestamp.Equal(meta.Timestamp) {
			t.Fatalf("parseAck(%q) = %+v, %v; Metadata says %+v, want delivery %d", m.Reply(), got, ok, meta, want)
		}
		if err := m.Nak(); err != nil {
			t.Fatal(err)
		}
	}
	// A pull of 2 gets the Nak'd message and a new one, and ends without waiting for its
	// expiry.
	if _, err := js.Publish(ctx, name+".r", []byte("x")); err != nil {
		t.Fatal(err)
	}
	be := &Backend{nc: nc}
	p, err := be.startPull(cons, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 2 {
		if m := p.next(true); m == nil {
			t.Fatalf("message %d: pull ended (%v)", i, p.err)
		}
	}
	if !p.done || p.err != nil || time.Since(start) > 30*time.Second {
		t.Fatalf("pull of 2 after 2 messages: done %v, err %v", p.done, p.err)
	}
	// A no_wait pull for more than is there gets what is there and ends on the server's
	// status, not an error (the two messages above are held, unacknowledged).
	for range 2 {
		if _, err := js.Publish(ctx, name+".r", []byte("y")); err != nil {
			t.Fatal(err)
		}
	}
	p, err = be.startPull(cons, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := p.next(true); m != nil; m = p.next(true) {
		n++
	}
	if n != 2 || p.err != nil {
		t.Fatalf("no_wait pull of 10: %d messages, err %v; want 2, nil", n, p.err)
	}
}
