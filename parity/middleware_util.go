package parity

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/internal/envelope"
)

// The middleware group's tools: a log of the headers each run saw, and payload encryption as
// a pair of middleware (AES-GCM with a fixed test key), as an app would write it.

// headerLog records, per message key (Msg.K), the headers MessageHeaders gave at each run.
type headerLog struct {
	mu   sync.Mutex
	runs map[string][]map[string]string
}

func newHeaderLog() *headerLog { return &headerLog{runs: map[string][]map[string]string{}} }

// record logs the headers of each of msgs as the listener received them with ctx.
func (h *headerLog) record(ctx context.Context, msgs []Msg) {
	hs := txmq.MessageHeaders(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, m := range msgs {
		var got map[string]string
		if i < len(hs) {
			got = maps.Clone(hs[i])
		}
		h.runs[m.K] = append(h.runs[m.K], got)
	}
}

// listener returns a listener that records and then returns fn's error (fn may be nil).
func (h *headerLog) listener(fn func(ctx context.Context, msgs []Msg) error) func(ctx context.Context, msgs []Msg) error {
	return func(ctx context.Context, msgs []Msg) error {
		h.record(ctx, msgs)
		if fn != nil {
			return fn(ctx, msgs)
		}
		return nil
	}
}

// check fails x unless key ran at least minRuns times and saw want at every run (nil and
// empty alike).
func (h *headerLog) check(x *X, key string, want map[string]string, minRuns int) {
	x.T.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	runs := h.runs[key]
	if len(runs) < minRuns {
		x.T.Fatalf("message %s ran %d times; want at least %d", key, len(runs), minRuns)
	}
	for i, got := range runs {
		if !sameHeaders(got, want) {
			x.T.Fatalf("message %s, run %d of %d: listener saw headers %s; want %s (headers are per message and travel unchanged)", key, i+1, len(runs), fmtHeaders(got), fmtHeaders(want))
		}
	}
}

// count returns how many runs saw key.
func (h *headerLog) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.runs[key])
}

func sameHeaders(a, b map[string]string) bool { return len(a) == len(b) && maps.Equal(a, b) }

func fmtHeaders(h map[string]string) string {
	if len(h) == 0 {
		return "{}"
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%s", k, h[k])
	}
	b.WriteByte('}')
	return b.String()
}

// parityKey is the suite's fixed AES-256 key.
var parityKey = []byte("parity-key-0123456789abcdef-0123")

// sealHeader marks a sealed payload; its value names the cipher.
const sealHeader = "parity-enc"

func parityAEAD(x *X) cipher.AEAD {
	x.T.Helper()
	block, err := aes.NewCipher(parityKey)
	if err != nil {
		x.T.Fatalf("aes: %v", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		x.T.Fatalf("gcm: %v", err)
	}
	return aead
}

// sealPayloads is a publish middleware that encrypts each payload into a JSON string (nonce
// and ciphertext, base64), bound to its message id, and marks it with sealHeader.
func sealPayloads(aead cipher.AEAD) txmq.PublishMiddleware {
	return func(next txmq.PublishHandler) txmq.PublishHandler {
		return func(ctx context.Context, p *txmq.PublishRequest) error {
			for i, plain := range p.Payloads {
				nonce := make([]byte, aead.NonceSize())
				if _, err := rand.Read(nonce); err != nil {
					return err
				}
				sealed, err := json.Marshal(aead.Seal(nonce, nonce, plain, []byte(p.MessageIDs[i])))
				if err != nil {
					return err
				}
				p.Payloads[i] = sealed
				if p.Headers[i] == nil {
					p.Headers[i] = map[string]string{}
				}
				p.Headers[i][sealHeader] = "aes-gcm"
			}
			return next(ctx, p)
		}
	}
}

// openPayloads is the run middleware that decrypts what sealPayloads sealed, and removes the
// mark; a payload that does not open fails the run permanently.
func openPayloads(aead cipher.AEAD) txmq.RunMiddleware {
	return func(next txmq.RunHandler) txmq.RunHandler {
		return func(ctx context.Context, r *txmq.RunRequest) error {
			for i, payload := range r.Payloads {
				if r.Headers[i][sealHeader] == "" {
					return txmq.Permanent(fmt.Errorf("parity: message %s reached the run unsealed: %s", r.MessageIDs[i], envelope.Truncate(payload, 60)))
				}
				var sealed []byte
				if err := json.Unmarshal(payload, &sealed); err != nil || len(sealed) < aead.NonceSize() {
					return txmq.Permanent(fmt.Errorf("parity: message %s: sealed payload is not base64: %v", r.MessageIDs[i], err))
				}
				plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(r.MessageIDs[i]))
				if err != nil {
					return txmq.Permanent(fmt.Errorf("parity: message %s: %w", r.MessageIDs[i], err))
				}
				r.Payloads[i] = plain
				delete(r.Headers[i], sealHeader)
			}
			return next(ctx, r)
		}
	}
}

// checkSealed fails x unless body is a batch whose messages are all sealed (marked, and
// without secret anywhere in the body) and whose headers include want for each message.
func checkSealed(x *X, what string, body []byte, secret string, want map[string]string) {
	x.T.Helper()
	if strings.Contains(string(body), secret) {
		x.T.Fatalf("%s holds the plaintext %q: %s", what, secret, envelope.Truncate(body, 300))
	}
	env, err := envelope.Decode(body)
	if err != nil {
		x.T.Fatalf("%s does not decode: %v", what, err)
	}
	for i := range env.Messages {
		h := env.MessageHeaders(i)
		if h[sealHeader] == "" {
			x.T.Fatalf("%s: message %d is not marked sealed (headers %s)", what, i, fmtHeaders(h))
		}
		for k, v := range want {
			if h[k] != v {
				x.T.Fatalf("%s: message %d has headers %s; want %s=%s", what, i, fmtHeaders(h), k, v)
			}
		}
	}
}
