package main

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"
)

// TestStoreFlagsKeyPair: the S3 key flags of ls, get, inspect, verify and
// index build come as a pair; one alone is refused before the store is
// opened (a lone access key signed with an empty secret, a lone secret
// was ignored).
func TestStoreFlagsKeyPair(t *testing.T) {
	for _, args := range [][]string{
		{"--s3-access-key", "AK"},
		{"--s3-secret-key", "SK"},
	} {
		fs := flag.NewFlagSet("ls", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		sf := addStoreFlags(fs)
		if err := fs.Parse(append([]string{"--store", "file://" + t.TempDir()}, args...)); err != nil {
			t.Fatal(err)
		}
		_, err := sf.openTarget(context.Background(), "s3://bkt/pre/uploads/u/manifest.json.gz")
		if err == nil || !strings.Contains(err.Error(), "--s3-access-key and --s3-secret-key must be given together") {
			t.Errorf("%q: error %v, want the key pair refusal", args, err)
		}
	}
}
