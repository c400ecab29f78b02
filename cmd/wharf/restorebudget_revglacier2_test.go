package main

import (
	"io"
	"strings"
	"testing"
)

// TestRestoreBudgetRefused: --max-restore-bytes-per-key is validated at
// start: without --allow-restore (it would do nothing), below 1MiB (a
// single chunk would not fit) or above 1PiB, serve refuses to start,
// naming the flag.
func TestRestoreBudgetRefused(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("x")})
	for _, tc := range []struct {
		name  string
		allow bool
		bytes int64
	}{
		{"without --allow-restore", false, 1 << 30},
		{"below 1MiB", true, 1 << 10},
		{"above 1PiB", true, 2 << 50},
		{"negative", true, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := serveConfig{Listen: "127.0.0.1:0", StoreURL: store, AccessKey: "AKIDTEST", SecretKey: "secretsecretsecret", CacheBytes: 1 << 20,
				Archives: []serveArchive{{Name: "data", ManifestURL: man}}, AllowRestore: tc.allow,
				MaxRestoreBytesPerKey: tc.bytes, LogOut: io.Discard}
			cfg.Ready = func(string, string) { t.Error("serve started listening") }
			err := serve(t.Context(), cfg)
			if err == nil || !strings.Contains(err.Error(), "--max-restore-bytes-per-key") {
				t.Errorf("%v, want a refusal naming --max-restore-bytes-per-key", err)
			}
		})
	}
}
