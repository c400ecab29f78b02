package main

// Tests written for the hand mutants of the rev-mutation audit that no
// test killed (TESTING.md, "Mutation audit (rev-mutation)").

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

// TestServeSendTimeoutSteadyReader: --send-timeout is a progress
// deadline, moved on by every write the client takes: a client that reads
// a 9 MiB body slowly but steadily (16 KiB every 10 ms through a 16 KiB
// receive window, 5 s or more in all) gets all of it at a send timeout of
// 1.5 s. The stalled-client tests (TestServeSendTimeoutHTTP1 and others)
// pin only the abort.
func TestServeSendTimeoutSteadyReader(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	body := make([]byte, 9<<20)
	for i := range body {
		body[i] = byte(r.Uint32())
	}
	store, man := packServeTree(t, map[string][]byte{"big.bin": body})
	const send = 1500 * time.Millisecond
	addr, _, _, _ := startServe(t, serveConfig{Listen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: 64 << 20,
		SendTimeout: send})
	c, err := smallWindowDialer().Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "GET /data/big.bin HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 16<<10), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v %v", resp, err)
	}
	defer resp.Body.Close()
	start := time.Now()
	var got bytes.Buffer
	buf := make([]byte, 16<<10)
	for {
		n, err := io.ReadFull(resp.Body, buf)
		got.Write(buf[:n])
		if err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	if !bytes.Equal(got.Bytes(), body) {
		t.Fatalf("a steady reader got %d of %d bytes in %v (send timeout %v): cut off though it made progress", got.Len(), len(body), took.Round(time.Millisecond), send)
	}
	if took < 2*send {
		t.Fatalf("the read took %v, not longer than the send timeout %v: the test proves nothing", took, send)
	}
	t.Logf("9 MiB read steadily in %v at a send timeout of %v", took.Round(time.Millisecond), send)
}
