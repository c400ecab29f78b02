package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGetAndLsWithoutServer runs `wharf ls` and `wharf get` straight
// against the S3 backend (no server) for every archive shape of the suite
// and the incremental chain: ls --recursive --json lists exactly the
// source tree, get extracts it byte for byte, and a second get resumes
// (writes nothing). On the chain, ls --versions shows the older version
// and the delete marker.
func TestGetAndLsWithoutServer(t *testing.T) {
	store := []string{"--store", "s3://", "--s3-endpoint", suite.s3url, "--s3-path-style", "--s3-region", "us-east-1"}
	env := suite.serverEnv()
	for _, name := range suite.bucketNames() {
		a := suite.archives[name]
		t.Run(name, func(t *testing.T) {
			out := run(t, env, "", suite.bin, append(append([]string{"ls", "--recursive", "--json"}, store...), a.manifestURL)...)
			got := map[string]int64{}
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				var e struct {
					Key  string
					Size int64
				}
				if err := json.Unmarshal([]byte(l), &e); err != nil {
					t.Fatalf("ls --json line %q: %v", l, err)
				}
				got[e.Key] = e.Size
			}
			if len(got) != len(a.keys) {
				t.Fatalf("ls lists %d keys, the source has %d", len(got), len(a.keys))
			}
			for k, n := range a.keys {
				if got[k] != n {
					t.Fatalf("ls: %s has size %d, want %d", k, got[k], n)
				}
			}

			dir := t.TempDir()
			args := append(append([]string{"get", "--quiet"}, store...), a.manifestURL, "/", "-o", dir)
			_, stderr, err := runErr(env, "", suite.bin, args...)
			if err != nil {
				t.Fatalf("get: %v\n%s", err, stderr)
			}
			for k := range a.keys {
				want, _ := os.ReadFile(filepath.Join(a.dir, filepath.FromSlash(k)))
				have, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(k)))
				if err != nil || !bytes.Equal(have, want) {
					t.Fatalf("get: %s differs from the source (%v)", k, err)
				}
			}
			_, stderr, err = runErr(env, "", suite.bin, args...)
			if err != nil || !strings.Contains(stderr, "0 files written (0 B)") {
				t.Fatalf("second get did not resume: %v\n%s", err, stderr)
			}
			t.Logf("%s: ls and get of %d files match the source; the second get wrote nothing", name, len(a.keys))
		})
	}
	t.Run("inc versions", func(t *testing.T) {
		out := run(t, env, "", suite.bin, append(append([]string{"ls", "--versions", "--recursive"}, store...), suite.archives["inc"].manifestURL)...)
		for _, want := range []string{" DELETED up-inc-2 * gone.txt", " up-inc-1   gone.txt", " up-inc-2 * change.txt", " up-inc-1   change.txt", " up-inc-1 * keep.txt"} {
			if !strings.Contains(out, want+"\n") {
				t.Errorf("ls --versions lacks %q:\n%s", want, out)
			}
		}
	})
}
