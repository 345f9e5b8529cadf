package txmq_test

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

// Card is what the guide's middleware fragment publishes.
type Card struct {
	Number string `json:"number"`
}

// guideAEAD is the guide fragment's cipher: AES-256-GCM with a fixed test key.
var guideAEAD = func() cipher.AEAD {
	block, err := aes.NewCipher([]byte("guide-key-0123456789abcdef-01234"))
	if err != nil {
		panic(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}()

// encrypt seals plain, bound to the message id, as a JSON string (nonce and ciphertext).
func encrypt(plain json.RawMessage, id string) (json.RawMessage, error) {
	nonce := make([]byte, guideAEAD.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return json.Marshal(guideAEAD.Seal(nonce, nonce, plain, []byte(id)))
}

// decrypt opens what encrypt sealed.
func decrypt(sealed json.RawMessage, id string) (json.RawMessage, error) {
	var b []byte
	if err := json.Unmarshal(sealed, &b); err != nil {
		return nil, err
	}
	if len(b) < guideAEAD.NonceSize() {
		return nil, errors.New("sealed payload too short")
	}
	return guideAEAD.Open(nil, b[:guideAEAD.NonceSize()], b[guideAEAD.NonceSize():], []byte(id))
}

// sealedCards is the guide's "Middleware and headers" fragment, between the markers, indented
// by one tab.
func sealedCards(ctx context.Context, node *txmq.Node, card Card) (*txmq.Queue[Card], error) {
	// README:begin middleware
	seal := func(next txmq.PublishHandler) txmq.PublishHandler {
		return func(ctx context.Context, p *txmq.PublishRequest) error {
			for i := range p.Payloads { // encoded JSON: replace it, keep it JSON
				sealed, err := encrypt(p.Payloads[i], p.MessageIDs[i])
				if err != nil {
					return err // nothing of the call is published
				}
				p.Payloads[i] = sealed
				if p.Headers[i] == nil {
					p.Headers[i] = map[string]string{}
				}
				p.Headers[i]["enc"] = "v1"
			}
			return next(ctx, p) // pass ctx on: it carries the transaction
		}
	}
	open := func(next txmq.RunHandler) txmq.RunHandler {
		return func(ctx context.Context, r *txmq.RunRequest) error {
			for i := range r.Payloads { // the stored form, before the decode into Card
				plain, err := decrypt(r.Payloads[i], r.MessageIDs[i])
				if err != nil {
					return txmq.Permanent(err) // no retry can fix it: dead letter now
				}
				r.Payloads[i] = plain
			}
			return next(ctx, r)
		}
	}
	cards := txmq.MustDeclare("guide-cards", txmq.QueueConfig[Card]{Transactional: txmq.Try,
		PublishMiddleware: []txmq.PublishMiddleware{seal},
		RunMiddleware:     []txmq.RunMiddleware{open}})
	err := cards.Publish(ctx, node, card, txmq.Headers(map[string]string{"tenant": "acme"}))
	// In the listener: txmq.MessageHeaders(ctx)[i]["tenant"] is "acme".
	// README:end middleware
	return cards, err
}

// TestGuideMiddleware: the guide's middleware fragment is the code above, and it runs: the
// card reaches the listener decrypted, with the caller's header and the middleware's.
func TestGuideMiddleware(t *testing.T) {
	t.Parallel()
	if got, want := readmeBlock(t, "## Middleware and headers", "go"), fragment(t, "readme_middleware_test.go", "middleware", true); got != want {
		t.Fatalf("the guide's middleware fragment differs from readme_middleware_test.go:\ndoc:\n%s\ncode:\n%s", got, want)
	}
	ctx := context.Background()
	be, err := core.OpenBackend(ctx, "memory://")
	if err != nil {
		t.Fatal(err)
	}
	node, err := txmq.NewNode(be, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close(context.Background()) })
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cards, err := sealedCards(ctx, node, Card{Number: "4111"})
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		card    Card
		headers map[string]string
	}
	ch := make(chan got, 4)
	if err := cards.Listen(node, func(ctx context.Context, msgs []Card) error {
		for i, m := range msgs {
			ch <- got{m, txmq.MessageHeaders(ctx)[i]}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-ch:
		if g.card.Number != "4111" || g.headers["tenant"] != "acme" || g.headers["enc"] != "v1" {
			t.Fatalf("listener got %+v; want card 4111 with headers tenant=acme and enc=v1", g)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the card did not arrive within 20s")
	}
}
