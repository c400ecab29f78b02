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
