//go:build unix

package backend

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestFileStoreFIFONeverWaits: a named pipe where an object would be is
// not an object: Get, ReadRange and Stat answer ErrNotFound at once. Opening
// it plainly would wait for a writer, forever and deaf to the context.
func TestFileStoreFIFONeverWaits(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bkt", "uploads"), 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "bkt", "uploads", "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Whatever happens, release an open that waits (the old code's), so
	// no goroutine stays blocked after the test.
	t.Cleanup(func() {
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
	s := NewFileStore(dir)
	for name, call := range map[string]func(ctx context.Context) error{
		"get": func(ctx context.Context) error {
			_, _, err := s.Get(ctx, "bkt", "uploads/pipe")
			return err
		},
		"range": func(ctx context.Context) error {
			_, _, err := s.ReadRange(ctx, "bkt", "uploads/pipe", 0, 1, "")
			return err
		},
		"stat": func(ctx context.Context) error {
			_, err := s.Stat(ctx, "bkt", "uploads/pipe")
			return err
		},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		done := make(chan error, 1)
		go func() { done <- call(ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("%s of a FIFO: %v, want ErrNotFound", name, err)
			}
		case <-time.After(3 * time.Second):
			t.Errorf("%s of a FIFO still waiting after 3s (context deadline 1s)", name)
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
			<-done
		}
		cancel()
	}
}
