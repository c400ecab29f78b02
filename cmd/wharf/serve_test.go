package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// packServeTree writes a small archive with our own writer into a temp
// file:// store and returns the store URL and the manifest URL.
func packServeTree(t *testing.T, files map[string][]byte) (string, string) {
	t.Helper()
	dir := t.TempDir()
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, time.Unix(1700000000, 0)),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", FrameSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	return "file://" + dir, "s3://src/" + res.ManifestKey
}

// startServe runs serve in-process and returns the bound addresses and a
// stop function that cancels it and returns serve's error.
func startServe(t *testing.T, cfg serveConfig) (addr, admin string, logs *lockedBuffer, stop func() error) {
	t.Helper()
	logs = &lockedBuffer{}
	cfg.LogOut = logs
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	cfg.Ready = func(a, b string) { ready <- [2]string{a, b} }
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg) }()
	select {
	case r := <-ready:
		addr, admin = r[0], r[1]
	case err := <-done:
		cancel()
		t.Fatalf("serve exited early: %v\n%s", err, logs.String())
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("serve did not start")
	}
	var once sync.Once
	var serr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case serr = <-done:
			case <-time.After(30 * time.Second):
				t.Error("serve did not stop")
			}
		})
		return serr
	}
	t.Cleanup(func() { _ = stop() })
	return addr, admin, logs, stop
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func TestServeAnonymousWithAdmin(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 40000)
	huge := bytes.Repeat([]byte("wharf shutdown test "), 2<<20) // 40 MiB, compresses well
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n"), "d/big.bin": big, "d/huge.bin": huge})
	addr, admin, logs, stop := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true,
		CacheBytes: 64 << 20, LogFormat: "json",
	})
	if !strings.Contains(logs.String(), "listening on "+addr) {
		t.Errorf("log lacks the bound address %s:\n%s", addr, logs.String())
	}
	if !strings.Contains(logs.String(), `"message":"serving archive"`) || !strings.Contains(logs.String(), `"files":3`) {
		t.Errorf("no per-archive start line:\n%s", logs.String())
	}
	code, body := get(t, "http://"+addr+"/data/d/big.bin")
	if code != 200 || !bytes.Equal(body, big) {
		t.Fatalf("GET big.bin: %d, equal %v", code, bytes.Equal(body, big))
	}
	code, body = get(t, "http://"+addr+"/data?list-type=2&delimiter=/")
	if code != 200 || !strings.Contains(string(body), "<Key>a.txt</Key>") || !strings.Contains(string(body), "<Prefix>d/</Prefix>") {
		t.Fatalf("listing: %d %s", code, body)
	}
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready", "/debug/pprof/": "goroutine"} {
		code, body := get(t, "http://"+admin+path)
		if code != 200 || !strings.Contains(string(body), want) {
			t.Errorf("admin %s: %d %.200s", path, code, body)
		}
	}
	_, metrics := get(t, "http://"+admin+"/metrics")
	for _, want := range []string{
		`wharf_requests_total{code="200",op="GetObject"} 1`,
		`wharf_served_bytes_total 640000`,
		`wharf_request_duration_seconds_count{op="ListObjectsV2"} 1`,
		`wharf_requests_total{code="404",op="HeadObject"} 0`,
		`wharf_backend_requests_total{op="get"}`,
		`wharf_frames_fetched_total`,
		`go_goroutines`,
		`process_`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Graceful shutdown: a response in flight when the signal comes is
	// finished before serve returns.
	resp, err := http.Get("http://" + addr + "/data/d/huge.bin")
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 1024)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-stopped:
		t.Fatalf("serve returned (%v) while a response was in flight", err)
	default:
	}
	rest, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(append(head, rest...), huge) {
		t.Fatalf("in-flight response cut by shutdown: %v, %d bytes", err, len(head)+len(rest))
	}
	if err := <-stopped; err != nil {
		t.Fatalf("serve returned %v", err)
	}
	if !strings.Contains(logs.String(), "stopped") {
		t.Error("no shutdown line")
	}
	if _, err := http.Get("http://" + addr + "/"); err == nil {
		t.Error("still serving after shutdown")
	}
}

