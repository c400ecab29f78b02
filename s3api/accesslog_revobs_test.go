package s3api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
)

// TestAccessLogClientInput: the access line is one per request, and what a
// client alone decides does not make it large or a warning.
//
//   - A request's key, bucket, method and Range headers are the client's
//     bytes (up to the listener's header limit, 64 KiB by default): each is
//     logged cut to a bound (the key to S3's own 1024 bytes, so every real
//     key is logged whole) with its full length beside it, so an
//     anonymous client cannot make each of its requests log tens of KiB
//     (log pipelines split or drop such lines: docker's json-file at 16
//     KiB, and what follows the split is the client's text).
//   - A request refused 503 SlowDown by the per-key limit (the client's
//     own concurrency, counted in wharf_throttled_requests_total) and a
//     response cut off because the client left are logged at info: at
//     warn, one client flooding or cancelling its downloads paged whoever
//     alerts on wharf's warnings. A 500 stays a warning
//     (TestAccessLogLevelsAndFields).
func TestAccessLogClientInput(t *testing.T) {
	var mu sync.Mutex
	var hold chan struct{} // set: the next store request waits for it
	a2, _ := openArchive(t, standardFiles(), fixtureOpts{wrap: func(st backend.Store) backend.Store {
		return faults.NewFaulty(st, faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
			mu.Lock()
			h := hold
			hold = nil
			mu.Unlock()
			if h != nil {
				<-h
			}
			return faults.Fault{}
		}})
	}})
	v, err := auth.New(auth.Config{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	logs := &resetBuffer{}
	srv := httptest.NewServer(s3api.New(s3api.Config{
		Catalog: catalog.NewStatic(map[string]*archiveview.Archive{testBucket: a2}), Verifier: v,
		Logger: zerolog.New(logs), Registerer: prometheus.NewRegistry(), MaxInflightPerKey: 1,
	}))
	t.Cleanup(srv.Close)

	lines := func() []map[string]any {
		var out []map[string]any
		// The line is written as the handler returns, after the client
		// has its answer.
		for deadline := time.Now().Add(5 * time.Second); logs.String() == "" && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
			if m["message"] == "request" {
				m["_len"] = len(l)
				out = append(out, m)
			}
		}
		return out
	}

	// 1. A long key and many long Range headers, unsigned.
	longKey := strings.Repeat("k", 40<<10)
	req, _ := http.NewRequest("GET", srv.URL+"/"+testBucket+"/"+longKey, nil)
	for range 10 {
		req.Header.Add("Range", "bytes=0-1,"+strings.Repeat("2-3,", 500)+"4-5")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	l := lines()
	if len(l) != 1 {
		t.Fatalf("%d access lines, want 1", len(l))
	}
	t.Logf("the access line of a request with a 40 KiB key and 20 KiB of Range headers: %d bytes", l[0]["_len"].(int))
	if n := l[0]["_len"].(int); n > 4<<10 {
		t.Errorf("the access line of a request with a 40 KiB key and 20 KiB of Range headers is %d bytes, want at most 4 KiB", n)
	}
	if k, _ := l[0]["key"].(string); len(k) > 1024+16 || !strings.HasPrefix(k, "kkkk") {
		t.Errorf("logged key of %d bytes (%.40q), want the first 1 KiB", len(k), k)
	}
	if kb, _ := l[0]["key_bytes"].(float64); int(kb) != len(longKey) {
		t.Errorf("key_bytes %v, want %d (the key's full length)", l[0]["key_bytes"], len(longKey))
	}
	logs.Reset()

	// 2. A short key is logged whole, with no key_bytes.
	resp, err = http.Get(srv.URL + "/" + testBucket + "/hello.txt")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if l := lines(); len(l) != 1 || l[0]["key"] != "hello.txt" || l[0]["key_bytes"] != nil || l[0]["level"] != "info" {
		t.Errorf("a plain GET logged as %v", l)
	}
	logs.Reset()

	// 3. Throttled: one request holds the key's only slot (its store read
	// waits), a second is refused 503 SlowDown.
	release := make(chan struct{})
	mu.Lock()
	hold = release
	mu.Unlock()
	first := make(chan error, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/" + testBucket + "/big.bin")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		first <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		taken := hold == nil
		mu.Unlock()
		if taken {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first GET never reached the store")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, err = http.Get(srv.URL + "/" + testBucket + "/hello.txt")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 {
		t.Fatalf("second GET while the key's slot is held: %d, want 503", resp.StatusCode)
	}
	var throttled map[string]any
	for _, l := range lines() {
		if l["key"] == "hello.txt" {
			throttled = l
		}
	}
	if throttled == nil || throttled["level"] != "info" {
		t.Errorf("a request refused by the per-key limit logged as %v, want level info", throttled)
	}
	// The first GET holds the key's one slot until its handler returns,
	// which is after its client has every byte: wait for its access line,
	// or the next request is refused 503 too (seen under load).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		done := false
		for _, l := range lines() {
			if l["key"] == "big.bin" && l["status"] == float64(200) {
				done = true
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no access line of the first GET 10s after its body:\n%s", logs.String())
		}
	}
	logs.Reset()

	// 4. A client that leaves mid-body. Its receive buffer is kept small
	// (set before the connection is made, so the TCP window stays small):
	// else the 6 MiB body could fit in the kernel's buffers (loopback's
	// receive buffer grows to 32 MiB), and the handler would end clean
	// before the close, with nothing aborted.
	small := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := small.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET /%s/big.bin HTTP/1.1\r\nHost: x\r\n\r\n", testBucket)
	br := bufio.NewReader(c)
	if _, err := http.ReadResponse(br, nil); err != nil {
		t.Fatal(err)
	}
	c.Close()
	var left map[string]any
	for deadline := time.Now().Add(10 * time.Second); left == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, l := range lines() {
			if l["aborted"] == true {
				left = l
			}
		}
	}
	if left == nil {
		t.Fatalf("no access line of the aborted GET:\n%s", logs.String())
	}
	if left["abort_cause"] != "client" || left["level"] != "info" {
		t.Errorf("a GET the client left logged as %v, want level info, abort_cause client", left)
	}
}

// resetBuffer is a log buffer safe for concurrent writes, which can be
// emptied.
type resetBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (r *resetBuffer) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.Write(p)
}

