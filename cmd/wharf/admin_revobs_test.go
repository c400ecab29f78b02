package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/backend"
)

// parkDeep parks a goroutine depth frames deep until stop closes, so that
// its stack in a goroutine dump is long.
func parkDeep(depth int, stop <-chan struct{}) {
	if depth > 0 {
		parkDeep(depth-1, stop)
		return
	}
	<-stop
}

// TestServeAdminSteppedProgress: a response of the admin listener written
// in one large write (/debug/pprof/goroutine?debug=2 writes the whole dump
// at once: many MiB on a busy server) to a client that reads it slowly
// but steadily (an operator's port-forward) is not cut off: the progress
// deadline is moved on every 256 KiB the client takes, as on the S3
// listener. Before, the admin listener set one deadline for the whole
// write, so the dump was cut off --send-timeout after it began.
//
// The send timeout is 3 s and the reader takes 32 KiB every 10 ms (at
// most 3.2 MB/s: a 16 MiB dump takes 5 s or more, past the send timeout):
// each 256 KiB step arrives in about 80 ms, so the reader may be held up
// almost 3 s by the machine (a loaded 2-core machine under -race held a
// reader of 32 KiB every 4 ms past a 1 s send timeout: 'cut off after
// 26529230 of about 30237101 bytes, 14.791s after it began').
func TestServeAdminSteppedProgress(t *testing.T) {
	const send = 3 * time.Second
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	_, admin, _, _ := startServe(t, serveConfig{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: 1 << 20,
		SendTimeout: send})
	waitReady(t, admin)

	stop := make(chan struct{})
	var parked sync.WaitGroup
	for range 6000 {
		parked.Add(1)
		go func() { defer parked.Done(); parkDeep(40, stop) }()
	}
	defer func() { close(stop); parked.Wait() }()

	// The dump, read at full speed: its size.
	resp, err := http.Get("http://" + admin + "/debug/pprof/goroutine?debug=2")
	if err != nil {
		t.Fatal(err)
	}
	size, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("goroutine dump read at full speed: %s, %d bytes, %v", resp.Status, size, err)
	}
	// It must outlast the socket buffers by far, or the test shows nothing.
	if size < 16<<20 {
		t.Fatalf("goroutine dump of %d bytes, want at least 16 MiB", size)
	}
	time.Sleep(minStopTheWorldGap) // one full dump starts per gap

	// The same dump read at 3.2 MB/s at most (32 KiB every 10 ms): each
	// 256 KiB arrives well within the send timeout, the whole takes
	// longer than it.
	c := rawConn(t, admin)
	if err := c.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(c, "GET /debug/pprof/goroutine?debug=2 HTTP/1.1\r\nHost: admin\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.SetReadDeadline(start.Add(60 * time.Second)); err != nil {
		t.Fatal(err)
	}
	sresp, err := http.ReadResponse(bufio.NewReaderSize(c, 32<<10), nil)
	if err != nil {
		t.Fatalf("steady reader: no response head: %v", err)
	}
	var got int64
	buf := make([]byte, 32<<10)
	for {
		n, err := sresp.Body.Read(buf)
		got += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("steady reader: the dump was cut off after %d of about %d bytes, %v after it began (send timeout %v): %v",
				got, size, time.Since(start).Round(time.Millisecond), send, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("steady reader: %d bytes in %v (send timeout %v)", got, took.Round(time.Millisecond), send)
	if took <= send {
		t.Errorf("steady reader: the dump took %v, not longer than the send timeout %v: the test shows nothing", took, send)
	}
	if got < size/2 {
		t.Errorf("steady reader: %d bytes, want about %d", got, size)
	}
}

// TestServeAdminCmdlineRedacted: /debug/pprof/cmdline on the admin
// listener (no authentication: it is the port Prometheus scrapes) served
// the process's arguments as given, --secret-key's value included: anyone
// who could reach the port could sign as that key. The value of a secret
// flag is redacted, in both forms (--secret-key V, --secret-key=V); the
// rest of the command line is served.
func TestServeAdminCmdlineRedacted(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	_, admin, _, _ := startServe(t, serveConfig{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: 1 << 20})
	waitReady(t, admin)
	saved := os.Args
	t.Cleanup(func() { os.Args = saved })
	os.Args = []string{"wharf", "serve", "--access-key", "AKVISIBLE", "--secret-key", "SECRET-ONE", "-secret-key=SECRET-TWO",
		"--listen", ":8080", "--peer-secret-file", "/etc/wharf/peer"}
	code, raw := get(t, "http://"+admin+"/debug/pprof/cmdline")
	body := string(raw)
	if code != 200 {
		t.Fatalf("cmdline: %d %s", code, body)
	}
	for _, s := range []string{"SECRET-ONE", "SECRET-TWO"} {
		if strings.Contains(body, s) {
			t.Errorf("/debug/pprof/cmdline serves the secret key %s: %q", s, body)
		}
	}
	for _, s := range []string{"serve", "AKVISIBLE", "--listen", ":8080", "/etc/wharf/peer", "--secret-key"} {
		if !strings.Contains(body, s) {
			t.Errorf("/debug/pprof/cmdline lost %q: %q", s, body)
		}
	}
}

// TestServeTLSHandshakeLogBounded: net/http logs a line for every
// connection whose TLS handshake fails, and anything that reaches the S3
// port (a scanner, a client speaking plain HTTP) causes one per
// connection; the peer listener already passed at most one per 30 s on,
// the S3 and admin listeners every one. They now share the peer
// listener's limit: the first line, then at most one per 30 s saying how
// many were left out.
func TestServeTLSHandshakeLogBounded(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "s3", validNow)
	addr, _, logs, _, _ := startTLSServe(t, frontDoorConfig{TLSCert: cert, TLSKey: key}, false)
	for range 50 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET / HTTP/1.0\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.Copy(io.Discard, c) // until the listener closes it
		c.Close()
	}
	time.Sleep(100 * time.Millisecond) // the last line is written as the connection ends
	if n := strings.Count(logs.String(), "TLS handshake error"); n != 1 {
		t.Errorf("50 failed TLS handshakes on the S3 port: %d log lines, want 1", n)
	}
}

