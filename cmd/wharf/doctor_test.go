package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend/faults"
)

// doctorLines runs wharf doctor with args and returns its lines by check
// name ("NAME STATUS" → details) and its error.
func doctorRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cfg, _, err := parseServeArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = doctor(context.Background(), &cfg, &out, time.Now())
	return out.String(), err
}

// wantLine fails unless out has a line of check name with status whose
// detail contains detail.
func wantLine(t *testing.T, out, status, name, detail string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == status && f[1] == name && strings.Contains(l, detail) {
			return
		}
	}
	t.Errorf("no line %q %q containing %q in:\n%s", status, name, detail, out)
}

// TestDoctorChecks: each check of wharf doctor, passing and failing; any
// failure makes doctor fail.
func TestDoctorChecks(t *testing.T) {
	dir := t.TempDir()
	manifest, _ := packDir(t, dir, map[string][]byte{"a.txt": []byte("doctor\n"), "b.bin": bytes.Repeat([]byte("x"), 5000)},
		time.Unix(1700000000, 0), cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1"})
	pki := newTestPKI(t)
	goodCrt, goodKey := pki.pair(t, "good", validNow)
	oldCrt, oldKey := pki.pair(t, "old", expired)
	keysFile := filepath.Join(t.TempDir(), "keys.yaml")
	os.WriteFile(keysFile, []byte("keys:\n  - access_key: AKIADOCTOR\n    secret_key: doctor-secret\n"), 0o600)
	badKeys := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(badKeys, []byte("keys: [{access_key: \"\"}]\n"), 0o600)
	cacheDir := t.TempDir()
	notADir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notADir, []byte("x"), 0o644)

	base := []string{"--store", "file://" + dir, "--archive", "a=" + manifest}
	out, err := doctorRun(t, append(base, "--keys-file", keysFile, "--tls-cert", goodCrt, "--tls-key", goodKey, "--index-cache", cacheDir)...)
	if err != nil {
		t.Fatalf("doctor on a good deployment: %v\n%s", err, out)
	}
	wantLine(t, out, "ok", "config", "valid")
	wantLine(t, out, "ok", "keys", "1 keys (keys file")
	wantLine(t, out, "ok", "tls", "valid until")
	wantLine(t, out, "ok", "store", "file://")
	wantLine(t, out, "ok", "credentials", "bucket src can be listed")
	wantLine(t, out, "ok", "manifest", "archive a ")
	wantLine(t, out, "ok", "range+if-match", "stale If-Match refused")
	wantLine(t, out, "skip", "restore", "no storage classes")
	wantLine(t, out, "ok", "index-cache", "is writable")
	if !strings.Contains(out, "none failed") {
		t.Errorf("no summary line:\n%s", out)
	}

	for _, tc := range []struct {
		name   string
		args   []string
		check  string
		detail string
	}{
		{"bad keys file", append(base, "--keys-file", badKeys), "keys", "bad.yaml"},
		{"invalid config", []string{"--anonymous", "--store", "file://" + dir}, "config", "at least one --archive"},
		{"no keys, not anonymous", base, "keys", "nobody could read"},
		{"expired certificate", append(base, "--anonymous", "--tls-cert", oldCrt, "--tls-key", oldKey), "tls", "expired"},
		{"certificate without its key", append(base, "--anonymous", "--tls-cert", goodCrt, "--tls-key", oldKey), "tls", "good.crt"},
		{"missing store", []string{"--anonymous", "--store", "file://" + filepath.Join(dir, "none"), "--archive", "a=" + manifest}, "store", "none"},
		{"missing bucket", []string{"--anonymous", "--store", "file://" + dir, "--archive", "a=s3://nobucket/m.json"}, "credentials", "bucket nobucket"},
		{"missing manifest", []string{"--anonymous", "--store", "file://" + dir, "--archive", "a=s3://src/p/none.json"}, "manifest", "archive a"},
		{"index cache not a directory", append(base, "--anonymous", "--index-cache", notADir), "index-cache", "not writable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := doctorRun(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), "checks failed") {
				t.Fatalf("doctor: %v, want a failure\n%s", err, out)
			}
			wantLine(t, out, "FAIL", tc.check, tc.detail)
		})
	}
}

