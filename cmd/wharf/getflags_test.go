package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGetOutputRefusals: get's -o is a local directory: a URL, also one
// with a slash missing (which MkdirAll would have made a local "s3:"
// directory of), or an existing
// file is refused before the archive is opened, naming -o.
func TestGetOutputRefusals(t *testing.T) {
	store := t.TempDir()
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	wd := t.TempDir()
	t.Chdir(wd)
	for _, tc := range []struct {
		out, want string
	}{
		{"s3://bkt/restore", `-o "s3://bkt/restore": a URL`},
		{"s3:/bkt/restore", `-o "s3:/bkt/restore": a URL`},
		{"https:/host/x", `-o "https:/host/x": a URL`},
		{file, "-o " + file + ": not a directory"},
	} {
		var stdout, stderr bytes.Buffer
		err := getCmd(context.Background(), []string{"--store", "file://" + store, "-q", "-o", tc.out, "s3://bkt/pre/uploads/u/manifest.json.gz", "a.txt"}, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("-o %s: error %v, want one naming %q", tc.out, err, tc.want)
		}
	}
	if ents, _ := os.ReadDir(wd); len(ents) != 0 {
		t.Errorf("get made %d entries in the working directory", len(ents))
	}
}
