package sqs

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// TestWireDelayOnSQSClock: what is left of a received batch's delay is judged on SQS's clock
// alone (its SentTimestamp and ApproximateFirstReceiveTimestamp), whatever this machine's
// clock says; older messages with an absolute txmq-not-before still count.
func TestWireDelayOnSQSClock(t *testing.T) {
	t.Parallel()
	// SQS's clock is an hour off this machine's: it must not matter.
	sqsNow := time.Now().Add(-time.Hour).UnixMilli()
	ms := func(v int64) string { return strconv.FormatInt(v, 10) }
	tests := []struct {
		name      string
		delayMs   string        // txmq-delay-ms; "" = absent
		legacy    bool          // write a legacy txmq-not-before attribute ...
		legacyIn  time.Duration // ... this far from now, read when the subtest runs
		sent      int64         // SentTimestamp; 0 = absent
		first     int64         // ApproximateFirstReceiveTimestamp; 0 = absent
		want      time.Duration
		tolerance time.Duration
	}{
		{"no delay", "", false, 0, sqsNow - 10, sqsNow, 0, 0},
		{"received before due", "5000", false, 0, sqsNow - 2000, sqsNow, 3 * time.Second, 0},
		{"received when due", "5000", false, 0, sqsNow - 5000, sqsNow, 0, 0},
		{"received after due", "5000", false, 0, sqsNow - 9000, sqsNow, 0, 0},
		{"no SQS timestamps: due", "5000", false, 0, 0, 0, 0, 0},
		{"legacy absolute due time", "", true, 4 * time.Second, 0, 0, 4 * time.Second, 100 * time.Millisecond},
		{"legacy, past", "", true, -4 * time.Second, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := types.Message{MessageId: aws.String("m"), Body: aws.String("{}"), Attributes: map[string]string{},
				MessageAttributes: map[string]types.MessageAttributeValue{}}
			num := func(v string) types.MessageAttributeValue {
				return types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(v)}
			}
			if tt.delayMs != "" {
				m.MessageAttributes[attrDelay] = num(tt.delayMs)
			}
			if tt.legacy {
				// Read the clock here, not when the table was built: parallel subtests may
				// start seconds later on a loaded machine.
				m.MessageAttributes[attrNotBefore] = num(ms(time.Now().Add(tt.legacyIn).UnixMilli()))
			}
			if tt.sent != 0 {
				m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)] = ms(tt.sent)
				m.Attributes[string(types.MessageSystemAttributeNameApproximateFirstReceiveTimestamp)] = ms(tt.first)
			}
			w, _ := wireOf(m)
			if d := w.delay - tt.want; d < -tt.tolerance || d > tt.tolerance {
				t.Fatalf("delay left %v; want %v (±%v)", w.delay, tt.want, tt.tolerance)
			}
		})
	}
}

// TestWireDelayAttribute: a delayed send writes the delay (rounded up to the millisecond)
// counted from that send, never an absolute time.
func TestWireDelayAttribute(t *testing.T) {
	t.Parallel()
	w := wire{id: "b", delay: 1500*time.Millisecond + time.Microsecond}
	a := w.attributes()
	if got := aws.ToString(a[attrDelay].StringValue); got != "1501" {
		t.Fatalf("%s = %q; want 1501", attrDelay, got)
	}
	if _, ok := a[attrNotBefore]; ok {
		t.Fatalf("%s written; the sender's clock must not travel", attrNotBefore)
	}
	if _, ok := (wire{id: "b"}).attributes()[attrDelay]; ok {
		t.Fatalf("%s written for a batch due now", attrDelay)
	}
}
