package parity

import (
	"encoding/json"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// EncodeBatch returns a batch of queue holding msgs (JSON values), encoded as the engine
// encodes one (OutgoingBatch.Body), for an adapter's tests that drive its Backend directly:
// a new batch id, the message ids ids (new ones when ids is nil; else one per message) and
// Messages set; the caller sets any other field (Exclusive, Key, Delay, ...).
func EncodeBatch(queue string, ids []string, msgs ...json.RawMessage) core.OutgoingBatch {
	env := &envelope.Envelope{Version: envelope.Version, ID: core.NewID(), Queue: queue, Created: time.Now(), MessageIDs: ids, Messages: msgs}
	if ids == nil {
		env.MessageIDs = make([]string, len(msgs))
		for i := range msgs {
			env.MessageIDs[i] = core.NewID()
		}
	}
	return core.OutgoingBatch{ID: env.ID, Queue: queue, Body: envelope.Encode(env), Messages: len(msgs)}
}

// DecodeBatch returns the message ids and the JSON messages of an encoded batch (a Claim's
// Body), for an adapter's tests; an error if body is not a batch the engine encoded.
func DecodeBatch(body []byte) (ids []string, msgs []json.RawMessage, err error) {
	env, err := envelope.Decode(body)
	if err != nil {
		return nil, nil, err
	}
	return env.MessageIDs, env.Messages, nil
}
