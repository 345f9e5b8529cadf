package sqs

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/txmq/txmq/core"
)

// Message attributes the adapter writes. Everything else about a batch is in its body.
const (
	attrID        = "txmq-id"         // batch id
	attrEncoding  = "txmq-enc"        // how the body is encoded; absent = as is
	attrOverflow  = "txmq-overflow"   // Overflow key holding the body
	attrDelay     = "txmq-delay-ms"   // milliseconds after this message's SentTimestamp (SQS's clock); absent = due
	attrNotBefore = "txmq-not-before" // unix milliseconds on the sender's clock; read only, from older versions
	attrBase      = "txmq-base"       // deliveries before this SQS message existed
	attrKey       = "txmq-key"        // ordering key (core.OutgoingBatch.Key); absent = none

	encBase64 = "b64"  // base64 of the body (it was not valid SQS text)
	encGzip   = "gz64" // base64 of the gzip of the body (it was too large)

	overflowBody = "txmq: body in overflow store"
	// attrReserve is kept free of the body for the attributes (names, types, values).
	attrReserve = 512
)

// errTooLarge means a body does not fit one SQS message, even compressed, and there is no
// Overflow store; Publish then splits the batch by messages.
// It wraps core.ErrRejected: a batch of one message that does not fit can never be sent.
var errTooLarge = fmt.Errorf("%w: %w: batch too large for one SQS message", core.ErrRejected, core.ErrInvalidPayload)

// wire is a batch as it travels in SQS: the message body as sent and the adapter's
// attributes. Moving a batch between queues (parking, releasing) resends the wire unchanged,
// without decoding it.
type wire struct {
	id       string
	body     string // SQS message body
	enc      string
	overflow string
	// delay is, when sending, how long after this send the batch is due, and, in a received
	// wire, how long it still has to wait: both measured on SQS's clock (see wireOf).
	delay time.Duration
	base  int
	// key is the batch's ordering key (empty on unordered queues): the message group of its
	// FIFO queue, unless the queue is Exclusive.
	key string
}

// encode makes the wire form of body: as is when it is valid SQS text and fits, else base64,
// else gzip+base64, else in the Overflow store.
func (be *Backend) encode(ctx context.Context, queue, id string, body []byte) (wire, error) {
	w := wire{id: id}
	limit := be.opts.MaxMessageBytes - attrReserve
	text := sqsText(body)
	switch {
	case text && len(body) <= limit && len(body) > 0:
		w.body = string(body)
		return w, nil
	case !text && base64.StdEncoding.EncodedLen(len(body)) <= limit && len(body) > 0:
		w.body, w.enc = base64.StdEncoding.EncodeToString(body), encBase64
		return w, nil
	}
	var zb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zb, gzip.BestSpeed)
	_, _ = zw.Write(body)
	_ = zw.Close()
	if n := base64.StdEncoding.EncodedLen(zb.Len()); n <= limit {
		w.body, w.enc = base64.StdEncoding.EncodeToString(zb.Bytes()), encGzip
		return w, nil
	}
	if be.opts.Overflow == nil {
		return w, fmt.Errorf("%w: sqs: publish batch %s to queue %q: %d bytes (%d compressed) exceed MaxMessageBytes %d and no Options.Overflow store is configured; configure one (NewDirOverflow on a shared volume, or an S3-backed Overflow) for single messages this large",
			errTooLarge, id, queue, len(body), zb.Len(), be.opts.MaxMessageBytes)
	}
	w.overflow = be.opts.Prefix + queue + "/" + id + "-" + core.NewID()
	if err := be.opts.Overflow.Put(ctx, w.overflow, body); err != nil {
		return w, fmt.Errorf("sqs: publish batch %s to queue %q: storing the %d-byte body in the overflow store: %w: %w", id, queue, len(body), core.ErrBackendUnavailable, err)
	}
	w.body = overflowBody
	return w, nil
}

