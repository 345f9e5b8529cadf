package nats

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pullIter is one pull request of a consumer and the messages it delivers, read by the
// goroutine that sent it (see poll). It does what jetstream.Consumer.Fetch does, without
// Fetch's goroutine between the subscription and the reader: at one message per batch that
// goroutine's hand-off, the timer it armed per message and the ack subject it parsed per
// message were about a tenth of a node's CPU.
//
// The request asks for up to batch messages, waiting up to expires on the server (no_wait
// when expires is 0). It ends when batch messages arrived, on the server's status message (no
// messages, request timeout, or an error such as a leadership change or a deleted
// consumer), or expires plus a second after it was sent, as Fetch does: a pull is never cut
// short client-side before the server ends it, since the client would drop what the server
// already sent it.
type pullIter struct {
	sub   *natsgo.Subscription
	ch    chan *natsgo.Msg
	timer *time.Timer
	left  int   // messages the request may still deliver
	done  bool  // the request ended
	err   error // why, when it was an error
}

// pullClientGrace is how long after a pull's expiry the client stops waiting for the server
// to end it (as jetstream's Fetch).
const pullClientGrace = time.Second

// startPull sends a pull request of cons for up to batch messages, waiting up to expires on
// the server (no_wait when expires is 0).
func (be *Backend) startPull(cons jetstream.Consumer, batch int, expires time.Duration) (*pullIter, error) {
	info := cons.CachedInfo()
	if info == nil {
		return nil, fmt.Errorf("pull: no consumer info")
	}
	p := &pullIter{ch: make(chan *natsgo.Msg, 2*batch+1), left: batch}
	inbox := be.nc.NewInbox()
	sub, err := be.nc.ChanSubscribe(inbox, p.ch)
	if err != nil {
		return nil, err
	}
	req := fmt.Appendf(nil, `{"batch":%d`, batch)
	if expires > 0 {
		req = fmt.Appendf(req, `,"expires":%d}`, expires.Nanoseconds())
	} else {
		req = append(req, `,"no_wait":true}`...)
	}
	subject := "$JS.API.CONSUMER.MSG.NEXT." + info.Stream + "." + info.Name
	if err := be.nc.PublishRequest(subject, inbox, req); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	p.sub = sub
	p.timer = time.NewTimer(expires + pullClientGrace)
	return p, nil
}

// next returns the request's next message, nil once the request ended (p.err says whether by
// an error), or, when wait is false, when no message is waiting yet.
func (p *pullIter) next(wait bool) *natsgo.Msg {
	for !p.done {
		var m *natsgo.Msg
		if wait {
			select {
			case m = <-p.ch:
			case <-p.timer.C:
				p.end(nil)
				return nil
			}
		} else {
			select {
			case m = <-p.ch:
			default:
				return nil
			}
		}
		if m == nil { // not sent by nats.go, which never closes a channel subscription's channel
			p.end(natsgo.ErrConnectionClosed)
			return nil
		}
		user, err := pullStatus(m)
		if !user {
			if err != errControlMsg {
				p.end(err)
			}
			continue
		}
		if p.left--; p.left <= 0 {
			p.end(nil)
		}
		return m
	}
	return nil
}

// end ends the request with err (nil: not an error), unsubscribing its inbox.
func (p *pullIter) end(err error) {
	p.done, p.err = true, err
	p.timer.Stop()
	_ = p.sub.Unsubscribe()
}

// errControlMsg marks a status message that does not end a pull (a heartbeat).
var errControlMsg = fmt.Errorf("control message")

// pullStatus reads a message delivered to a pull's inbox: a message of the stream (user), or
// a status message and what it means for the pull, as jetstream's Fetch reads them: nil for
// the ends that are not errors (no messages, request timeout, max bytes reached),
// errControlMsg for a heartbeat, else the error jetstream reports for it.
func pullStatus(m *natsgo.Msg) (user bool, err error) {
	if len(m.Data) > 0 || len(m.Header) == 0 {
		return true, nil
	}
	status := m.Header.Get("Status")
	if status == "" {
		return true, nil
	}
	descr := strings.ToLower(m.Header.Get("Description"))
	switch status {
	case "100":
		return false, errControlMsg
	case "404", "408":
		return false, nil // no messages; the request expired
	case "400":
		return false, jetstream.ErrBadRequest
	case "503":
		return false, natsgo.ErrNoResponders
	case "423":
		return false, jetstream.ErrPinIDMismatch
	case "409":
		switch {
		case strings.Contains(descr, "message size exceeds maxbytes"):
			return false, nil
		case strings.Contains(descr, "batch completed"):
			return false, jetstream.ErrBatchCompleted
		case strings.Contains(descr, "consumer deleted"):
			return false, jetstream.ErrConsumerDeleted
		case strings.Contains(descr, "leadership change"):
			return false, jetstream.ErrConsumerLeadershipChanged
		case strings.Contains(descr, "server shutdown"):
			return false, jetstream.ErrServerShutdown
		}
	}
	return false, fmt.Errorf("nats: %s", m.Header.Get("Description"))
}

// ackMeta is what a JetStream ack subject says about a delivery (see parseAck).
type ackMeta struct {
	delivered uint64 // NumDelivered: this delivery included
	streamSeq uint64
	timestamp time.Time // when the message was stored
}

// parseAck reads a JetStream ack subject, as jetstream.Msg.Metadata does, without
// allocating: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending> (9
// tokens), or $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>... (11 tokens
// or more). ok is false for any other subject, where Metadata fails too; a number that does
// not parse reads as 0, as there.
func parseAck(reply string) (m ackMeta, ok bool) {
	const prefix = "$JS.ACK."
	if !strings.HasPrefix(reply, prefix) {
		return m, false
	}
	tokens := strings.Count(reply, ".") + 1
	var first int // the delivered token's index
	switch {
	case tokens == 9:
		first = 4
	case tokens >= 11:
		first = 6
	default:
		return m, false
	}
	rest := reply
	for range first {
		_, rest, _ = strings.Cut(rest, ".")
	}
	var tok string
	tok, rest, _ = strings.Cut(rest, ".")
	m.delivered = parseNum(tok)
	tok, rest, _ = strings.Cut(rest, ".")
	m.streamSeq = parseNum(tok)
	_, rest, _ = strings.Cut(rest, ".") // consumer sequence
	tok, _, _ = strings.Cut(rest, ".")
	m.timestamp = time.Unix(0, int64(parseNum(tok)))
	return m, true
}

// parseNum reads a decimal number of an ack subject; anything else reads as 0.
func parseNum(s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0
	}
	return n
}