func TestServeKeysOnly(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	addr, _, _, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", StoreURL: store, Archives: []serveArchive{{Name: "data", ManifestURL: man}},
		AccessKey: "AK", SecretKey: "SK", CacheBytes: 1 << 20,
	})
	code, body := get(t, "http://"+addr+"/data/a.txt")
	if code != 403 || !strings.Contains(string(body), "<Code>AccessDenied</Code>") {
		t.Fatalf("unsigned request with keys only: %d %s", code, body)
	}
}

func TestServeRefusals(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("x")})
	ok := serveArchive{Name: "data", ManifestURL: man}
	for _, tc := range []struct {
		name string
		cfg  serveConfig
		want string
	}{
		{"missing manifest", serveConfig{Listen: "127.0.0.1:0", StoreURL: store, Anonymous: true, CacheBytes: 1 << 20,
			Archives: []serveArchive{{Name: "gone", ManifestURL: "s3://src/p/missing.json.gz"}}}, "s3://src/p/missing.json.gz"},
		{"bad manifest URL", serveConfig{Listen: "127.0.0.1:0", StoreURL: store, Anonymous: true, CacheBytes: 1 << 20,
			Archives: []serveArchive{{Name: "x", ManifestURL: "http://nope"}}}, "http://nope"},
		{"non-loopback without auth", serveConfig{Listen: "0.0.0.0:0", StoreURL: store, CacheBytes: 1 << 20, Archives: []serveArchive{ok}}, "refusing to listen"},
		{"all interfaces without auth", serveConfig{Listen: ":0", StoreURL: store, CacheBytes: 1 << 20, Archives: []serveArchive{ok}}, "refusing to listen"},
		{"half a key pair", serveConfig{Listen: "127.0.0.1:0", StoreURL: store, AccessKey: "AK", CacheBytes: 1 << 20, Archives: []serveArchive{ok}}, "together"},
		{"no archives", serveConfig{Listen: "127.0.0.1:0", StoreURL: store, Anonymous: true, CacheBytes: 1 << 20}, "--archive"},
		{"duplicate names", serveConfig{Listen: "127.0.0.1:0", StoreURL: store, Anonymous: true, CacheBytes: 1 << 20, Archives: []serveArchive{ok, ok}}, "twice"},
		{"bad store", serveConfig{Listen: "127.0.0.1:0", StoreURL: "ftp://x", Anonymous: true, CacheBytes: 1 << 20, Archives: []serveArchive{ok}}, "ftp://x"},
		{"bad log format", serveConfig{Listen: "127.0.0.1:0", StoreURL: store, Anonymous: true, CacheBytes: 1 << 20, Archives: []serveArchive{ok}, LogFormat: "xml"}, "log-format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.LogOut = io.Discard
			tc.cfg.Ready = func(string, string) { t.Error("serve started listening") }
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := serve(ctx, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestServeFlags(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "512MiB": 512 << 20, "2GiB": 2 << 30, "64KB": 64000, "3M": 3 << 20} {
		got, err := parseServeBytes(in)
		if err != nil || got != want {
			t.Errorf("parseServeBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "MiB", "1.5GiB", "12XB"} {
		if _, err := parseServeBytes(bad); err == nil {
			t.Errorf("parseServeBytes(%q) accepted", bad)
		}
	}
	for addr, want := range map[string]bool{"127.0.0.1:9000": true, "localhost:1": true, "[::1]:9": true, "0.0.0.0:9": false, ":9000": false, "10.0.0.1:9": false} {
		if got := isLoopbackListen(addr); got != want {
			t.Errorf("isLoopbackListen(%q) = %v", addr, got)
		}
	}
	var a archiveFlags
	if err := a.Set("b=s3://x/y=z"); err != nil || a[0].Name != "b" || a[0].ManifestURL != "s3://x/y=z" {
		t.Errorf("archive flag: %+v %v", a, err)
	}
	if err := runServe(context.Background(), []string{"-h"}); err != nil {
		t.Errorf("-h: %v", err)
	}
}
