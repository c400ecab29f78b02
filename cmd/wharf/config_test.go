package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
)

// fullConfigYAML sets every option the config file knows.
const fullConfigYAML = `
listen: 0.0.0.0:9000
admin_listen: 0.0.0.0:9001
store: s3://
s3:
  endpoint: http://minio:9000
  region: eu-west-1
  path_style: true
archives:
  - name: photos
    manifest: s3://lake/photos/uploads/20260101-aaaa/manifest.json.gz
discover:
  - s3://lake/datasets
  - s3://other
aliases:
  - name: photos-latest
    target: s3://lake/photos@latest
rescan: 10m
retire_grace: 30s
anonymous: true
keys:
  - access_key: AK1
    secret_key: SK1
    buckets: [photos]
keys_file: KEYS_FILE
cache_bytes: 2GiB
index_cache_dir: /var/cache/wharf
virtual_host_base: s3.example.org
region: eu-central-1
log_format: console
shutdown_timeout: 45s
`

// fullConfigFlags says the same as fullConfigYAML, except keys (a flag
// cannot hold per-bucket grants; the flag form is --keys-file).
var fullConfigFlags = []string{
	"--listen", "0.0.0.0:9000", "--admin-listen", "0.0.0.0:9001", "--store", "s3://",
	"--s3-endpoint", "http://minio:9000", "--s3-region", "eu-west-1", "--s3-path-style",
	"--archive", "photos=s3://lake/photos/uploads/20260101-aaaa/manifest.json.gz",
	"--discover", "s3://lake/datasets", "--discover", "s3://other",
	"--alias", "photos-latest=s3://lake/photos@latest",
	"--rescan", "10m", "--retire-grace", "30s", "--anonymous", "--keys-file", "KEYS_FILE",
	"--cache-bytes", "2GiB", "--index-cache", "/var/cache/wharf", "--virtual-host-base", "s3.example.org",
	"--region", "eu-central-1", "--log-format", "console", "--shutdown-timeout", "45s",
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigRoundTrip(t *testing.T) {
	keysFile := writeFile(t, "keys.yaml", "keys:\n  - access_key: AK2\n    secret_key: SK2\n")
	cfgFile := writeFile(t, "wharf.yaml", strings.ReplaceAll(fullConfigYAML, "KEYS_FILE", keysFile))
	fromFile, check, err := parseServeArgs([]string{"--config", cfgFile})
	if err != nil || check {
		t.Fatalf("parse config: %v %v", err, check)
	}
	args := append([]string(nil), fullConfigFlags...)
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], "KEYS_FILE", keysFile)
	}
	fromFlags, _, err := parseServeArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	fromFlags.Keys = []auth.Key{{AccessKey: "AK1", SecretKey: "SK1", Buckets: []string{"photos"}}}
	if !reflect.DeepEqual(fromFile, fromFlags) {
		t.Errorf("config file and flags differ:\nfile  %+v\nflags %+v", fromFile, fromFlags)
	}
	want := serveConfig{
		Listen: "0.0.0.0:9000", AdminListen: "0.0.0.0:9001", StoreURL: "s3://",
		S3:       backend.S3Config{Endpoint: "http://minio:9000", Region: "eu-west-1", PathStyle: true},
		Archives: []serveArchive{{Name: "photos", ManifestURL: "s3://lake/photos/uploads/20260101-aaaa/manifest.json.gz"}},
		Discover: []string{"s3://lake/datasets", "s3://other"},
		Aliases:  []serveAlias{{Name: "photos-latest", Target: "s3://lake/photos@latest"}},
		Rescan:   10 * time.Minute, RetireGrace: 30 * time.Second, Anonymous: true,
		Keys:     []auth.Key{{AccessKey: "AK1", SecretKey: "SK1", Buckets: []string{"photos"}}},
		KeysFile: keysFile, CacheBytes: 2 << 30, IndexCacheDir: "/var/cache/wharf", VirtualHostBase: "s3.example.org",
		Region: "eu-central-1", LogFormat: "console", ShutdownTimeout: 45 * time.Second, LogOut: os.Stderr,
	}
	if !reflect.DeepEqual(fromFile, want) {
		t.Errorf("config file:\n got %+v\nwant %+v", fromFile, want)
	}
	keys, err := fromFile.checkConfig()
	if err != nil || len(keys) != 2 {
		t.Errorf("checkConfig: %v, %d keys", err, len(keys))
	}

	// Flags override the file; a repeatable flag replaces the file's list.
	over, _, err := parseServeArgs([]string{"--listen", "127.0.0.1:1", "--config", cfgFile,
		"--discover", "s3://x/y", "--cache-bytes", "1MiB", "--anonymous=false"})
	if err != nil {
		t.Fatal(err)
	}
	if over.Listen != "127.0.0.1:1" || !reflect.DeepEqual(over.Discover, []string{"s3://x/y"}) || over.CacheBytes != 1<<20 ||
		over.Anonymous || over.AdminListen != "0.0.0.0:9001" || len(over.Archives) != 1 || over.Rescan != 10*time.Minute {
		t.Errorf("flags over config: %+v", over)
	}
	// Defaults without a file.
	def, _, err := parseServeArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(def, defaultServeConfig()) {
		t.Errorf("defaults %+v", def)
	}
}

