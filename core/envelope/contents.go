package envelope

import (
	"encoding/json"

	inner "github.com/txmq/txmq/internal/envelope"
)

// Messages returns the message ids and the JSON messages of an encoded batch (a dead letter's
// or a stored batch's Body), in order, for an operator's tool (the txmq command, a dashboard)
// that shows what a batch holds. A Body that is not an envelope returns the decoder's error,
// wrapping core.ErrUndecodable. Adapters never call it (see the package doc).
func Messages(body []byte) (ids []string, msgs []json.RawMessage, err error) {
	env, err := inner.Decode(body)
	if err != nil {
		return nil, nil, err
	}
	return env.MessageIDs, env.Messages, nil
}

// ForReplay returns body as a dead-letter replay publishes it again: its attempt count reset to
// zero (the replayed batch gets the queue's whole retry budget) and its replay generation one
// higher (a node that dead-lettered the original tells the replay from the original coming
// back). Everything else in body (batch id, queue, message ids, trace contexts) is kept. A
// Body that is not an envelope returns the decoder's error. Adapters never call it (see the
// package doc).
func ForReplay(body []byte) ([]byte, error) {
	e, err := inner.Decode(body)
	if err != nil {
		return nil, err
	}
	return inner.EncodeReplay(e, e.Replays+1), nil
}
