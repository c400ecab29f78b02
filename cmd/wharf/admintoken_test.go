package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
)

// adminGet GETs url with the bearer token tok ("" = none).
func adminGet(t *testing.T, url, tok string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for b.Len() < 1<<16 {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String(), resp.Header
}

func writeToken(t *testing.T, path, tok string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(tok), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestServeAdminToken: with --admin-token-file every admin endpoint but
// the probes answers 401 (with WWW-Authenticate, counted) to a request
// without the bearer token or with another, and serves the one with it.
// Before there was no way to protect them: /metrics, /-/archives and
// /debug/pprof/ answered whoever reached the listener.
func TestServeAdminToken(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef"
	tf := filepath.Join(t.TempDir(), "admin-token")
	writeToken(t, tf, tok+"\n", 0o600)
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	cfg := serveConfig{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: 1 << 20}
	cfg.AdminTokenFile = tf
	_, admin, _, _ := startServe(t, cfg)
	waitReady(t, admin)
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body, _ := adminGet(t, "http://"+admin+p, ""); code != 200 {
			t.Errorf("%s without a token: %d %s, want 200 (probes stay open)", p, code, body)
		}
	}
	for _, p := range []string{"/metrics", "/-/archives", "/-/peers", "/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap", "/nothing"} {
		for _, auth := range []string{"", "Bearer ", "Bearer " + tok[:len(tok)-1] + "0", "Basic " + tok, tok} {
			code, body, h := adminGet(t, "http://"+admin+p, auth)
			if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s with Authorization %q: %d %q (WWW-Authenticate %q), want 401", p, auth, code, body, h.Get("WWW-Authenticate"))
			}
		}
	}
	code, body, _ := adminGet(t, "http://"+admin+"/metrics", "Bearer "+tok)
	if code != 200 || !strings.Contains(body, "wharf_admin_unauthorized_total 35") {
		t.Errorf("/metrics with the token: %d, want 200 and 35 refusals counted:\n%.2000s", code, body)
	}
	if code, body, _ := adminGet(t, "http://"+admin+"/-/archives", "bearer "+tok); code != 200 || !strings.Contains(body, "data") {
		t.Errorf("/-/archives with the token (scheme in lower case): %d %.300s", code, body)
	}
}

// TestAdminTokenRotation: a rotated token file is taken within the
// recheck interval (the old token refused, the new one served); a
// rotated file that breaks the rule (too short) is refused and the token
// before it kept, with a warning.
func TestAdminTokenRotation(t *testing.T) {
	tf := filepath.Join(t.TempDir(), "tok")
	writeToken(t, tf, "first-token-0123456789", 0o600)
	var logs lockedBuffer
	now := time.Unix(1_000_000, 0)
	reg := prometheus.NewRegistry()
	at, err := newAdminToken(tf, zerolog.New(&logs), reg)
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
		if rec.code == 0 { // nothing written: net/http answers 200
			return 200
		}
		return rec.code
	}
	if c := try("first-token-0123456789"); c != 200 {
		t.Fatalf("first token: %d", c)
	}
	writeToken(t, tf, "second-token-0123456789", 0o600)
	if err := os.Chtimes(tf, now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if c := try("first-token-0123456789"); c != 200 {
		t.Errorf("within the recheck interval the first token is still current: %d", c)
	}
	now = now.Add(adminTokenRecheck)
	if c := try("first-token-0123456789"); c != 401 {
		t.Errorf("the first token after a rotation: %d, want 401", c)
	}
	if c := try("second-token-0123456789"); c != 200 {
		t.Errorf("the rotated token: %d, want 200", c)
	}
	writeToken(t, tf, "short", 0o600)
	if err := os.Chtimes(tf, now, now.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(adminTokenRecheck)
	if c := try("second-token-0123456789"); c != 200 {
		t.Errorf("a broken rotation replaced the token: %d", c)
	}
	if c := try("short"); c != 401 {
		t.Errorf("a token shorter than %d bytes was taken: %d", minAdminToken, c)
	}
	if !strings.Contains(logs.String(), "the rotated file is refused") {
		t.Errorf("no warning for the broken rotation: %s", logs.String())
	}
	if got := testutil.ToFloat64(at.denied); got != 2 {
		t.Errorf("refusals counted: %v, want 2", got)
	}
}

type statusRecorder struct {
	header http.Header
	code   int
}

func (r *statusRecorder) Header() http.Header { return r.header }
func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return len(p), nil
}
func (r *statusRecorder) WriteHeader(c int) {
	if r.code == 0 {
		r.code = c
	}
}

// TestAdminTokenFileChecked: a token file that is a URL, missing,
// readable by everyone, too short or holding a byte a header cannot
// carry is refused at start, naming the flag and the file; so is the
// flag without an admin listener.
func TestAdminTokenFileChecked(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		writeToken(t, p, content, mode)
		return p
	}
	good := file("good", "0123456789abcdef\n", 0o600)
	for _, c := range []struct {
		name, path, admin, want string
	}{
		{"no admin listener", good, "", "no admin listener"},
		{"URL", "s3://bucket/token", "127.0.0.1:0", "a URL, not a local file"},
		{"missing", filepath.Join(dir, "nope"), "127.0.0.1:0", "no such file"},
		{"world-readable", file("open", "0123456789abcdef", 0o644), "127.0.0.1:0", "readable by every user"},
		{"short", file("short", "0123456789", 0o600), "127.0.0.1:0", "want at least 16"},
		{"space inside", file("space", "01234567 89abcdef", 0o600), "127.0.0.1:0", "not printable ASCII"},
		{"non-ASCII", file("utf8", "0123456789abcdef\u00e9", 0o600), "127.0.0.1:0", "not printable ASCII"},
	} {
		fd := frontDoorConfig{AdminTokenFile: c.path}
		err := fd.validate(c.admin, time.Now())
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "admin-token-file") {
			t.Errorf("%s: %v, want an error about --admin-token-file saying %q", c.name, err, c.want)
		}
	}
	fd := frontDoorConfig{AdminTokenFile: good}
	if err := fd.validate("127.0.0.1:0", time.Now()); err != nil {
		t.Errorf("a good token file refused: %v", err)
	}
}
