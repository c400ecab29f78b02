package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchModelFlag: "wharf bench --model" refuses a model it does not
// know before any work, defaults to the HTTP path, and with two models
// names both in the report.
func TestBenchModelFlag(t *testing.T) {
	none := []string{"--files", "0", "--list-keys", "0", "--large-size", "0", "--cold-files", "0", "--shapes-size", "0", "--fleet-replicas", "0"}
	for _, bad := range []string{"gofakes3", "http,", "http,http"} {
		err := runBench(context.Background(), append([]string{"--model", bad, "--out", t.TempDir()}, none...))
		if err == nil || !strings.Contains(err.Error(), "S3 model") {
			t.Errorf("--model %q: %v, want an S3 model error", bad, err)
		}
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"wharf's backend: http: wharf reads through backend.S3Store"}},
		{[]string{"--model", "inprocess, http"}, []string{"wharf's backend: inprocess: ", "; and http: "}},
	} {
		out := t.TempDir()
		if err := runBench(context.Background(), append(append([]string{"--out", out}, c.args...), none...)); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		b, err := os.ReadFile(filepath.Join(out, "report.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%v: report.md lacks %q:\n%s", c.args, w, b)
			}
		}
	}
}
