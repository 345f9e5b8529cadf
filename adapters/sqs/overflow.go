package sqs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Overflow stores batch bodies too large for one SQS message, the way the SQS Extended Client
// Library keeps them in S3: the SQS message then carries only the key. Put happens before the
// message is sent and Delete after the message is deleted (Ack, Drop, or a Retry that rewrote
// the body), so a stored body never disappears under a live message. Implementations must be
// safe for concurrent use, and every node sharing the queues must see the same store.
type Overflow interface {
	// Put stores body under key, durably, before returning.
	Put(ctx context.Context, key string, body []byte) error
	// Get returns the body stored under key; a missing key is an error wrapping
	// fs.ErrNotExist.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// MemoryOverflow is an in-process Overflow, for tests and single-process apps: bodies do not
// survive the process, and nodes in other processes cannot read them. The zero value is ready
// to use.
type MemoryOverflow struct {
	mu sync.Mutex
	m  map[string][]byte
}

var _ Overflow = (*MemoryOverflow)(nil)

// Put stores a copy of body.
func (o *MemoryOverflow) Put(_ context.Context, key string, body []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string][]byte{}
	}
	o.m[key] = append([]byte(nil), body...)
	return nil
}

// Get returns a copy of the body under key.
func (o *MemoryOverflow) Get(_ context.Context, key string) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.m[key]
	if !ok {
		return nil, fmt.Errorf("sqs: memory overflow key %q: %w", key, fs.ErrNotExist)
	}
	return append([]byte(nil), b...), nil
}

// Delete removes key.
func (o *MemoryOverflow) Delete(_ context.Context, key string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, key)
	return nil
}

// Len reports how many bodies are stored (for tests).
func (o *MemoryOverflow) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.m)
}

// DirOverflow is an Overflow in a directory: durable, and shared by every node that mounts
// the same volume (NFS, EFS). Each body is one file, written to a temporary name, synced and
// renamed into place, so a reader never sees half a body.
type DirOverflow struct {
	dir string
}

var _ Overflow = (*DirOverflow)(nil)

// NewDirOverflow returns a DirOverflow in dir, creating the directory if needed.
func NewDirOverflow(dir string) (*DirOverflow, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sqs: overflow directory %s: %w", dir, err)
	}
	return &DirOverflow{dir: dir}, nil
}

// path maps a key to a file name: a hash, so any key is a safe file name.
func (o *DirOverflow) path(key string) string {
	h := sha256.Sum256([]byte(key))
	return filepath.Join(o.dir, hex.EncodeToString(h[:16])+".batch")
}

// Put writes body under key, durably (fsync, then rename).
func (o *DirOverflow) Put(ctx context.Context, key string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	final := o.path(key)
	f, err := os.CreateTemp(o.dir, ".put-*")
	if err != nil {
		return fmt.Errorf("sqs: overflow put %q: %w", key, err)
	}
	tmp := f.Name()
	_, werr := f.Write(body)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("sqs: overflow put %q: %w", key, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("sqs: overflow put %q: %w", key, err)
	}
	return nil
}

// Get reads the body under key.
func (o *DirOverflow) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(o.path(key))
	if err != nil {
		return nil, fmt.Errorf("sqs: overflow get %q: %w", key, err)
	}
	return b, nil
}

// Delete removes the body under key.
func (o *DirOverflow) Delete(_ context.Context, key string) error {
	if err := os.Remove(o.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sqs: overflow delete %q: %w", key, err)
	}
	return nil
}