// decode returns the batch body of w. A body that cannot be decoded, or whose overflow entry
// is gone, is returned as nil with ok set, so the engine dead-letters it as undecodable; an
// overflow store that fails otherwise gives an error (the message is then left to come back).
func (be *Backend) decode(ctx context.Context, w wire) ([]byte, error) {
	if w.overflow != "" {
		if be.opts.Overflow == nil {
			return nil, nil
		}
		b, err := be.opts.Overflow.Get(ctx, w.overflow)
		if errors.Is(err, fs.ErrNotExist) {
			be.log.Error("sqs: a batch's overflow body is missing; handing it out empty so it is dead-lettered as undecodable", "batch", w.id, "key", w.overflow)
			return nil, nil
		}
		return b, err
	}
	switch w.enc {
	case "":
		return []byte(w.body), nil
	case encBase64:
		b, err := base64.StdEncoding.DecodeString(w.body)
		if err != nil {
			return nil, nil
		}
		return b, nil
	case encGzip:
		z, err := base64.StdEncoding.DecodeString(w.body)
		if err != nil {
			return nil, nil
		}
		zr, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			return nil, nil
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			return nil, nil
		}
		return b, nil
	default:
		return nil, nil
	}
}

// sqsText reports whether b can travel as an SQS message body as is: UTF-8 with only the
// characters SQS accepts (#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD). SQS also
// documents #x10000 to #x10FFFF, but SQS-compatible servers (fauxqs) reject them, so a body
// with characters outside the Basic Multilingual Plane (emoji) is sent base64-encoded.
func sqsText(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		if !(r == 0x9 || r == 0xA || r == 0xD || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD)) {
			return false
		}
		b = b[n:]
	}
	return true
}

// attributes returns w's message attributes.
func (w wire) attributes() map[string]types.MessageAttributeValue {
	str := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	num := func(v int64) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatInt(v, 10))}
	}
	m := map[string]types.MessageAttributeValue{attrID: str(w.id)}
	if w.enc != "" {
		m[attrEncoding] = str(w.enc)
	}
	if w.overflow != "" {
		m[attrOverflow] = str(w.overflow)
	}
	if w.delay > 0 {
		m[attrDelay] = num(int64((w.delay + time.Millisecond - 1) / time.Millisecond))
	}
	if w.base > 0 {
		m[attrBase] = num(int64(w.base))
	}
	if w.key != "" {
		m[attrKey] = str(w.key)
	}
	return m
}

// receiveAttributes are the system attributes every ReceiveMessage asks for: the receive count
// (for Deliveries) and SQS's own send and first-receive times (for the rest of a delay).
var receiveAttributes = []types.MessageSystemAttributeName{
	types.MessageSystemAttributeNameApproximateReceiveCount,
	types.MessageSystemAttributeNameSentTimestamp,
	types.MessageSystemAttributeNameApproximateFirstReceiveTimestamp,
}

// wireOf reads the wire form of a received message, and its ApproximateReceiveCount. The
// wire's delay is what is left of the batch's delay, judged on SQS's clock alone: the delay
// written at send minus the time from SentTimestamp to ApproximateFirstReceiveTimestamp (a
// message received before, whose first receive is older, is judged later, never earlier).
// A message without those timestamps counts as due once SQS made it visible.
func wireOf(m types.Message) (wire, int) {
	w := wire{id: aws.ToString(m.MessageId), body: aws.ToString(m.Body)}
	get := func(name string) string {
		if v, ok := m.MessageAttributes[name]; ok {
			return aws.ToString(v.StringValue)
		}
		return ""
	}
	if v := get(attrID); v != "" {
		w.id = v
	}
	w.enc, w.overflow, w.key = get(attrEncoding), get(attrOverflow), get(attrKey)
	if v, err := strconv.ParseInt(get(attrDelay), 10, 64); err == nil && v > 0 {
		sent, serr := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
		first, ferr := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameApproximateFirstReceiveTimestamp)], 10, 64)
		if serr == nil && ferr == nil {
			w.delay = time.Duration(v-(first-sent)) * time.Millisecond
		}
	} else if v, err := strconv.ParseInt(get(attrNotBefore), 10, 64); err == nil {
		w.delay = time.Until(time.UnixMilli(v)) // stored by an older version: its sender's clock
	}
	w.delay = max(w.delay, 0)
	if v, err := strconv.Atoi(get(attrBase)); err == nil && v > 0 {
		w.base = v
	}
	count, err := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if err != nil || count < 1 {
		count = 1
	}
	return w, count
}

