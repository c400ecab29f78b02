package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// testIndexSecretFile writes a valid shared index cache secret file.
func testIndexSecretFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "index-secret")
	if err := os.WriteFile(p, []byte("3f1c9a6d0b2e4f5a8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestIndexCacheTrustValidation: the shared index cache's authentication
// options are checked at start (and by --check-config): a secret file that
// is missing, short, readable by every user, not a regular file or too
// large is refused naming it; an s3:// cache with neither a secret nor the
// opt-in is refused; the options without an s3:// cache, or both at once,
// are refused.
func TestIndexCacheTrustValidation(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := testIndexSecretFile(t)
	short := write("short", strings.Repeat("k", 31)+"\n\n", 0o600)
	open := write("open", strings.Repeat("k", 40), 0o644)
	big := write("big", strings.Repeat("k", 5000), 0o600)
	unreadable := write("unreadable", strings.Repeat("k", 40), 0o000)
	missing := filepath.Join(dir, "missing")
	fifo := filepath.Join(dir, "fifo") // opening it would wait for a writer
	if !testMkfifo(t, fifo) {
		fifo = dir // no FIFOs here: the directory case again
	}
	cases := []struct {
		name string
		args []string
		want string // "" = accepted
	}{
		{"secret", []string{"--index-cache", "s3://src/idx", "--index-cache-secret-file", good}, ""},
		{"trust-writers", []string{"--index-cache", "s3://src/idx", "--index-cache-trust-writers"}, ""},
		{"neither", []string{"--index-cache", "s3://src/idx"}, "a shared index cache needs --index-cache-secret-file FILE"},
		{"both", []string{"--index-cache", "s3://src/idx", "--index-cache-secret-file", good, "--index-cache-trust-writers"}, "choose one"},
		{"missing", []string{"--index-cache", "s3://src/idx", "--index-cache-secret-file", missing}, missing},
		{"a URL", []string{"--index-cache", "s3://src/idx", "--index-cache-secret-file", "s3://src/secret"}, "a URL, not a local file"},
		{"short", []string{"--index-cache", "s3://src/idx", "--index-cache-secret-file", short}, "31 bytes of secret, want at least 32"},
		{"world-readable", []string{"--index-cache", "s3://src/idx", "--index-cache-secret-file", open}, "readable by every user (mode 0644)"},
		{"directory", []string{"--index-cache", "s3://src/idx", "--index-cache-secret-file", dir}, "not a regular file"},
		{"fifo", []string{"--index-cache", "s3://src/idx", "--index-cache-secret-file", fifo}, "not a regular file"},
		{"too-large", []string{"--index-cache", "s3://src/idx", "--index-cache-secret-file", big}, "larger than 4096 bytes"},
		{"secret-local-dir", []string{"--index-cache", dir, "--index-cache-secret-file", good}, "a local index directory carries no MAC"},
		{"trust-no-cache", []string{"--index-cache-trust-writers"}, "without an s3:// --index-cache"},
	}
	if os.Geteuid() != 0 { // root reads a file of mode 000
		cases = append(cases, struct {
			name string
			args []string
			want string
		}{"unreadable", []string{"--index-cache", "s3://src/idx", "--index-cache-secret-file", unreadable}, "permission denied"})
	}
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := parseServeArgs(append([]string{"--store", store, "--archive", "data=" + man, "--anonymous", "--listen", "127.0.0.1:0"}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			_, err = cfg.checkConfig()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("--check-config: %v, want an error containing %q", err, tc.want)
			case tc.want != "":
				cfg.LogOut = io.Discard
				cfg.Ready = func(string, string) { t.Error("serve started") }
				if err := serve(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("serve: %v, want an error containing %q", err, tc.want)
				}
			}
		})
	}
	// The YAML keys.
	cfg := defaultServeConfig()
	if err := applyConfigYAML([]byte("index_cache_dir: s3://src/idx\nindex_cache_secret_file: "+good+"\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.IndexCacheSecretFile != good || cfg.validateIndexCache() != nil {
		t.Errorf("index_cache_secret_file: %q, %v", cfg.IndexCacheSecretFile, cfg.validateIndexCache())
	}
	if err := applyConfigYAML([]byte("index_cache_trust_writers: true\n"), &cfg); err != nil || !cfg.IndexCacheTrustWriters {
		t.Errorf("index_cache_trust_writers: %v %v", cfg.IndexCacheTrustWriters, err)
	}
}

// testS3 is gofakes3 on loopback with bucket "bkt", behind wrap (nil: as
// is), and an S3Store for it.
func testS3(t *testing.T, wrap func(h http.Handler) http.Handler) (url string, store backend.Store) {
	t.Helper()
	mem := s3mem.New()
	if err := mem.CreateBucket("bkt"); err != nil {
		t.Fatal(err)
	}
	var h http.Handler = gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	s, err := backend.NewS3Store(context.Background(), backend.S3Config{Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
		AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", MaxBackoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL, s
}

// TestIndexCacheProbeConditionalPut (issue 25): a store whose conditional
// PUT is not enforced (faults.IgnorePutConditions drops If-None-Match and
// If-Match) is refused as a shared index cache at start with an error
// saying so; the same server enforcing them passes, twice (the probe
// object left by the first start is no obstacle).
func TestIndexCacheProbeConditionalPut(t *testing.T) {
	ctx := context.Background()
	_, good := testS3(t, nil)
	for range 2 {
		if err := probeIndexCache(ctx, "s3://bkt/idx/", good); err != nil {
			t.Fatalf("an enforcing store refused: %v", err)
		}
	}
	url, bad := testS3(t, faults.IgnorePutConditions)
	err := probeIndexCache(ctx, "s3://bkt/idx/", bad)
	if err == nil || !strings.Contains(err.Error(), "does not enforce conditional PUTs") {
		t.Fatalf("a store ignoring the conditions: %v", err)
	}
	// serve refuses to start on it.
	cfg, _, err := parseServeArgs([]string{"--store", "s3://", "--s3-endpoint", url, "--s3-path-style", "--s3-region", "us-east-1",
		"--anonymous", "--listen", "127.0.0.1:0", "--archive", "data=s3://bkt/p/uploads/u/manifest.json.gz",
		"--index-cache", "s3://bkt/idx", "--index-cache-secret-file", testIndexSecretFile(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	cfg.LogOut = io.Discard
	cfg.Ready = func(string, string) { t.Error("serve started") }
	if err := serve(ctx, cfg); err == nil || !strings.Contains(err.Error(), "does not enforce conditional PUTs") {
		t.Errorf("serve on a store ignoring conditional PUTs: %v", err)
	}
}

// TestIndexBuildSharedOutcomes (issue 20 item 12): wharf index build -o
// s3://... checks what is there: "published" the first time, "already
// there, valid" the next, "damaged, replaced" after the object is damaged
// or forged (a valid index without the MAC), and the replacement is what a
// replica with the secret accepts. Without a secret or the opt-in it is
// refused before anything is read.
func TestIndexBuildSharedOutcomes(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n"), "d/b": []byte("b")})
	dir := strings.TrimPrefix(store, "file://")
	secret := testIndexSecretFile(t)
	build := func(extra ...string) (string, error) {
		var out bytes.Buffer
		err := indexCmd(context.Background(), append([]string{"build", "--quiet", "--store", store, man, "-o", "s3://src/idx"}, extra...), &out)
		return out.String(), err
	}
	for i, want := range []string{"published", "already there, valid"} {
		out, err := build("--index-cache-secret-file", secret)
		if err != nil || !strings.Contains(out, "index:              s3://src/idx: "+want+"\n") {
			t.Fatalf("build %d: %v\n%s", i, err, out)
		}
	}
	objs, _ := filepath.Glob(filepath.Join(dir, "src", "idx", "*.widx"))
	if len(objs) != 1 {
		t.Fatalf("objects %v", objs)
	}
	good, _ := os.ReadFile(objs[0])
	local := filepath.Join(t.TempDir(), "x.widx")
	if _, err := indexCmdOut(t, "build", "--quiet", "--store", store, man, "-o", local); err != nil {
		t.Fatal(err)
	}
	unmaced, _ := os.ReadFile(local)
	for _, damage := range []struct {
		what string
		data []byte
	}{{"flipped", append(bytes.Clone(good[:100]), append([]byte{good[100] ^ 1}, good[101:]...)...)}, {"no MAC", unmaced}} {
		os.WriteFile(objs[0], damage.data, 0o644)
		os.Chtimes(objs[0], time.Now().Add(time.Minute), time.Now().Add(time.Minute))
		out, err := build("--index-cache-secret-file", secret)
		if err != nil || !strings.Contains(out, "s3://src/idx: damaged, replaced\n") {
			t.Fatalf("%s: %v\n%s", damage.what, err, out)
		}
		if got, _ := os.ReadFile(objs[0]); !bytes.Equal(got, good) {
			t.Errorf("%s: the object is not the authenticated index again", damage.what)
		}
	}
	sec, err := loadIndexSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	c := archiveview.StoreIndexCache{Store: backend.NewFileStore(dir), Bucket: "src", Prefix: "idx/", Spool: t.TempDir(), Secret: sec}
	a, err := archiveview.Open(context.Background(), backend.NewFileStore(dir), "src", strings.TrimPrefix(man, "s3://src/"), archiveview.Options{IndexCache: c})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()

	if _, err := build(); err == nil || !strings.Contains(err.Error(), "--index-cache-secret-file") {
		t.Errorf("build -o s3:// without a secret or the opt-in: %v", err)
	}
	if out, err := build("--index-cache-trust-writers"); err != nil || !strings.Contains(out, "already there, valid") {
		t.Errorf("build -o s3:// trusting the writers: %v\n%s", err, out)
	}
}

func indexCmdOut(t *testing.T, args ...string) (string, error) {
	var out bytes.Buffer
	err := indexCmd(context.Background(), args, &out)
	return out.String(), err
}

// TestServeSharedIndexMetrics: wharf serve with an authenticated shared
// index cache logs its key id, counts what the cache did
// (wharf_index_cache_objects_total), refuses a forged object (the index
// without its MAC) and replaces it. The GET waits for the archive's open,
// so the counts are final when scraped.
func TestServeSharedIndexMetrics(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	dir := strings.TrimPrefix(store, "file://")
	cfg, _, err := parseServeArgs([]string{"--store", store, "--archive", "data=" + man, "--anonymous", "--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0", "--index-cache", "s3://src/idx", "--index-cache-secret-file", testIndexSecretFile(t)})
	if err != nil {
		t.Fatal(err)
	}
	scrape := func(admin string) string {
		t.Helper()
		_, body := get(t, "http://"+admin+"/metrics")
		var lines []string
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "wharf_index_cache_objects_total{") {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}
	addr, admin, logs, stop := startServe(t, cfg)
	if code, b := get(t, "http://"+addr+"/data/a.txt"); code != 200 || string(b) != "hello\n" {
		t.Fatalf("GET a.txt: %d %q", code, b)
	}
	if m := scrape(admin); !strings.Contains(m, `{event="published"} 1`) {
		t.Errorf("first start: metrics %q", m)
	}
	if !strings.Contains(logs.String(), `"key_id"`) {
		t.Errorf("no key id logged:\n%s", logs.String())
	}
	stop()

	objs, _ := filepath.Glob(filepath.Join(dir, "src", "idx", "*.widx"))
	if len(objs) != 1 {
		t.Fatalf("objects %v", objs)
	}
	good, _ := os.ReadFile(objs[0])
	os.WriteFile(objs[0], good[:len(good)-48], 0o644) // the index, without its MAC
	os.Chtimes(objs[0], time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	addr, admin, logs, stop = startServe(t, cfg)
	defer stop()
	if code, b := get(t, "http://"+addr+"/data/a.txt"); code != 200 || string(b) != "hello\n" {
		t.Fatalf("GET a.txt: %d %q", code, b)
	}
	m := scrape(admin)
	if !strings.Contains(m, `{event="refused"} 1`) || !strings.Contains(m, `{event="damaged, replaced"} 1`) {
		t.Errorf("after the forgery: metrics %q\n%s", m, logs.String())
	}
	if got, _ := os.ReadFile(objs[0]); !bytes.Equal(got, good) {
		t.Error("the unauthenticated object was not replaced")
	}
}

// plainStore hides every optional capability of the store it embeds.
type plainStore struct{ backend.Store }

// TestOpenIndexCacheCapabilities (issue 21): openIndexCache asks a
// wrapped store what the store it wraps can do (backend.AsPutter,
// AsMatchPutter). A store that cannot write, or cannot replace
// conditionally, is refused at start even behind Instrument, whose
// PutIfAbsent and PutIfMatch methods exist whatever it wraps (before, the
// direct type assertions accepted both); Instrument over one that can is
// accepted.
func TestOpenIndexCacheCapabilities(t *testing.T) {
	dir := t.TempDir()
	fs := backend.NewFileStore(dir)
	instr := func(s backend.Store) backend.Store {
		return backend.Instrument(s, backend.NewMetrics(prometheus.NewRegistry()))
	}
	for _, tc := range []struct {
		name  string
		store backend.Store
		want  string // "" accepted
	}{
		{"Instrument(FileStore)", instr(fs), ""},
		{"Instrument(read-only)", instr(plainStore{fs}), "the store cannot write"},
		// The Glacier model passes both kinds of write through to what it wraps.
		{"Instrument(Glacier(FileStore))", instr(faults.NewGlacier(faults.GlacierConfig{}).Store(fs)), ""},
		{"Instrument(Glacier(read-only))", instr(faults.NewGlacier(faults.GlacierConfig{}).Store(plainStore{fs})), "the store cannot write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cleanup, err := openIndexCache("s3://bkt/idx/", tc.store, nil)
			if err == nil {
				cleanup()
			}
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("openIndexCache: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestIndexCacheProbeMissingBucket: a missing bucket (S3's NoSuchBucket
// over gofakes3) is a start-up error saying so, told apart from a
// missing probe object by backend.ErrNoSuchBucket, not by the error's
// text (issue 21); FileStore's case is TestServeIndexCacheProbe.
func TestIndexCacheProbeMissingBucket(t *testing.T) {
	_, store := testS3(t, nil)
	err := probeIndexCache(context.Background(), "s3://nobucket/idx/", store)
	if err == nil || !strings.Contains(err.Error(), `bucket "nobucket" does not exist`) {
		t.Fatalf("probe of a missing bucket: %v", err)
	}
	if err := probeIndexCache(context.Background(), "s3://bkt/idx/", store); err != nil {
		t.Fatalf("probe of an existing bucket without the probe object: %v", err)
	}
}
