package txmq_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"sync"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
)

// exampleKey is a fixed AES-256 key, for the example only: a real app reads its key from a
// secret store and names it in a header (a key id) so that it can rotate keys.
var exampleKey = []byte("0123456789abcdef0123456789abcdef")

// encryptPayloads is a publish middleware that seals each payload with AES-GCM and stores it
// as a JSON string (a payload must stay JSON): nonce then ciphertext, base64. The header
// "enc" says how the payload was sealed, for decryptPayloads.
func encryptPayloads(aead cipher.AEAD) txmq.PublishMiddleware {
	return func(next txmq.PublishHandler) txmq.PublishHandler {
		return func(ctx context.Context, p *txmq.PublishRequest) error {
			for i, plain := range p.Payloads {
				nonce := make([]byte, aead.NonceSize())
				if _, err := rand.Read(nonce); err != nil {
					return err
				}
				// The message id as additional data: a sealed payload moved to another
				// message does not open.
				sealed := aead.Seal(nonce, nonce, plain, []byte(p.MessageIDs[i]))
				p.Payloads[i], _ = json.Marshal(sealed) // []byte encodes as a base64 string
				if p.Headers[i] == nil {
					p.Headers[i] = map[string]string{}
				}
				p.Headers[i]["enc"] = "aes-256-gcm"
			}
			return next(ctx, p)
		}
	}
}

// decryptPayloads is the run middleware that opens what encryptPayloads sealed, before the payloads are
// decoded into the queue's type. A payload that does not open is a permanent failure: no
// retry can fix it, so the batch goes to the dead letters at once.
func decryptPayloads(aead cipher.AEAD) txmq.RunMiddleware {
	return func(next txmq.RunHandler) txmq.RunHandler {
		return func(ctx context.Context, r *txmq.RunRequest) error {
			for i, payload := range r.Payloads {
				if r.Headers[i]["enc"] != "aes-256-gcm" {
					continue // published before encryption was turned on
				}
				var sealed []byte
				if err := json.Unmarshal(payload, &sealed); err != nil || len(sealed) < aead.NonceSize() {
					return txmq.Permanent(fmt.Errorf("message %s: sealed payload is not base64", r.MessageIDs[i]))
				}
				plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(r.MessageIDs[i]))
				if err != nil {
					return txmq.Permanent(fmt.Errorf("message %s: %w", r.MessageIDs[i], err))
				}
				r.Payloads[i] = plain
				delete(r.Headers[i], "enc")
			}
			return next(ctx, r)
		}
	}
}

// seen is a backend that remembers the bodies it stores, to show what the backend sees.
type seen struct {
	core.Backend
	mu     sync.Mutex
	bodies [][]byte
}

func (s *seen) Publish(ctx context.Context, b core.OutgoingBatch) error {
	s.mu.Lock()
	s.bodies = append(s.bodies, b.Body)
	s.mu.Unlock()
	return s.Backend.Publish(ctx, b)
}

