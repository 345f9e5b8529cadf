package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// envWorker makes the test binary a worker process of TestProcessesShareOneFile.
const envWorker = "TXMQ_SQLITE_WORKER_FILE"

// TestProcessesShareOneFile: several processes on one file (the test binary run again as
// workers) publish and claim at the same time; every batch is claimed and acked exactly once
// in all, with no error (busy_timeout and BEGIN IMMEDIATE make them take turns at the write
// lock).
func TestProcessesShareOneFile(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	const seeded, perWorker, workers = 200, 100, 3
	publishN(t, be, "shared", seeded)
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i := range workers {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.v=false")
		cmd.Env = append(os.Environ(), envWorker+"="+w.path, fmt.Sprintf("TXMQ_SQLITE_WORKER=%d", i))
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	acked := map[string]int{}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, outs[i])
		}
		sc := bufio.NewScanner(outs[i])
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "acked "); ok {
				acked[id]++
			}
		}
	}
	// What the workers published last may still be there: claim it here.
	for _, c := range fetch(t, be, 0, all("shared")) {
		if err := be.Ack(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		acked[c.ID]++
	}
	want := seeded + workers*perWorker
	if len(acked) != want {
		t.Fatalf("%d distinct batches acked; want %d", len(acked), want)
	}
	for id, n := range acked {
		if n != 1 {
			t.Errorf("batch %s acked %d times", id, n)
		}
	}
}

// TestWorkerProcess is a worker of TestProcessesShareOneFile (it does nothing otherwise): it
// publishes its batches while claiming and acking batches of the queue until it finds none
// for a while, printing each acked batch id.
func TestWorkerProcess(t *testing.T) {
	path := os.Getenv(envWorker)
	if path == "" {
		t.Skip("a worker of TestProcessesShareOneFile")
	}
	me := os.Getenv("TXMQ_SQLITE_WORKER")
	w := &world{t: t, path: path}
	be := w.backend(nil)
	ctx := context.Background()
	published, idle := 0, 0
	for idle < 5 {
		if published < 100 {
			for range 10 {
				publish(t, be, "shared", fmt.Sprintf("w%s-%d", me, published), 0)
				published++
			}
		}
		cs, err := be.Fetch(ctx, core.FetchRequest{Node: "w" + me, Queues: []core.QueueSlots{{Queue: "shared", Free: 7}}, Lease: 30 * time.Second})
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		if len(cs) == 0 && published >= 100 {
			idle++
			time.Sleep(20 * time.Millisecond)
			continue
		}
		idle = 0
		for _, c := range cs {
			if err := be.Ack(ctx, c); err != nil {
				t.Fatalf("ack %s: %v", c.ID, err)
			}
			fmt.Println("acked", c.ID)
		}
	}
}
