package chunkio

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestReadLimitsTakeAtOnce: a take gets its memory and between one and the
// asked GET slots in one step (fewer slots when fewer are free, never a
// wait for the rest); with no slot or no memory free a speculative take
// gets nothing and a demand take waits its deadline and fails with
// ErrBusy, holding nothing.
func TestReadLimitsTakeAtOnce(t *testing.T) {
	ctx := context.Background()
	l := newReadLimits(cacheConfig{memory: 100, maxParts: 4, memoryWait: 50 * time.Millisecond, streamParts: 2, partSize: 10})
	if _, k, err := l.take(ctx, 10, 3, demand); err != nil || k != 3 {
		t.Fatalf("take 3 of 4 slots: %d, %v", k, err)
	}
	if _, k, err := l.take(ctx, 10, 3, demand); err != nil || k != 1 {
		t.Fatalf("take with one slot free: granted %d (%v), want 1 at once", k, err)
	}
	if _, _, err := l.take(ctx, 10, 1, speculative); err != errNoMemory {
		t.Fatalf("speculative take with no slot free: %v, want errNoMemory", err)
	}
	start := time.Now()
	if _, _, err := l.take(ctx, 10, 1, demand); !errors.Is(err, ErrBusy) || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("demand take with no slot free: %v after %v, want ErrBusy after the wait", err, time.Since(start))
	}
	if used, gets := l.inUse(); used != 20 || gets != 4 {
		t.Fatalf("after the refused takes: %d bytes, %d GETs held, want 20 and 4 (a refusal holds nothing)", used, gets)
	}
	// A slot returned while a demand take waits lets it through.
	done := make(chan error, 1)
	go func() { _, _, err := l.take(ctx, 10, 2, demand); done <- err }()
	time.Sleep(10 * time.Millisecond)
	l.putGets(1)
	if err := <-done; err != nil {
		t.Fatalf("a waiting take after a slot came back: %v", err)
	}
	l.give(nil, 30, 4)
	if used, gets := l.inUse(); used != 0 || gets != 0 {
		t.Fatalf("after returning everything: %d bytes, %d GETs", used, gets)
	}
}

// TestReadLimitsDecodersAndClients: stream decoders are admitted up to
// their bound, then a new one waits its deadline (ErrBusy); a client holds
// at most its share of the memory and of the decoders while another client
// takes at once; a client holding nothing may take more than its share.
func TestReadLimitsDecodersAndClients(t *testing.T) {
	ctx := context.Background()
	a := WithClient(ctx, "a")
	b := WithClient(ctx, "b")
	l := newReadLimits(cacheConfig{memory: 1000, maxParts: 64, memoryWait: 30 * time.Millisecond, streamParts: 8, partSize: 1, clientShare: 0.25})
	l.maxDecoders, l.clientDecs = 2, 1
	clA, err := l.admitDecoder(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.admitDecoder(a); !errors.Is(err, ErrBusy) {
		t.Fatalf("a second decoder for client a: %v, want ErrBusy (its share is one)", err)
	}
	clB, err := l.admitDecoder(b)
	if err != nil {
		t.Fatalf("client b's decoder: %v", err)
	}
	if _, err := l.admitDecoder(ctx); !errors.Is(err, ErrBusy) {
		t.Fatalf("a third decoder: %v, want ErrBusy (two at most)", err)
	}
	l.endDecoder(clA)
	l.endDecoder(clB)

	// Memory: a's first take may exceed its share (it holds nothing), the
	// next is refused; b is served at once.
	c1, _, err := l.take(a, 300, 0, demand)
	if err != nil {
		t.Fatalf("client a's first take of more than its share: %v", err)
	}
	if _, _, err := l.take(a, 1, 0, demand); !errors.Is(err, ErrBusy) {
		t.Fatalf("client a past its share: %v, want ErrBusy", err)
	}
	c2, _, err := l.take(b, 200, 0, demand)
	if err != nil {
		t.Fatalf("client b while a is at its share: %v", err)
	}
	l.unreserve(c1, 300)
	l.unreserve(c2, 200)
	if len(l.clients) != 0 {
		t.Fatalf("%d client records kept after they hold nothing", len(l.clients))
	}
}
