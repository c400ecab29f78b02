package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// TestAdminTokenRotationSameSize: a rotated token of the same length as
// the one before it (the usual case: openssl rand -hex 32 each time) is
// taken too: the file's modification time tells the rotation, not only
// its size.
func TestAdminTokenRotationSameSize(t *testing.T) {
	const first, second = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	tf := filepath.Join(t.TempDir(), "tok")
	writeToken(t, tf, first, 0o600)
	now := time.Unix(1_000_000, 0)
	if err := os.Chtimes(tf, now, now); err != nil {
		t.Fatal(err)
	}
	at, err := newAdminToken(tf, zerolog.Nop(), prometheus.NewRegistry())
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
	writeToken(t, tf, second, 0o600)
	if err := os.Chtimes(tf, now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(adminTokenRecheck)
	if c := try(first); c != http.StatusUnauthorized {
		t.Errorf("the first token after a rotation to one of the same length: %d, want 401", c)
	}
	if c := try(second); c != 200 {
		t.Errorf("the rotated token of the same length: %d, want 200", c)
	}
}