// seconds rounds d up to whole seconds within [0, limit] (SQS takes whole seconds; rounding
// up never makes a batch early).
func seconds(d, limit time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	s := math.Ceil(d.Seconds())
	return int32(min(s, limit.Seconds()))
}

// route sends w to the queue where it belongs given its delay r (0 = due now), counted from
// this send on SQS's clock, the one rule for Publish, Retry rewrites, parking and the holding
// queue's mover:
//
//   - due now: the main queue (standard, or the FIFO queue of an Exclusive queue);
//   - due within MaxNativeDelay on a standard queue: the main queue with DelaySeconds
//     rounded up;
//   - otherwise (further out, or any delay on an Exclusive queue, as FIFO queues have no
//     per-message delay): the holding queue, with the due time in an attribute, to be moved
//     by a fetching node when it is near;
//   - a keyed batch (an Ordered queue), due or not: the FIFO queue at once, in its key's
//     message group (the queue's one group when it is also Exclusive), with its delay in an
//     attribute, so it keeps its place and holds back its key until due (see receive).
//
// dedup is the FIFO deduplication id (Publish passes the batch id, so a re-published batch
// is stored once; internal moves pass a fresh id).
func (be *Backend) route(ctx context.Context, queue string, exclusive bool, w wire, r time.Duration, dedup string) error {
	capd := be.opts.MaxNativeDelay
	w.delay = max(r, 0)
	group := groupID
	if w.key != "" && !exclusive {
		group = w.key
	}
	switch {
	case w.key != "":
		return be.send(ctx, queue, kindFIFO, w, 0, dedup, group)
	case r <= 0:
		return be.send(ctx, queue, mainKind(exclusive, false), w, 0, dedup, group)
	case !exclusive && r <= capd:
		return be.send(ctx, queue, kindStandard, w, r, "", "")
	default:
		return be.send(ctx, queue, kindHold, w, be.holdDelay(r, exclusive), "", "")
	}
}

// holdDelay is how long a batch due in r waits in the holding queue before a mover looks at
// it: for a standard queue, until about half the native cap before it is due (so a mover
// polling every third of the cap sees it while DelaySeconds can still take the rest); for an
// Exclusive queue, until it is due when that is within the cap.
func (be *Backend) holdDelay(r time.Duration, exclusive bool) time.Duration {
	capd := be.opts.MaxNativeDelay
	if exclusive && r <= capd {
		return r
	}
	d := (r - capd/2).Truncate(time.Second)
	return min(max(d, time.Second), capd)
}

// send sends w to queue's SQS queue of kind k after delay (in message group group, for the
// FIFO queue), creating the queue on first use (and again if it was deleted under the cached
// URL).
func (be *Backend) send(ctx context.Context, queue string, k kind, w wire, delay time.Duration, dedup, group string) error {
	for attempt := 0; ; attempt++ {
		u, err := be.url(ctx, queue, k, true)
		if err != nil {
			return err
		}
		in := &awssqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String(w.body), MessageAttributes: w.attributes()}
		if k == kindFIFO {
			if dedup == "" {
				dedup = core.NewID()
			}
			in.MessageGroupId, in.MessageDeduplicationId = aws.String(group), aws.String(dedup)
		} else {
			in.DelaySeconds = seconds(delay, DefaultMaxNativeDelay)
		}
		be.count(opSend)
		_, err = be.client.SendMessage(ctx, in)
		if isNoQueue(err) && attempt == 0 {
			be.forgetURL(queue, k)
			continue
		}
		return wrap("send batch "+w.id, queue, err)
	}
}

// deleteMsg deletes a received message by its receipt handle.
func (be *Backend) deleteMsg(ctx context.Context, url, receipt string) error {
	be.count(opDelete)
	_, err := be.client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(receipt)})
	return err
}

// changeVisibility sets a received message's visibility timeout.
func (be *Backend) changeVisibility(ctx context.Context, url, receipt string, secs int32) error {
	be.count(opVisibility)
	_, err := be.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(receipt), VisibilityTimeout: secs})
	return err
}
