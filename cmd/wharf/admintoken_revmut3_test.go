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

// TestAdminTokenBounds: the token's length bound is exact (15 bytes
// refused, 16 taken), and the bearer token may follow its scheme after
// more than one space (as RFC 9110's 1*SP allows), but not after none.
func TestAdminTokenBounds(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		tok string
		ok  bool
	}{
		{"0123456789abcde", false},
		{"0123456789abcdef", true},
	} {
		p := filepath.Join(dir, "tok")
		writeToken(t, p, c.tok+"\n", 0o600)
		if _, err := readAdminToken(p); (err == nil) != c.ok {
			t.Errorf("a token of %d bytes: %v, want taken %v", len(c.tok), err, c.ok)
		}
	}
	const tok = "0123456789abcdef0123"
	tf := filepath.Join(dir, "tok")
	writeToken(t, tf, tok, 0o600)
	at, err := newAdminToken(tf, zerolog.Nop(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		auth string
		ok   bool
	}{
		{"Bearer " + tok, true},
		{"Bearer   " + tok, true},
		{"Bearer" + tok, false},
		{"Bearer  " + tok + " ", false},
	} {
		req, _ := http.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", c.auth)
		if got := at.allowed(req); got != c.ok {
			t.Errorf("Authorization %q: allowed %v, want %v", c.auth, got, c.ok)
		}
	}
}

// TestServeAdminOpenWarned: an admin listener on every interface without
// --admin-token-file is warned about at start (its metrics, archive
// pages and profiles are open to whoever reaches it); one on loopback
// is not.
func TestServeAdminOpenWarned(t *testing.T) {
	const warning = "are open to whoever reaches this address"
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	for _, c := range []struct {
		admin string
		warn  bool
	}{
		{"0.0.0.0:0", true},
		{"127.0.0.1:0", false},
	} {
		cfg := serveConfig{Listen: "127.0.0.1:0", AdminListen: c.admin, StoreURL: store,
			Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: 1 << 20}
		_, _, logs, stop := startServe(t, cfg)
		got := strings.Contains(logs.String(), warning)
		if err := stop(); err != nil {
			t.Errorf("--admin-listen %s: stop: %v", c.admin, err)
		}
		if got != c.warn {
			t.Errorf("--admin-listen %s without a token: warned %v, want %v; logs:\n%.3000s", c.admin, got, c.warn, logs.String())
		}
	}
}

// TestAdminTokenFileRemoved: a token file that disappears (a Secret
// unmounted) keeps the token before it, with the warning, not a claim
// that a rotated token was taken.
func TestAdminTokenFileRemoved(t *testing.T) {
	const tok = "0123456789abcdef0123"
	tf := filepath.Join(t.TempDir(), "tok")
	writeToken(t, tf, tok, 0o600)
	var logs lockedBuffer
	now := time.Unix(1_000_000, 0)
	at, err := newAdminToken(tf, zerolog.New(&logs), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	at.now = func() time.Time { return now }
	at.checked = now
	if err := os.Remove(tf); err != nil {
		t.Fatal(err)
	}
	now = now.Add(adminTokenRecheck)
	req, _ := http.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if !at.allowed(req) {
		t.Errorf("the token before the file disappeared was dropped")
	}
	if l := logs.String(); !strings.Contains(l, "the rotated file is refused") || strings.Contains(l, "rotated token taken") {
		t.Errorf("logs for a removed token file: %s; want the refusal's warning only", l)
	}
}
