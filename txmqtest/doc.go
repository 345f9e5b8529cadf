// Package txmqtest is the test kit for apps (and adapters) built on txmq: an isolated world per
// test with no server to run.
//
// New gives a test its own txmq.Registry (so declarations never leak between tests), a fresh
// in-process memory backend, and Kit.Node, which makes started nodes with test-friendly
// settings (a 1 s lease, a 10-50 ms retry backoff, a 5 ms publish window, silent logs) and
// closes them when the test ends:
//
//	func TestSignup(t *testing.T) {
//		k := txmqtest.New(t, &txmqtest.Options{DuplicateDelivery: true})
//		emails := txmqtest.DeclareIn(k, "emails", txmq.QueueConfig[Email]{Transactional: txmq.Try})
//		rec := txmqtest.NewRecorder(func(e Email) string { return e.To })
//		node := k.Node(nil)
//		if err := rec.Listen(emails, node, sendEmail); err != nil {
//			t.Fatal(err)
//		}
//		_ = emails.Publish(ctx, node, Email{To: "a@example.com"})
//		k.Eventually(5*time.Second, func() bool { return rec.Has("a@example.com") })
//		k.WaitIdle(node)
//	}
//
// New needs the test's own *testing.T (TestKit in this package's example_test.go is this test,
// runnable); Recorder and Duplicate also work without one (see ExampleRecorder).
//
// Options.DuplicateDelivery stores every published batch twice (Duplicate), so listeners that
// are not idempotent fail in tests instead of in production. Recorder records what listeners
// receive (a set, with duplicate counts and the peak number of concurrent runs per queue and
// per node). Eventually polls a condition with a timeout; WaitIdle waits until nodes have
// nothing in flight, nothing buffered and empty queues, observed twice in a row.
// DeadLetterRecorder is an in-memory core.DeadLetterSink.
//
// Kit.Memory.Break and Kit.Memory.Restore simulate a backend outage; Halt simulates a node's
// crash, and Freeze and Thaw a paused process (these controls are not methods of txmq.Node:
// an app never needs them).
//
// core never imports this package; it imports the memory adapter.
package txmqtest