// TestIndexCacheEventsAtZero: the README promises that every series
// exists at zero from startup, and an alert on a rising rate of
// wharf_index_cache_objects_total{event="refused"} (someone else writes
// the prefix) needs the series before the first refusal. The event series
// appeared only at their first event; all five now exist at zero.
func TestIndexCacheEventsAtZero(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := serveConfig{}
	cfg.IndexCacheURL = "s3://src/idx"
	cfg.IndexCacheSecretFile = testIndexSecretFile(t)
	reg := prometheus.NewRegistry()
	_, cleanup, err := cfg.openIndexCache(context.Background(), backend.NewFileStore(dir), reg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "wharf_index_cache_objects_total" {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "event" && m.GetCounter().GetValue() == 0 {
					got[l.GetValue()] = true
				}
			}
		}
	}
	for _, e := range []string{"refused", "published", "damaged, replaced", "already there, valid", "damaged, replaced by another writer first"} {
		if !got[e] {
			t.Errorf("wharf_index_cache_objects_total{event=%q} does not exist at zero after start (have %v)", e, got)
		}
	}
}

// TestServeTLSReloadSeriesAtZero: wharf_tls_reloads_total{listener,result}
// exists at zero for each TLS listener from the start, so an alert on a
// rising result="error" works before the first failed reload (the series
// appeared only at the first reload of each result).
func TestServeTLSReloadSeriesAtZero(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "s3", validNow)
	_, admin, _, _, _ := startTLSServe(t, frontDoorConfig{TLSCert: cert, TLSKey: key}, true)
	c := pki.client(false)
	resp, err := c.Get("https://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`wharf_tls_reloads_total{listener="s3",result="ok"} 0`, `wharf_tls_reloads_total{listener="s3",result="error"} 0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s at start:\n%s", want, grepLines(string(b), "wharf_tls_reloads_total"))
		}
	}
}

// TestServeAdminProfilesBounded: each /debug/pprof/ request holds memory
// (a goroutine dump buffers up to 64 MiB, a heap profile its records) or
// a connection for up to 10 minutes (a delta profile, ?seconds=), and the
// admin listener has no authentication: requests at once were unbounded.
// At most maxAdminProfiles run at once; one more is refused at once with
// 503 and Retry-After, and the other endpoints (/metrics, /readyz) are
// still answered meanwhile.
func TestServeAdminProfilesBounded(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	_, admin, _, _ := startServe(t, serveConfig{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: 1 << 20})
	waitReady(t, admin)
	// Delta profiles that wait 3 s each hold their turn meanwhile.
	var held sync.WaitGroup
	for range maxAdminProfiles {
		held.Add(1)
		go func() {
			defer held.Done()
			resp, err := http.Get("http://" + admin + "/debug/pprof/allocs?seconds=3")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	defer held.Wait()
	time.Sleep(500 * time.Millisecond) // they have started
	start := time.Now()
	resp, err := http.Get("http://" + admin + "/debug/pprof/goroutine?debug=2")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || time.Since(start) > time.Second {
		t.Errorf("a profile while %d run: %s (Retry-After %q) after %v, want 503 with Retry-After at once",
			maxAdminProfiles, resp.Status, resp.Header.Get("Retry-After"), time.Since(start).Round(time.Millisecond))
	}
	for _, path := range []string{"/metrics", "/readyz", "/healthz"} {
		if code, _ := get(t, "http://"+admin+path); code != 200 {
			t.Errorf("%s while the profiles run: %d, want 200", path, code)
		}
	}
}