// TestDoctorS3 checks the S3-only probes against gofakes3: credentials a
// server refuses with its own code, RestoreObject implemented (behind the
// Glacier model) or not (gofakes3 answers 405: fine without
// --allow-restore, a failure with it), and an s3:// index cache.
func TestDoctorS3(t *testing.T) {
	mem := s3mem.New()
	mem.CreateBucket("src")
	var h http.Handler = gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	glacier := faults.NewGlacier(faults.GlacierConfig{}).HTTP(h)
	refuse := false
	withRestores := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case refuse:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>XAdminUserNotFound</Code><Message>The user does not exist</Message><RequestId>r</RequestId></Error>`))
		case withRestores:
			glacier.ServeHTTP(w, r)
		default:
			h.ServeHTTP(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	s3flags := []string{"--store", "s3://", "--s3-endpoint", srv.URL, "--s3-path-style", "--s3-region", "us-east-1"}
	dir := t.TempDir()
	manifest, res := packDir(t, dir, map[string][]byte{"a.txt": []byte("doctor\n")}, time.Unix(1700000000, 0),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1"})
	for _, k := range res.ObjectKeys {
		putFile(t, mem, dir, k)
	}
	putFile(t, mem, dir, res.ManifestKey)
	secret := filepath.Join(t.TempDir(), "index-secret")
	if err := os.WriteFile(secret, []byte("doctor-test-secret-0123456789abcdef0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{}, s3flags...), "--anonymous", "--archive", "a="+manifest,
		"--index-cache", "s3://src/wharf-index/", "--index-cache-secret-file", secret)

	out, err := doctorRun(t, args...)
	if err != nil {
		t.Fatalf("doctor over gofakes3: %v\n%s", err, out)
	}
	wantLine(t, out, "ok", "credentials", "bucket src")
	wantLine(t, out, "skip", "restore", "does not implement RestoreObject")
	wantLine(t, out, "ok", "index-cache", "s3://src/wharf-index/")

	keyed := append(append([]string{}, args...), "--allow-restore", "--access-key", "AKIAWHARF", "--secret-key", "wharf-secret")
	out, err = doctorRun(t, keyed...)
	if err == nil {
		t.Fatalf("doctor --allow-restore over a store without restores passed\n%s", out)
	}
	wantLine(t, out, "FAIL", "restore", "MethodNotAllowed")

	withRestores = true
	out, err = doctorRun(t, keyed...)
	if err != nil {
		t.Fatalf("doctor --allow-restore over the Glacier model: %v\n%s", err, out)
	}
	wantLine(t, out, "ok", "restore", "implements RestoreObject")
	withRestores = false

	refuse = true
	out, err = doctorRun(t, args...)
	if err == nil {
		t.Fatalf("doctor with refused credentials passed\n%s", out)
	}
	wantLine(t, out, "FAIL", "credentials", "XAdminUserNotFound")
	wantLine(t, out, "skip", "restore", "could not probe RestoreObject")
	wantLine(t, out, "FAIL", "index-cache", "XAdminUserNotFound")
	if strings.Contains(out, "not found (check the URL") {
		t.Errorf("refused credentials reported as a missing manifest:\n%s", out)
	}
}

func putFile(t *testing.T, mem *s3mem.Backend, dir, key string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "src", filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.PutObject("src", key, map[string]string{}, bytes.NewReader(b), int64(len(b)), nil); err != nil {
		t.Fatal(err)
	}
}

// TestServeAllowRestoreProbe: serve --allow-restore over a store that does
// not implement RestoreObject (gofakes3 answers 405) starts and says so in
// its log; over one that does (the Glacier model on the wire) it logs
// that it does.
func TestServeAllowRestoreProbe(t *testing.T) {
	for _, withRestores := range []bool{false, true} {
		l := newLakeFake(t)
		res := l.pack(t, nil, map[string][]byte{"a.txt": []byte("probe\n")}, cargopack.Options{Prefix: "p", UploadID: "u1"})
		cfg := defaultServeConfig()
		cfg.Listen, cfg.StoreURL, cfg.S3 = "127.0.0.1:0", "s3://", l.s3Config()
		if withRestores {
			gl := httptest.NewServer(faults.NewGlacier(faults.GlacierConfig{}).HTTP(reverseTo(t, l.url)))
			t.Cleanup(gl.Close)
			cfg.S3.Endpoint = gl.URL
		}
		cfg.AllowRestore, cfg.AccessKey, cfg.SecretKey = true, "AKIAWHARF", "wharf-secret"
		cfg.Archives = []serveArchive{{Name: "data", ManifestURL: "s3://lake/" + res.ManifestKey}}
		_, _, logs, stop := startServe(t, cfg)
		stop()
		want := "the store does not implement RestoreObject; restores through wharf answer 501 NotImplemented"
		if withRestores {
			want = "the store implements RestoreObject"
		}
		if !strings.Contains(logs.String(), want) {
			t.Errorf("restores %v: the log does not say %q:\n%s", withRestores, want, logs.String())
		}
	}
}

// reverseTo forwards to the server at url (keeping the Host header).
func reverseTo(t *testing.T, target string) http.Handler {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	return &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host }}
}

// TestDoctorIndexCacheConditionalPut: doctor runs the shared index cache's
// start-up probe, so a store that ignores If-None-Match: * (gofakes3 behind
// faults.IgnorePutConditions) fails the index-cache check (and doctor), and
// the same server enforcing the conditions passes it. (No archive is
// configured, so doctor's config check fails in both: only the
// index-cache line is compared.)
func TestDoctorIndexCacheConditionalPut(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	secret := testIndexSecretFile(t)
	for _, tc := range []struct {
		name   string
		wrap   func(http.Handler) http.Handler
		status string
		detail string
	}{
		{"enforced", nil, "ok", "conditional PUTs enforced"},
		{"ignored", faults.IgnorePutConditions, "FAIL", "does not enforce conditional PUTs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := testS3(t, tc.wrap)
			out, err := doctorRun(t, "--store", "s3://", "--s3-endpoint", url, "--s3-path-style", "--s3-region", "us-east-1",
				"--anonymous", "--index-cache", "s3://bkt/idx/", "--index-cache-secret-file", secret)
			wantLine(t, out, tc.status, "index-cache", tc.detail)
			if tc.status == "FAIL" && err == nil {
				t.Errorf("doctor passed with the index-cache check failing\n%s", out)
			}
		})
	}
}
