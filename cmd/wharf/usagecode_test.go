package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageExitStatus: every client subcommand exits 2 for bad usage (a
// missing or extra argument, a flag out of range, flags that go together
// given alone), as wharf's usage says, so a script can tell a mistake in
// its command line (never worth a retry) from a failure (status 1); and
// it refuses before touching the store.
func TestUsageExitStatus(t *testing.T) {
	dir := t.TempDir()
	store := "file://" + dir
	src := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	const u = "s3://bkt/p/uploads/u/manifest.json.gz"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "--store", store}, "want exactly one MANIFEST_URL"},
		{[]string{"verify", "--store", store, u, u}, "want exactly one MANIFEST_URL"},
		{[]string{"verify", "--store", store, "--progress-interval", "0s", u}, "--progress-interval"},
		{[]string{"verify", "--store", store, "--no-such-flag", u}, "no-such-flag"},
		{[]string{"restore", "--store", store, u}, "--days 0"},
		{[]string{"restore", "--store", store, "--days", "1", "--tier", "Foo", u}, `--tier "Foo"`},
		{[]string{"restore", "--store", store, "--days", "1"}, "want exactly one MANIFEST_URL"},
		{[]string{"index"}, "missing index command"},
		{[]string{"index", "frob"}, "unknown index command"},
		{[]string{"index", "show"}, "want exactly one FILE"},
		{[]string{"index", "build", "--store", store, u}, "-o FILE is required"},
		{[]string{"index", "build", "--store", store, "-o", filepath.Join(dir, "x")}, "want exactly one MANIFEST_URL"},
		{[]string{"index", "build", "--store", store, u, "-o", "gs://b/idx"}, "-o:"},
		{[]string{"index", "build", "--store", store, u, "-o", dir}, "not a regular file"},
		{[]string{"pack", "--store", store, "--bucket", "b"}, "want exactly one DIR"},
		{[]string{"pack", src, "--store", store}, "--store and --bucket are required"},
		{[]string{"pack", src, "--store", store, "--bucket", "b", "--shards", "0"}, "--shards 0"},
		{[]string{"pack", src, "--store", store, "--bucket", "b", "--frame-size", "lots"}, "--frame-size"},
		{[]string{"demo", "--listen", "nocolon"}, "--listen"},
		{[]string{"demo", "--frame-size", "-1"}, "--frame-size -1"},
		{[]string{"demo", "extra"}, `unexpected argument "extra"`},
		{[]string{"ls", "--store", store, "--s3-access-key", "AK", u}, "--s3-access-key and --s3-secret-key must be given together"},
		{[]string{"get", "--store", store, "--s3-secret-key", "SK", u, "a", "-o", filepath.Join(dir, "out")}, "must be given together"},
		{[]string{"ls", "--store", store, "s3://bkt"}, "want s3://BUCKET/KEY"},
		{[]string{"inspect", "--store", store, "s3://bkt/"}, "want s3://BUCKET/KEY"},
		{[]string{"verify", "--store", store, "gs://b/k"}, `scheme "gs" not supported`},
		{[]string{"get", "--store", store, filepath.Join(dir, "bkt/p/uploads/u/manifest.json.gz"), "a", "-o", filepath.Join(dir, "out")},
			"a local path; give the manifest's s3://BUCKET/KEY (a file store's objects are under --store file://DIR)"},
		{[]string{"restore", "--store", store, "--days", "1", "./manifest.json.gz"}, "a local path"},
		{[]string{"index", "build", "--store", store, "s3://bkt", "-o", filepath.Join(dir, "x")}, "want s3://BUCKET/KEY"},
	} {
		_, stderr, code := runWharf(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("wharf %s: exit %d, stderr %q; want exit 2 and an error naming %q", strings.Join(tc.args, " "), code, lastLine(stderr), tc.want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a refused command wrote %d entries into the store", len(ents))
	}
}
