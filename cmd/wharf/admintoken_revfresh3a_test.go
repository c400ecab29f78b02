package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// TestAdminTokenRotationSameSizeAndTime: a rotation that leaves the
// file's size and modification time as they were (a token of the same
// length written within the file system's timestamp tick, cp -p, rsync
// -t, a restored backup) is taken like any: the revoked token is refused.
// The recheck compared size and mtime only, so such a rotation was never
// taken and the old token worked for as long as wharf ran.
func TestAdminTokenRotationSameSizeAndTime(t *testing.T) {
	const first, second = "first-token-0123456789", "other-token-9876543210"
	tf := filepath.Join(t.TempDir(), "tok")
	writeToken(t, tf, first+"\n", 0o600)
	st, err := os.Stat(tf)
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	now := time.Unix(1_000_000, 0)
	at, err := newAdminToken(tf, zerolog.New(&logs), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	at.now = func() time.Time { return now }
	at.checked = now
	h := at.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	try := func(tok string) int {
		req, _ := http.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, req)
		if rec.code == 0 {
			return 200
		}
		return rec.code
	}
	if c := try(first); c != 200 {
		t.Fatalf("first token: %d", c)
	}
	writeToken(t, tf, second+"\n", 0o600)
	if err := os.Chtimes(tf, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	now = now.Add(adminTokenRecheck)
	if c := try(first); c != http.StatusUnauthorized {
		t.Errorf("the revoked token after a rotation of the same size and mtime: %d, want 401", c)
	}
	if c := try(second); c != 200 {
		t.Errorf("the rotated token (same size and mtime): %d, want 200", c)
	}
	// A broken file is warned about once, not at every recheck.
	writeToken(t, tf, "short\n", 0o600)
	for range 5 {
		now = now.Add(adminTokenRecheck)
		if c := try(second); c != 200 {
			t.Fatalf("a broken rotation replaced the token: %d", c)
		}
	}
	if n := strings.Count(logs.String(), "the rotated file is refused"); n != 1 {
		t.Errorf("a broken file over 5 rechecks logged %d warnings, want 1:\n%s", n, logs.String())
	}
}

// TestServeAdminTokenPathTricks: a request path that is not the probes'
// but might be taken for one (dot segments after /healthz, a doubled
// slash, an escaped dot, a query naming /healthz) reaches no admin page
// without the token: the guard opens exactly the two paths (r.URL.Path,
// the one the mux routes by) and answers any other 401 before the mux
// sees it. An escaped letter is /healthz for both. (Guard test: passes
// on the code before.)
func TestServeAdminTokenPathTricks(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef"
	tf := filepath.Join(t.TempDir(), "admin-token")
	writeToken(t, tf, tok+"\n", 0o600)
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	cfg := serveConfig{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: 1 << 20}
	cfg.AdminTokenFile = tf
	_, admin, _, _ := startServe(t, cfg)
	waitReady(t, admin)
	for _, p := range []string{"/healthz/../metrics", "/readyz/../-/archives", "//metrics", "/healthz/%2e%2e/metrics",
		"/healthz/..%2fmetrics", "/metrics?/healthz", "/metrics#/healthz", "/healthz/", "/readyz/x", "/debug/pprof/../../healthz/../debug/pprof/"} {
		req, err := http.NewRequest(http.MethodGet, "http://"+admin+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = p // sent as is, not cleaned by the client
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		var b strings.Builder
		buf := make([]byte, 4096)
		for b.Len() < 1<<16 {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		body := b.String()
		if strings.Contains(body, "wharf_") || strings.Contains(body, `"buckets"`) || strings.Contains(body, "goroutine") || strings.Contains(body, "Types of profiles") {
			t.Errorf("GET %s without a token: %d, serves an admin page:\n%.300s", p, resp.StatusCode, body)
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d %.200q, want 401 (only the probes' own paths are open)", p, resp.StatusCode, body)
		}
	}
	if code, body, _ := adminGet(t, "http://"+admin+"/%68ealthz", ""); code != 200 {
		t.Errorf("/%%68ealthz (an escaped letter of /healthz): %d %q, want the probe's 200", code, body)
	}
}
