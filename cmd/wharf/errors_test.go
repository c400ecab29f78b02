package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// lastLine is the last non-empty line of a command's stderr (serve logs
// JSON lines before its error).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestErrorTexts asserts the whole message a user sees for the common
// failures: each fact once (which archive, which object, what happened,
// what to check), through the real command, over a file store and S3.
func TestErrorTexts(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "perf"), 0o755)
	files := map[string][]byte{"a.txt": []byte(strings.Repeat("a", 5000)), "b/c.txt": []byte("ccc\n")}
	opt := cargopack.Options{Bucket: "perf", Prefix: "p", UploadID: "u-err", FrameSize: 4096}
	url, res := packDir(t, dir, files, time.Unix(1700000000, 0), opt)

	// A truncated manifest, one that is not JSON, and a symlink leading out
	// of the bucket.
	whole, err := os.ReadFile(filepath.Join(dir, "perf", filepath.FromSlash(res.ManifestKey)))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "perf", "cut", "uploads", "u-cut"), 0o755)
	os.WriteFile(filepath.Join(dir, "perf", "cut", "uploads", "u-cut", "manifest.json.gz"), whole[:len(whole)/2], 0o644)
	os.MkdirAll(filepath.Join(dir, "perf", "junk", "uploads", "u-junk"), 0o755)
	os.WriteFile(filepath.Join(dir, "perf", "junk", "uploads", "u-junk", "manifest.json"), []byte("this is not a manifest\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "perf", "esc", "uploads", "u-esc"), 0o755)
	os.WriteFile(filepath.Join(dir, "secret.json"), []byte("{}"), 0o644)
	os.Symlink(filepath.Join(dir, "secret.json"), filepath.Join(dir, "perf", "esc", "uploads", "u-esc", "manifest.json"))

	// The same archive in S3, with a denied manifest and a missing chunk.
	srv := newSlowS3(t, "perf")
	srv.pack(t, files, opt) // the denied keys sit beside a real archive
	srv.denyObject("perf", "denied/manifest.json.gz", "AccessDenied", "Access Denied")
	srv.denyObject("perf", "badsig/manifest.json.gz", "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided.")
	s3Missing := newSlowS3(t, "perf")
	s3MissingURL := s3Missing.pack(t, files, opt)

	fileStore := []string{"--store", "file://" + dir}
	// serve takes S3 credentials from the environment (AWS credential chain).
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	s3Serve := []string{"--store", "s3://", "--s3-endpoint", srv.url, "--s3-path-style", "--s3-region", "us-east-1"}
	serve := func(store []string, archive string) []string {
		return append(append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "", "--anonymous"}, store...), "--archive", archive)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"missing manifest, file store, serve", serve(fileStore, "bad=s3://perf/nope/manifest.json.gz"),
			`wharf serve: archive "bad": manifest s3://perf/nope/manifest.json.gz not found (check the URL and that the upload finished)`},
		{"missing manifest, file store, inspect", append([]string{"inspect"}, append(fileStore, "s3://perf/p/uploads/u-gone/manifest.json.gz")...),
			`wharf inspect: archive "u-gone": manifest s3://perf/p/uploads/u-gone/manifest.json.gz not found (check the URL and that the upload finished)`},
		{"missing bucket, file store", append([]string{"inspect"}, append(fileStore, "s3://nobucket/x/manifest.json.gz")...),
			`wharf inspect: manifest s3://nobucket/x/manifest.json.gz not found: no bucket directory ` + dir + `/nobucket (check the URL and that the upload finished)`},
		{"missing manifest, s3, serve", serve(s3Serve, "bad=s3://perf/nope/manifest.json.gz"),
			`wharf serve: archive "bad": manifest s3://perf/nope/manifest.json.gz not found (check the URL and that the upload finished)`},
		{"missing bucket, s3", append([]string{"inspect"}, append(srv.flags(), "s3://nobucket/x/manifest.json.gz")...),
			`wharf inspect: manifest s3://nobucket/x/manifest.json.gz not found: no such bucket (check the URL and that the upload finished)`},
		{"access denied, s3", serve(s3Serve, "locked=s3://perf/denied/manifest.json.gz"),
			`wharf serve: archive "locked": manifest s3://perf/denied/manifest.json.gz: access denied (check the store credentials and the bucket policy, or a file store's permissions)`},
		{"access denied with a reason, s3", append([]string{"verify"}, append(srv.flags(), "s3://perf/badsig/manifest.json.gz")...),
			`wharf verify: manifest s3://perf/badsig/manifest.json.gz: access denied: SignatureDoesNotMatch: The request signature we calculated does not match the signature you provided. (check the store credentials and the bucket policy, or a file store's permissions)`},
		{"access denied, file store (symlink out of the bucket)", append([]string{"ls"}, append(fileStore, "s3://perf/esc/uploads/u-esc/manifest.json")...),
			`wharf ls: archive "u-esc": manifest s3://perf/esc/uploads/u-esc/manifest.json: access denied: path escapes from parent (check the store credentials and the bucket policy, or a file store's permissions)`},
		{"truncated manifest", append([]string{"get"}, append(fileStore, "s3://perf/cut/uploads/u-cut/manifest.json.gz", "a.txt", "-o", t.TempDir())...),
			`wharf get: archive "u-cut": manifest s3://perf/cut/uploads/u-cut/manifest.json.gz is not a valid manifest: decoding JSON: truncated or corrupt: unexpected EOF (check that the URL names the manifest of a finished CargoShip upload)`},
		{"not a manifest", append([]string{"inspect"}, append(fileStore, "s3://perf/junk/uploads/u-junk/manifest.json")...),
			`wharf inspect: archive "u-junk": manifest s3://perf/junk/uploads/u-junk/manifest.json is not a valid manifest: decoding JSON: JSON error at byte 0: want object, have bool (check that the URL names the manifest of a finished CargoShip upload)`},
		{"store unreachable", []string{"inspect", "--store", "s3://", "--s3-endpoint", "http://127.0.0.1:1", "--s3-region", "us-east-1", "--s3-access-key", "a", "--s3-secret-key", "b", "s3://perf/x/manifest.json.gz"},
			`wharf inspect: manifest s3://perf/x/manifest.json.gz: store unavailable: gave up after 5 attempts: dial tcp 127.0.0.1:1: connect: connection refused (check the S3 endpoint and the network, then try again)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := runWharf(t, c.args...)
			if code == 0 {
				t.Fatalf("exit 0:\n%s", stderr)
			}
			if got := lastLine(stderr); got != c.want {
				t.Errorf("message:\n got %s\nwant %s", got, c.want)
			}
		})
	}

	// A chunk missing at read time (get names each failed file).
	chunk := res.ObjectKeys[0]
	if err := os.Remove(filepath.Join(dir, "perf", filepath.FromSlash(chunk))); err != nil {
		t.Fatal(err)
	}
	if _, err := s3Missing.client.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String("perf"), Key: aws.String(chunk)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		store []string
		url   string
	}{{"file store", fileStore, url}, {"s3", s3Missing.flags(), s3MissingURL}} {
		t.Run("missing chunk, "+c.name, func(t *testing.T) {
			_, stderr, code := runWharf(t, append(append([]string{"get", "-q"}, c.store...), c.url, "a.txt", "-o", t.TempDir())...)
			want := `wharf get: failed: archive u-err: key a.txt: chunk s3://perf/` + chunk +
				` not found (check that the upload finished and its chunk objects were not deleted or moved)`
			if code != 1 || !strings.Contains(stderr, want+"\n") {
				t.Errorf("exit %d; stderr lacks\n%s\n%s", code, want, stderr)
			}
		})
	}
}