// Payload encryption as a pair of middleware on the queue: the publish middleware seals each
// message before it leaves the process, so the backend, the outbox, the dead letters and the
// ledger only ever hold ciphertext; the run middleware opens it before the listener's type
// is decoded. Headers travel with each message from the publish to the listener.
func ExamplePublishMiddleware() {
	ctx := context.Background()
	block, err := aes.NewCipher(exampleKey)
	if err != nil {
		log.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		log.Fatal(err)
	}
	type Card struct{ Number string }
	reg := txmq.NewRegistry()
	cards := txmq.MustDeclareIn(reg, "example-cards", txmq.QueueConfig[Card]{
		Transactional:     txmq.Never,
		PublishMiddleware: []txmq.PublishMiddleware{encryptPayloads(aead)},
		RunMiddleware:     []txmq.RunMiddleware{decryptPayloads(aead)},
	})
	backend := &seen{Backend: memory.New(nil)}
	defer backend.Close()
	node, err := txmq.NewNode(backend, &txmq.NodeOptions{Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	err = cards.Listen(node, func(ctx context.Context, msgs []Card) error {
		fmt.Println("listener got", msgs[0].Number, "with headers", txmq.MessageHeaders(ctx)[0])
		close(done)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := cards.Publish(ctx, node, Card{Number: "4111-1111"}, txmq.Headers(map[string]string{"tenant": "acme"})); err != nil {
		log.Fatal(err)
	}
	<-done
	_ = node.Close(ctx)
	backend.mu.Lock()
	defer backend.mu.Unlock()
	fmt.Println("the backend saw the card number:", bytes.Contains(backend.bodies[0], []byte("4111")))
	fmt.Println("the backend saw the tenant header:", bytes.Contains(backend.bodies[0], []byte(`"tenant":"acme"`)))
	// Output:
	// listener got 4111-1111 with headers map[tenant:acme]
	// the backend saw the card number: false
	// the backend saw the tenant header: true
}

// tenantKey is the context key of the tenant a run middleware puts in the listener's ctx.
type tenantKey struct{}

// Logging and tenancy as node middleware: every publish on the node stamps the caller's
// tenant (from its ctx) into the messages' headers, and every run logs its batch and puts
// the tenant back into the listener's ctx. Node middleware wraps the queue's own.
func ExampleRunMiddleware() {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{} // a stable output for the example
		}
		return a
	}}))
	stampTenant := func(next txmq.PublishHandler) txmq.PublishHandler {
		return func(ctx context.Context, p *txmq.PublishRequest) error {
			tenant, ok := ctx.Value(tenantKey{}).(string)
			if !ok {
				return errors.New("publish without a tenant in ctx")
			}
			for i := range p.Headers {
				if p.Headers[i] == nil {
					p.Headers[i] = map[string]string{}
				}
				p.Headers[i]["tenant"] = tenant
			}
			return next(ctx, p)
		}
	}
	logRuns := func(next txmq.RunHandler) txmq.RunHandler {
		return func(ctx context.Context, r *txmq.RunRequest) error {
			err := next(ctx, r)
			logger.Info("run", "queue", r.Queue, "messages", len(r.Payloads), "attempt", r.Attempt, "error", err)
			return err
		}
	}
	tenancy := func(next txmq.RunHandler) txmq.RunHandler {
		return func(ctx context.Context, r *txmq.RunRequest) error {
			// A batch coalesces several publish calls, so the tenant is per message: this
			// app keeps one tenant per batch by failing a mixed one (a real app would split
			// its work by message, or publish with an ordering key per tenant).
			tenant := r.Headers[0]["tenant"]
			for _, h := range r.Headers {
				if h["tenant"] != tenant {
					return txmq.Permanent(errors.New("batch mixes tenants"))
				}
			}
			return next(context.WithValue(ctx, tenantKey{}, tenant), r)
		}
	}
	reg := txmq.NewRegistry()
	invoices := txmq.MustDeclareIn(reg, "example-invoices", txmq.QueueConfig[string]{Transactional: txmq.Never})
	backend := memory.New(nil)
	defer backend.Close()
	node, err := txmq.NewNode(backend, &txmq.NodeOptions{Registry: reg,
		PublishMiddleware: []txmq.PublishMiddleware{stampTenant},
		RunMiddleware:     []txmq.RunMiddleware{logRuns, tenancy}, // logRuns outermost
	})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	err = invoices.Listen(node, func(ctx context.Context, msgs []string) error {
		fmt.Println("invoice", msgs[0], "for tenant", ctx.Value(tenantKey{}))
		close(done)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("without a tenant:", invoices.Publish(ctx, node, "INV-0"))
	if err := invoices.Publish(context.WithValue(ctx, tenantKey{}, "acme"), node, "INV-1"); err != nil {
		log.Fatal(err)
	}
	<-done
	_ = node.Close(ctx)
	// Output:
	// without a tenant: publish without a tenant in ctx
	// invoice INV-1 for tenant acme
	// level=INFO msg=run queue=example-invoices messages=1 attempt=1 error=<nil>
}