func TestCheckConfig(t *testing.T) {
	t.Setenv("WHARF_ACCESS_KEY", "")
	t.Setenv("WHARF_SECRET_KEY", "")
	good := writeFile(t, "good.yaml", "store: s3://\ndiscover: [s3://lake/base]\nlisten: 0.0.0.0:9000\nkeys:\n  - {access_key: AK, secret_key: SK}\n")
	if code := run([]string{"serve", "--config", good, "--check-config"}); code != 0 {
		t.Errorf("--check-config on a good config exited %d", code)
	}
	for _, tc := range []struct {
		name, yaml string
		args       []string
		want       string
	}{
		{"unknown option", "store: s3://\ndiscover: [s3://a/b]\ncache_byte: 1\n", nil, "cache_byte"},
		{"bad size", "store: s3://\ndiscover: [s3://a/b]\ncache_bytes: lots\n", nil, "lots"},
		{"bad duration", "store: s3://\ndiscover: [s3://a/b]\nrescan: soon\n", nil, "soon"},
		{"alias without @latest", "store: s3://\naliases: [{name: x, target: s3://a/b}]\n", nil, "@latest"},
		{"bad discover", "store: s3://\ndiscover: [http://a/b]\n", nil, "http://a/b"},
		{"no store", "discover: [s3://a/b]\n", nil, "--store"},
		{"nothing served", "store: s3://\n", nil, "--discover"},
		{"open without keys", "store: s3://\ndiscover: [s3://a/b]\nlisten: 0.0.0.0:9000\n", nil, "refusing to listen"},
		{"missing keys file", "store: s3://\ndiscover: [s3://a/b]\nkeys_file: /nonexistent/keys.yaml\n", nil, "/nonexistent/keys.yaml"},
		{"bad key", "store: s3://\ndiscover: [s3://a/b]\nkeys: [{access_key: 'a b', secret_key: s}]\n", nil, "a b"},
		{"alias name twice", "store: s3://\narchives: [{name: x, manifest: s3://a/b/uploads/u/manifest.json.gz}]\naliases: [{name: x, target: s3://a/b@latest}]\n", nil, "twice"},
		{"bad log format", "store: s3://\ndiscover: [s3://a/b]\nlog_format: xml\n", nil, "xml"},
		{"bad listen", "store: s3://\ndiscover: [s3://a/b]\nadmin_listen: nocolon\n", nil, "nocolon"},
		{"flag error", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--alias", "noequals"}, "noequals"},
		{"missing config", "", []string{"--config", "/nonexistent/wharf.yaml"}, "/nonexistent/wharf.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--config", writeFile(t, "c.yaml", tc.yaml), "--check-config"}
			args = append(args, tc.args...)
			cfg, check, err := parseServeArgs(args)
			if err == nil {
				if !check {
					t.Fatal("--check-config not seen")
				}
				_, err = cfg.checkConfig()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
			if code := run(append([]string{"serve"}, args...)); code == 0 {
				t.Error("wharf serve --check-config exited 0")
			}
		})
	}
}