func (r *resetBuffer) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.String()
}

func (r *resetBuffer) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.b.Reset()
}

// TestFailedBucketOneLinePerRequest: a bucket whose archive failed to open
// answers every request 500, and the failure is logged at error once per
// scan by the catalog ("archive could not be opened"). Each request also
// logged an error line of its own beside its access line, so any client
// polling the bucket (anonymously, with --anonymous) wrote error lines at
// its request rate. A request now writes its access line only (a warning,
// with the open error).
func TestFailedBucketOneLinePerRequest(t *testing.T) {
	v, err := auth.New(auth.Config{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	logs := &resetBuffer{}
	srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: unopenedCatalog{time.Now()}, Verifier: v,
		Logger: zerolog.New(logs), Registerer: prometheus.NewRegistry()}))
	t.Cleanup(srv.Close)
	const n = 20
	for range n {
		resp, err := http.Get(srv.URL + "/broken/a.txt")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 500 {
			t.Fatalf("GET of a failed bucket: %d", resp.StatusCode)
		}
	}
	var lines []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if lines = strings.Split(strings.TrimSpace(logs.String()), "\n"); strings.Count(logs.String(), `"message":"request"`) == n {
			break
		}
	}
	errorLines, access := 0, 0
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["level"] == "error" {
			errorLines++
		}
		if m["message"] == "request" {
			access++
			if e, _ := m["error"].(string); !strings.Contains(e, "not a manifest") || m["level"] != "warn" {
				t.Errorf("access line %v: want a warning carrying the open error", m)
			}
		}
	}
	if access != n || len(lines) != n || errorLines != 0 {
		t.Errorf("%d requests to a failed bucket logged %d lines (%d access lines, %d at error), want %d access lines and nothing else", n, len(lines), access, errorLines, n)
	}
}

// TestBusyReadOneLinePerRequest: a read refused because the read limits
// stayed full for their wait (chunkio.ErrBusy: 503 SlowDown with
// Retry-After, wharf shedding load) wrote a 'read failed' line at error
// beside its access line: under overload, when every request is refused
// so, the log grew by an error line per request. The refusal is load
// shedding, not a failure: its access line (with the error) says it.
func TestBusyReadOneLinePerRequest(t *testing.T) {
	busy := false
	var mu sync.Mutex
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true, wrap: func(s backend.Store) backend.Store {
		return faults.NewFaulty(s, faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
			mu.Lock()
			defer mu.Unlock()
			if busy && (r.Op == "range" || r.Op == "get") {
				return faults.Fault{Kind: faults.FaultError, Err: chunkio.ErrBusy}
			}
			return faults.Fault{}
		}})
	}})
	mu.Lock()
	busy = true
	mu.Unlock()
	resp, body := f.do(t, "GET", "/bkt/dir/a.bin", nil)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("GET while the read limits are full: %d (Retry-After %q) %s, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	var lines []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if strings.Contains(f.logs.String(), `"message":"request"`) {
			break
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		if strings.Contains(l, "dir/a.bin") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"message":"request"`) {
		t.Errorf("a read refused busy logged %d lines, want its access line only:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}
