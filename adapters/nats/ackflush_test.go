package nats

import (
	"context"
	"errors"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
)

// An Ack waits for its group, so its lease and connection are checked again right before
// its +ACK leaves: one that ran out meanwhile is refused with ErrLeaseLost and never sent;
// the others are published and confirmed by the group's round trip.
func TestAckGroupChecksLeaseBeforeSending(t *testing.T) {
	t.Parallel()
	be := openBackend(t, natstest.NATSURL(t), nil)
	nc, err := natsgo.Connect(be.nc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	inbox := nc.NewInbox()
	got := make(chan *natsgo.Msg, 16)
	sub, err := nc.ChanSubscribe(inbox+".*", got)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	epoch := be.connEpoch()
	const ackWait = 30 * time.Second
	now := time.Now()
	tests := []struct {
		name  string
		lease time.Time
		conn  uint64
		lost  bool
	}{
		{"held", now.Add(ackWait), epoch, false},
		{"lease ran out", now.Add(-time.Second), epoch, true},
		{"within the margin", now.Add(be.leaseMargin(ackWait) / 2), epoch, true},
		{"reconnected since", now.Add(ackWait), epoch + 1, true},
	}
	sent := 0
	for _, tc := range tests {
		reply := inbox + "." + map[bool]string{false: "held", true: "lost"}[tc.lost]
		h := &handle{be: be, msg: &natsgo.Msg{Reply: reply}, ackWait: ackWait, leaseUntil: tc.lease, conn: tc.conn}
		err := be.acks.ack(context.Background(), h)
		if tc.lost != errors.Is(err, core.ErrLeaseLost) || (!tc.lost && err != nil) {
			t.Fatalf("%s: ack = %v, want lost %v", tc.name, err, tc.lost)
		}
		if !tc.lost {
			sent++
		}
	}
	// The held one's +ACK left before its round trip came back; the server relays it at once.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for range sent {
		select {
		case m := <-got:
			if m.Subject != inbox+".held" || string(m.Data) != "+ACK" {
				t.Fatalf("got %q on %s, want +ACK on %s.held", m.Data, m.Subject, inbox)
			}
		case <-deadline:
			t.Fatal("the held claim's +ACK never arrived")
		}
	}
	// Nothing more: the lost ones were never sent (a round trip on be's connection after
	// theirs, then one on nc's, orders everything be sent before it).
	if err := be.acks.flush(); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		t.Fatalf("a refused ack was sent: %q on %s", m.Data, m.Subject)
	default:
	}
}
