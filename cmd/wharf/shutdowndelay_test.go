package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeShutdownDelay: with --shutdown-delay, a SIGTERM turns /readyz
// to 503 at once while the S3 listener keeps answering, each response
// closing its keep-alive connection; only after the delay does serve stop
// and its listener refuse connections. Without the delay (the code before
// it) the listener closed as /readyz turned, so a load balancer still
// sending there saw refused connections.
func TestServeShutdownDelay(t *testing.T) {
	const delay = 1500 * time.Millisecond
	data := bytes.Repeat([]byte("drain "), 1000)
	store, man := packServeTree(t, map[string][]byte{"a.bin": data})
	addr, admin, logs, stop := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true,
		CacheBytes: 16 << 20, LogFormat: "json", ShutdownDelay: delay,
	})
	waitReady(t, admin)
	start := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()

	// /readyz turns 503 at once.
	for {
		code, _ := get(t, "http://"+admin+"/readyz")
		if code == http.StatusServiceUnavailable {
			break
		}
		if time.Since(start) > delay/2 {
			t.Fatalf("/readyz still %d %v after the signal", code, time.Since(start))
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The S3 listener still answers, and closes each connection after it.
	var served int
	for time.Since(start) < delay*2/3 {
		resp, err := http.Get("http://" + addr + "/data/a.bin")
		if err != nil {
			t.Fatalf("GET %v after the signal, within --shutdown-delay %v: %v", time.Since(start), delay, err)
		}
		var b bytes.Buffer
		_, err = b.ReadFrom(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(b.Bytes(), data) {
			t.Fatalf("GET during the delay: %d, %v, equal %v", resp.StatusCode, err, bytes.Equal(b.Bytes(), data))
		}
		if !resp.Close {
			t.Errorf("response during the delay keeps its connection alive (want Connection: close)")
		}
		served++
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-stopped:
		t.Fatalf("serve returned (%v) %v after the signal, before --shutdown-delay %v", err, time.Since(start), delay)
	default:
	}
	if err := <-stopped; err != nil {
		t.Fatalf("serve returned %v", err)
	}
	if took := time.Since(start); took < delay {
		t.Errorf("serve stopped %v after the signal, before --shutdown-delay %v", took, delay)
	}
	if _, err := http.Get("http://" + addr + "/data/a.bin"); err == nil {
		t.Error("still serving after the delay and the shutdown")
	}
	if !strings.Contains(logs.String(), "still serving for --shutdown-delay") {
		t.Errorf("no line for the delay:\n%s", logs.String())
	}
	t.Logf("%d GETs answered during the %v delay", served, delay)
}

// TestShutdownDelayRefused: a negative or an hour-long --shutdown-delay
// is refused at start, naming the flag.
func TestShutdownDelayRefused(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("x")})
	for _, d := range []time.Duration{-time.Second, 11 * time.Minute} {
		cfg := serveConfig{Listen: "127.0.0.1:0", StoreURL: store, Anonymous: true, CacheBytes: 1 << 20,
			Archives: []serveArchive{{Name: "data", ManifestURL: man}}, ShutdownDelay: d, LogOut: io.Discard}
		ctx, cancel := context.WithCancel(t.Context())
		cfg.Ready = func(string, string) {
			t.Errorf("--shutdown-delay %v: serve started listening", d)
			cancel()
		}
		// A serve that took the value would now wait out its delay: the
		// test waits 20 s for the refusal, not the delay.
		done := make(chan error, 1)
		go func() { done <- serve(ctx, cfg) }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "--shutdown-delay") {
				t.Errorf("--shutdown-delay %v: %v, want a refusal naming the flag", d, err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("--shutdown-delay %v: serve neither refused it nor returned in 20 s", d)
		}
		cancel()
	}
}
