package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

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
open_concurrency: 64
wait_open: true
open_wait: 3s
anonymous: true
keys:
  - access_key: AK1
    secret_key: SK1
    buckets: [photos]
    restore: [photos]
keys_file: KEYS_FILE
cache_bytes: 2GiB
index_cache_dir: INDEX_DIR
virtual_host_base: s3.example.org
region: eu-central-1
log_format: console
shutdown_timeout: 45s
max_inflight_per_key: 8
read_header_timeout: 5s
read_timeout: 30s
idle_timeout: 90s
max_header_bytes: 32KiB
send_timeout: 45s
read_memory: 4GiB
part_size: 16MiB
stream_parts: 12
max_parts: 96
trust_unframed: true
allow_key_prefixes: [shared/chunks/, legacy/]
max_frame_bytes: 32MiB
tls_cert: TLS_CERT
tls_key: TLS_KEY
admin_tls_cert: ADMIN_CERT
admin_tls_key: ADMIN_KEY
tls_reload_interval: 2s
cors_allow_origins:
  - https://viewer.example.org
  - http://localhost:8080
cors_max_age: 1h
allow_restore: true
restore_status_ttl: 30s
open_timeout: 90s
index_memory: 2GiB
max_files_per_upload: 2000000
dataset_history: 25
`

// fullConfigFlags says the same as fullConfigYAML, except keys (a flag
// cannot hold per-bucket grants; the flag form is --keys-file).
var fullConfigFlags = []string{
	"--listen", "0.0.0.0:9000", "--admin-listen", "0.0.0.0:9001", "--store", "s3://",
	"--s3-endpoint", "http://minio:9000", "--s3-region", "eu-west-1", "--s3-path-style",
	"--archive", "photos=s3://lake/photos/uploads/20260101-aaaa/manifest.json.gz",
	"--discover", "s3://lake/datasets", "--discover", "s3://other",
	"--alias", "photos-latest=s3://lake/photos@latest",
	"--rescan", "10m", "--retire-grace", "30s", "--open-concurrency", "64", "--wait-open", "--open-wait", "3s", "--anonymous", "--keys-file", "KEYS_FILE",
	"--cache-bytes", "2GiB", "--index-cache", "INDEX_DIR", "--virtual-host-base", "s3.example.org",
	"--region", "eu-central-1", "--log-format", "console", "--shutdown-timeout", "45s",
	"--max-inflight-per-key", "8", "--read-header-timeout", "5s", "--read-timeout", "30s", "--idle-timeout", "90s",
	"--max-header-bytes", "32KiB", "--send-timeout", "45s",
	"--read-memory", "4GiB", "--part-size", "16MiB", "--stream-parts", "12", "--max-parts", "96",
	"--trust-unframed", "--allow-key-prefix", "shared/chunks/", "--allow-key-prefix", "legacy/", "--max-frame-bytes", "32MiB",
	"--tls-cert", "TLS_CERT", "--tls-key", "TLS_KEY", "--admin-tls-cert", "ADMIN_CERT", "--admin-tls-key", "ADMIN_KEY",
	"--tls-reload-interval", "2s", "--cors-allow-origin", "https://viewer.example.org", "--cors-allow-origin", "http://localhost:8080",
	"--cors-max-age", "1h",
	"--allow-restore", "--restore-status-ttl", "30s",
	"--open-timeout", "90s", "--index-memory", "2GiB", "--max-files-per-upload", "2000000", "--dataset-history", "25",
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
	indexDir := t.TempDir()
	pki := newTestPKI(t)
	tlsCert, tlsKey := pki.pair(t, "s3", validNow)
	adminCert, adminKey := pki.pair(t, "admin", validNow)
	fill := strings.NewReplacer("KEYS_FILE", keysFile, "INDEX_DIR", indexDir, "TLS_CERT", tlsCert, "TLS_KEY", tlsKey,
		"ADMIN_CERT", adminCert, "ADMIN_KEY", adminKey)
	cfgFile := writeFile(t, "wharf.yaml", fill.Replace(fullConfigYAML))
	fromFile, check, err := parseServeArgs([]string{"--config", cfgFile})
	if err != nil || check {
		t.Fatalf("parse config: %v %v", err, check)
	}
	args := append([]string(nil), fullConfigFlags...)
	for i := range args {
		args[i] = fill.Replace(args[i])
	}
	fromFlags, _, err := parseServeArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	fromFlags.Keys = []auth.Key{{AccessKey: "AK1", SecretKey: "SK1", Buckets: []string{"photos"}, Restore: auth.RestoreGrant{Buckets: []string{"photos"}}}}
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
		OpenConcurrency: 64, WaitOpen: true, OpenWait: 3 * time.Second,
		Keys:     []auth.Key{{AccessKey: "AK1", SecretKey: "SK1", Buckets: []string{"photos"}, Restore: auth.RestoreGrant{Buckets: []string{"photos"}}}},
		KeysFile: keysFile, CacheBytes: 2 << 30, IndexCacheDir: indexDir, VirtualHostBase: "s3.example.org",
		Region: "eu-central-1", LogFormat: "console", ShutdownTimeout: 45 * time.Second, LogOut: os.Stderr,
		MaxInflightPerKey: 8, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 90 * time.Second, MaxHeaderBytes: 32 << 10, SendTimeout: 45 * time.Second,
		Read: readOptions{ReadMemory: 4 << 30, PartSize: 16 << 20, StreamParts: 12, MaxParts: 96,
			TrustUnframed: true, AllowKeyPrefixes: []string{"shared/chunks/", "legacy/"}, MaxFrameBytes: 32 << 20},
		frontDoorConfig: frontDoorConfig{TLSCert: tlsCert, TLSKey: tlsKey, AdminTLSCert: adminCert, AdminTLSKey: adminKey,
			TLSReloadInterval: 2 * time.Second, CORSAllowOrigins: []string{"https://viewer.example.org", "http://localhost:8080"},
			CORSMaxAge: time.Hour},
		AllowRestore: true, RestoreStatusTTL: 30 * time.Second,
		openLimits: openLimits{OpenTimeout: 90 * time.Second, IndexMemory: 2 << 30, MaxFilesPerUpload: 2_000_000, DatasetHistory: 25},
		memorySet:  memoryExplicit{cache: true, read: true, index: true, maxFiles: true},
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
		{"dataset alias with a bad version id", "store: s3://\naliases: [{name: x, target: 's3://a/ds@v 1'}]\n", nil, `version id "v 1"`},
		{"dataset alias flag with ..", "store: s3://\n", []string{"--alias", "x=s3://a/ds@.."}, `version id ".."`},
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
		{"negative open concurrency", "store: s3://\ndiscover: [s3://a/b]\nopen_concurrency: -2\n", nil, "--open-concurrency -2"},
		{"open concurrency huge", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--open-concurrency", "100000"}, "--open-concurrency 100000"},
		{"negative open wait", "store: s3://\ndiscover: [s3://a/b]\nopen_wait: -1s\n", nil, "--open-wait -1s"},
		{"negative send timeout", "store: s3://\ndiscover: [s3://a/b]\nsend_timeout: -1s\n", nil, "--send-timeout -1s"},
		{"send timeout too short", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--send-timeout", "10ms"}, "--send-timeout 10ms: want 100ms to 1h0m0s"},
		{"send timeout too long", "store: s3://\ndiscover: [s3://a/b]\nsend_timeout: 2h\n", nil, "--send-timeout 2h0m0s"},
		{"send timeout without a unit", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--send-timeout", "5"}, `"5" has no unit: write a duration such as 5s`},
		{"rescan not a duration", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--rescan", "1x"}, `"1x" is not a duration`},
		{"open wait beyond clients", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--open-wait", "1h"}, "--open-wait 1h0m0s"},
		{"open timeout too short", "store: s3://\ndiscover: [s3://a/b]\nopen_timeout: 10ms\n", nil, "--open-timeout 10ms"},
		{"open timeout too long", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--open-timeout", "2h"}, "--open-timeout 2h0m0s"},
		{"index memory tiny", "store: s3://\ndiscover: [s3://a/b]\nindex_memory: 1MiB\n", nil, "--index-memory 1048576"},
		{"max files per upload negative", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--max-files-per-upload", "-1"}, "--max-files-per-upload -1"},
		{"max files beyond the index memory", "store: s3://\ndiscover: [s3://a/b]\nindex_memory: 64MiB\n", []string{"--max-files-per-upload", "1000000"}, "more than --index-memory"},
		{"part size too small", "store: s3://\ndiscover: [s3://a/b]\npart_size: 64KiB\n", nil, "--part-size 65536"},
		{"part size too large", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--part-size", "1GiB"}, "--part-size"},
		{"negative stream parts", "store: s3://\ndiscover: [s3://a/b]\nstream_parts: -1\n", nil, "--stream-parts -1"},
		{"max parts below stream parts", "store: s3://\ndiscover: [s3://a/b]\nstream_parts: 16\nmax_parts: 8\n", nil, "--max-parts 8 is below --stream-parts 16"},
		{"read memory under the cache", "store: s3://\ndiscover: [s3://a/b]\ncache_bytes: 1GiB\nread_memory: 1GiB\n", nil, "--read-memory"},
		{"key prefix without a slash", "store: s3://\ndiscover: [s3://a/b]\nallow_key_prefixes: [shared]\n", nil, `--allow-key-prefix "shared"`},
		{"key prefix as a URL", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--allow-key-prefix", "s3://other/x/"}, "not a URL"},
		{"key prefix with ..", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--allow-key-prefix", "a/../b/"}, ".."},
		{"max frame too small", "store: s3://\ndiscover: [s3://a/b]\nmax_frame_bytes: 1KiB\n", nil, "--max-frame-bytes 1024"},
		{"client share above 1", "store: s3://\ndiscover: [s3://a/b]\nclient_memory_share: 1.5\n", nil, "--client-memory-share 1.5"},
		{"client share negative", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--client-memory-share", "-0.1"}, "--client-memory-share -0.1"},
		{"read memory not a size", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--read-memory", "lots"}, "lots"},
		// TLS (the file-based cases: TestCheckConfigTLSFiles).
		{"tls cert without key", "store: s3://\ndiscover: [s3://a/b]\ntls_cert: /x/tls.crt\n", nil, "--tls-cert and --tls-key"},
		{"tls key flag alone", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--tls-key", "/x/tls.key"}, "--tls-cert and --tls-key"},
		{"missing tls cert", "store: s3://\ndiscover: [s3://a/b]\ntls_cert: /nonexistent/tls.crt\ntls_key: /nonexistent/tls.key\n", nil, "--tls-cert /nonexistent/tls.crt"},
		{"admin cert without key", "store: s3://\ndiscover: [s3://a/b]\nadmin_listen: 127.0.0.1:9001\nadmin_tls_cert: /x.crt\n", nil, "--admin-tls-cert and --admin-tls-key"},
		{"admin cert without admin listener", "store: s3://\ndiscover: [s3://a/b]\nadmin_tls_cert: /x.crt\nadmin_tls_key: /x.key\n", nil, "--admin-listen"},
		{"admin plain without tls", "store: s3://\ndiscover: [s3://a/b]\nadmin_listen: 127.0.0.1:9001\nadmin_plain: true\n", nil, "no TLS"},
		{"admin plain without admin listener", "store: s3://\ndiscover: [s3://a/b]\ntls_cert: /x.crt\ntls_key: /x.key\nadmin_plain: true\n", nil, "no admin listener"},
		{"admin plain off loopback", "store: s3://\ndiscover: [s3://a/b]\ntls_cert: /x.crt\ntls_key: /x.key\nadmin_listen: 0.0.0.0:9001\nadmin_plain: true\n", nil, "0.0.0.0:9001 is not loopback"},
		{"admin plain and admin cert", "store: s3://\ndiscover: [s3://a/b]\ntls_cert: /x.crt\ntls_key: /x.key\nadmin_listen: 127.0.0.1:9001\nadmin_plain: true\nadmin_tls_cert: /a.crt\nadmin_tls_key: /a.key\n", nil, "contradicts"},
		{"negative reload interval", "store: s3://\ndiscover: [s3://a/b]\ntls_reload_interval: -1s\n", nil, "--tls-reload-interval -1s"},
		{"tiny reload interval", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--tls-reload-interval", "10ms"}, "--tls-reload-interval 10ms"},
		{"bad reload interval", "store: s3://\ndiscover: [s3://a/b]\ntls_reload_interval: often\n", nil, "often"},
		// CORS.
		{"cors origin with a path", "store: s3://\ndiscover: [s3://a/b]\ncors_allow_origins: [https://viewer.example.org/app]\n", nil, `"https://viewer.example.org/app"`},
		{"cors origin with a slash", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--cors-allow-origin", "https://viewer.example.org/"}, `"https://viewer.example.org/"`},
		{"cors origin with junk", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--cors-allow-origin", "https://a.example junk"}, `"https://a.example junk"`},
		{"cors origin without scheme", "store: s3://\ndiscover: [s3://a/b]\ncors_allow_origins: [viewer.example.org]\n", nil, `"viewer.example.org"`},
		{"cors origin null", "store: s3://\ndiscover: [s3://a/b]\ncors_allow_origins: ['null']\n", nil, `"null"`},
		{"cors origin twice", "store: s3://\ndiscover: [s3://a/b]\ncors_allow_origins: [https://a.example, 'HTTPS://A.example:443']\n", nil, "same origin"},
		{"cors origins not a list", "store: s3://\ndiscover: [s3://a/b]\ncors_allow_origins: https://a.example\n", nil, "line 3: cannot unmarshal"},
		{"negative cors max age", "store: s3://\ndiscover: [s3://a/b]\ncors_max_age: -5s\n", nil, "--cors-max-age -5s"},
		{"fractional cors max age", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--cors-max-age", "1500ms"}, "--cors-max-age 1.5s"},
		// --index-cache: an existing directory or s3://BUCKET/PREFIX.
		{"index cache dir missing", "store: s3://\ndiscover: [s3://a/b]\nindex_cache_dir: /nonexistent/wharf-idx\n", nil, `"/nonexistent/wharf-idx"`},
		{"index cache is a file", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--index-cache", "/dev/null"}, `"/dev/null": not a directory`},
		{"index cache other URL", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--index-cache", "gs://idx/wharf"}, `"gs://idx/wharf"`},
		{"index cache s3 without bucket", "store: s3://\ndiscover: [s3://a/b]\nindex_cache_dir: s3:///wharf\n", nil, `"s3:///wharf"`},
		{"index cache s3 one slash", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--index-cache", "s3:/idx/wharf"}, `"s3:/idx/wharf"`},
		{"restore from a file store", "store: file:///tmp\ndiscover: [s3://a/b]\nallow_restore: true\nkeys: [{access_key: A, secret_key: S}]\n", nil, "--allow-restore: a file:// store"},
		{"restore without keys", "store: s3://\ndiscover: [s3://a/b]\nanonymous: true\n", []string{"--allow-restore"}, "anonymous callers never restore"},
		{"restore ttl too long", "store: s3://\ndiscover: [s3://a/b]\nrestore_status_ttl: 48h\n", nil, "--restore-status-ttl 48h0m0s"},
		{"negative restore ttl", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--restore-status-ttl", "-1s"}, "--restore-status-ttl -1s"},
		{"restore grant not readable", "store: s3://\ndiscover: [s3://a/b]\nkeys: [{access_key: A, secret_key: S, buckets: [x], restore: [y]}]\n", nil, `restore grant for bucket "y"`},
		{"rescan back to back", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--rescan", "1ns"}, "--rescan 1ns: want 0"},
		{"read timeout cuts everyone", "store: s3://\ndiscover: [s3://a/b]\nread_timeout: 1ms\n", nil, "--read-timeout 1ms: want 100ms to 1h0m0s"},
		{"read header timeout beyond reason", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--read-header-timeout", "100h"}, "--read-header-timeout 100h0m0s"},
		{"idle timeout tiny", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--idle-timeout", "1us"}, "--idle-timeout 1µs"},
		{"listen port out of range", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--listen", "127.0.0.1:99999"}, `--listen "127.0.0.1:99999": port "99999"`},
		{"admin listen port negative", "store: s3://\ndiscover: [s3://a/b]\nadmin_listen: '127.0.0.1:-1'\n", nil, `--admin-listen "127.0.0.1:-1"`},
		{"admin on the s3 listener", "store: s3://\ndiscover: [s3://a/b]\nlisten: 127.0.0.1:9000\n", []string{"--admin-listen", "127.0.0.1:9000"}, "--admin-listen 127.0.0.1:9000: the same address as --listen"},
		{"s3 region a URL", "store: s3://\ndiscover: [s3://a/b]\ns3: {region: 'http://127.0.0.1:9000'}\n", nil, `--s3-region: backend: S3 region "http://127.0.0.1:9000"`},
		{"second yaml document", "store: s3://\ndiscover: [s3://a/b]\n---\ncache_bytes: 1\n", nil, "more than one YAML document"},
		{"store a bare path", "store: /srv/data\ndiscover: [s3://a/b]\n", nil, `--store: backend: store URL "/srv/data": want file://DIR or s3://`},
		{"store another scheme", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--store", "http://127.0.0.1:9000"}, `--store: backend: store URL "http://127.0.0.1:9000"`},
		{"store dir missing", "store: file:///nonexistent/wharf-store\ndiscover: [s3://a/b]\n", nil, `--store: backend: store URL "file:///nonexistent/wharf-store"`},
		{"store dir is a file", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--store", "file:///dev/null"}, "/dev/null is not a directory"},
		{"s3 endpoint without scheme", "store: s3://\ndiscover: [s3://a/b]\ns3: {endpoint: 'localhost:9000'}\n", nil, `--s3-endpoint: backend: S3 endpoint "localhost:9000": want an http:// or https:// URL`},
		{"s3 endpoint a path", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--s3-endpoint", "/tmp/minio"}, `--s3-endpoint: backend: S3 endpoint "/tmp/minio"`},
		{"s3 endpoint with a query", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--s3-endpoint", "http://127.0.0.1:9000/?x=1"}, "no user info, query or fragment"},
		{"virtual host base a URL", "store: s3://\ndiscover: [s3://a/b]\nvirtual_host_base: http://s3.example.com\n", nil, `--virtual-host-base "http://s3.example.com"`},
		{"virtual host base with a port", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--virtual-host-base", "s3.example.com:9000"}, `--virtual-host-base "s3.example.com:9000"`},
		{"virtual host base empty label", "store: s3://\ndiscover: [s3://a/b]\n", []string{"--virtual-host-base", ".s3.example.com"}, "empty or over-long label"},
		{"restore grant not a list", "store: s3://\ndiscover: [s3://a/b]\nkeys: [{access_key: A, secret_key: S, restore: maybe}]\n", nil, "restore: want true, false"},
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

// TestCheckConfigTLSFiles: certificate files that exist but cannot serve
// fail --check-config and the start, with the file named.
func TestCheckConfigTLSFiles(t *testing.T) {
	t.Setenv("WHARF_ACCESS_KEY", "")
	t.Setenv("WHARF_SECRET_KEY", "")
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "good", validNow)
	_, otherKey := pki.pair(t, "other", validNow)
	oldCert, oldKey := pki.pair(t, "old", expired)
	futureCert, futureKey := pki.pair(t, "future", notYetValid)
	certPEM, _ := os.ReadFile(cert)
	caPEM := string(pki.ca.certPEM)
	torn := writeFile(t, "torn.pem", string(certPEM)+caPEM[:len(caPEM)*2/3])
	stranger, err := newDevCA("another CA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	wrongChain := writeFile(t, "wrong-chain.pem", string(certPEM)+string(stranger.certPEM))
	dir := t.TempDir()
	base := []string{"serve", "--check-config", "--store", "s3://", "--discover", "s3://a/b"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"key of another certificate", []string{"--tls-cert", cert, "--tls-key", otherKey}, "--tls-key " + otherKey + ": the private key does not match the certificate in --tls-cert " + cert},
		{"expired", []string{"--tls-cert", oldCert, "--tls-key", oldKey}, "--tls-cert " + oldCert + ": the certificate (CN=localhost,O=wharf) expired at"},
		{"unreadable (a directory)", []string{"--tls-cert", dir, "--tls-key", key}, "--tls-cert " + dir + ": not a regular file"},
		{"not yet valid", []string{"--tls-cert", futureCert, "--tls-key", futureKey}, "--tls-cert " + futureCert + ": the certificate (CN=localhost,O=wharf) is not valid before"},
		{"chain torn inside the intermediate", []string{"--tls-cert", torn, "--tls-key", key}, "--tls-cert " + torn + ": a PEM block is cut off after certificate 1"},
		{"chain that does not verify", []string{"--tls-cert", wrongChain, "--tls-key", key}, "--tls-cert " + wrongChain + ": the chain does not verify"},
		{"admin key of another certificate", []string{"--tls-cert", cert, "--tls-key", key, "--admin-listen", "127.0.0.1:0",
			"--admin-tls-cert", cert, "--admin-tls-key", otherKey}, "--admin-tls-key " + otherKey + ": the private key does not match the certificate in --admin-tls-cert " + cert},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := parseServeArgs(append(base[1:], tc.args...))
			if err == nil {
				_, err = cfg.checkConfig()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
			if code := run(append(append([]string(nil), base...), tc.args...)); code == 0 {
				t.Error("wharf serve --check-config exited 0")
			}
		})
	}
	if code := run(append(base, "--tls-cert", cert, "--tls-key", key)); code != 0 {
		t.Errorf("--check-config with a good pair exited %d", code)
	}
}

// k8sDoc is the part of a Kubernetes object the deploy test reads.
type k8sDoc struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Ports []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
		ClusterIP                string `yaml:"clusterIP"`
		PublishNotReadyAddresses bool   `yaml:"publishNotReadyAddresses"`
		Ingress                  []struct {
			From []struct {
				PodSelector *struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"podSelector"`
			} `yaml:"from"`
			Ports []struct {
				Port string `yaml:"port"`
			} `yaml:"ports"`
		} `yaml:"ingress"`
		Template struct {
			Spec struct {
				SecurityContext struct {
					RunAsNonRoot *bool `yaml:"runAsNonRoot"`
					RunAsUser    *int  `yaml:"runAsUser"`
				} `yaml:"securityContext"`
				Containers []k8sContainer `yaml:"containers"`
				Volumes    []struct {
					Name      string                 `yaml:"name"`
					ConfigMap *struct{ Name string } `yaml:"configMap"`
					Secret    *struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
					EmptyDir *struct{} `yaml:"emptyDir"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path   string `yaml:"path"`
		Port   string `yaml:"port"`
		Scheme string `yaml:"scheme"`
	} `yaml:"httpGet"`
}

type k8sContainer struct {
	Name string   `yaml:"name"`
	Args []string `yaml:"args"`
	Env  []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			ResourceFieldRef *struct {
				ContainerName string `yaml:"containerName"`
				Resource      string `yaml:"resource"`
				Divisor       string `yaml:"divisor"`
			} `yaml:"resourceFieldRef"`
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  k8sProbe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		RunAsNonRoot           *bool `yaml:"runAsNonRoot"`
		ReadOnlyRootFilesystem bool  `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
}

// TestDeployManifests parses deploy/*.yaml and checks that the example
// really runs: the container args and the mounted config are accepted by
// wharf serve's own flag and config code (and pass --check-config), the
// ports match the listen addresses, the probes hit /healthz and /readyz on
// the admin port, resources follow the memory sizing rule, the pod runs
// as non-root with every path wharf writes mounted, and the peers' dns+
// members name a headless Service that publishes not-ready pods, their
// secret mounted from a Secret.
func TestDeployManifests(t *testing.T) {
	t.Setenv("WHARF_ACCESS_KEY", "")
	t.Setenv("WHARF_SECRET_KEY", "")
	paths, err := filepath.Glob("../../deploy/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no deploy/*.yaml: %v", err)
	}
	var docs []k8sDoc
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var d k8sDoc
			err := dec.Decode(&d)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			docs = append(docs, d)
		}
	}
	byKind := map[string][]k8sDoc{}
	for _, d := range docs {
		byKind[d.Kind] = append(byKind[d.Kind], d)
	}
	if len(byKind["Deployment"]) != 1 || len(byKind["ConfigMap"]) != 1 || len(byKind["Service"]) == 0 {
		t.Fatalf("want one Deployment, one ConfigMap and Services; got %v", func() []string {
			var k []string
			for _, d := range docs {
				k = append(k, d.Kind+"/"+d.Metadata.Name)
			}
			return k
		}())
	}
	dep := byKind["Deployment"][0]
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	if len(c.Args) < 1 || c.Args[0] != "serve" {
		t.Fatalf("container args %q do not run wharf serve", c.Args)
	}
	// The kubelet expands $(VAR) in args from the container's env; a
	// downward API variable of limits.memory (divisor 1) is the limit in
	// bytes.
	limit, err := parseK8sQuantity(c.Resources.Limits["memory"])
	if err != nil {
		t.Fatalf("memory limit: %v", err)
	}
	envs := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			envs[e.Name] = e.Value
		case e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory" &&
			(e.ValueFrom.ResourceFieldRef.Divisor == "" || e.ValueFrom.ResourceFieldRef.Divisor == "1") &&
			(e.ValueFrom.ResourceFieldRef.ContainerName == "" || e.ValueFrom.ResourceFieldRef.ContainerName == c.Name):
			envs[e.Name] = strconv.FormatInt(limit, 10)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			envs[e.Name] = "10.0.0.7" // the pod's IP, as the kubelet gives it
		}
	}
	// $(VAR) anywhere in an arg ("http://$(POD_IP):7946") is expanded.
	varRef := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for i, a := range c.Args {
		c.Args[i] = varRef.ReplaceAllStringFunc(a, func(ref string) string {
			v, ok := envs[varRef.FindStringSubmatch(ref)[1]]
			if !ok {
				t.Fatalf("container arg %s names no env variable the test can resolve", a)
			}
			return v
		})
	}

	// The config file the args name is the ConfigMap's, mounted there.
	volumes := map[string]int{}
	for i, v := range pod.Volumes {
		volumes[v.Name] = i
	}
	mountOf := func(path string) (name, sub string, ok bool) {
		for _, m := range c.VolumeMounts {
			if path == m.MountPath || strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
				return m.Name, m.SubPath, true
			}
		}
		return "", "", false
	}
	var cfgPath string
	scratch := defaultServeConfig()
	check := false
	fs := serveFlags(&scratch, &cfgPath, &check)
	if err := fs.Parse(c.Args[1:]); err != nil {
		t.Fatalf("wharf serve rejects the container args %q: %v", c.Args[1:], err)
	}
	vol, sub, ok := mountOf(cfgPath)
	if cfgPath == "" || !ok || pod.Volumes[volumes[vol]].ConfigMap == nil {
		t.Fatalf("--config %q is not mounted from a ConfigMap", cfgPath)
	}
	cm := byKind["ConfigMap"][0]
	if pod.Volumes[volumes[vol]].ConfigMap.Name != cm.Metadata.Name || cm.Data[sub] == "" {
		t.Fatalf("config %s: ConfigMap %s has no key %q", cfgPath, cm.Metadata.Name, sub)
	}
	local := writeFile(t, "wharf.yaml", cm.Data[sub])
	args := append([]string(nil), c.Args[1:]...)
	for i := range args {
		if args[i] == cfgPath {
			args[i] = local
		}
	}
	cfg, _, err := parseServeArgs(args)
	if err != nil {
		t.Fatalf("wharf serve rejects the deploy config: %v", err)
	}
	// Paths wharf reads or writes are mounted: keys from a Secret, the
	// index cache on a writable volume (the root filesystem is read-only).
	if cfg.KeysFile != "" {
		vol, _, ok := mountOf(cfg.KeysFile)
		if !ok || pod.Volumes[volumes[vol]].Secret == nil {
			t.Errorf("keys_file %s is not mounted from a Secret", cfg.KeysFile)
		}
		cfg.KeysFile = writeFile(t, "keys.yaml", "keys:\n  - {access_key: AK, secret_key: SK}\n")
	}
	if cfg.IndexCacheDir != "" {
		if vol, _, ok := mountOf(cfg.IndexCacheDir); !ok || pod.Volumes[volumes[vol]].EmptyDir == nil {
			t.Errorf("index_cache_dir %s is not on a writable volume", cfg.IndexCacheDir)
		}
		cfg.IndexCacheDir = t.TempDir() // the emptyDir exists in the pod
	}
	// The peers' secret comes from a Secret (the test's own file stands in
	// for it: wharf checks the file's mode and length at start).
	if cfg.PeerSecretFile != "" {
		if vol, _, ok := mountOf(cfg.PeerSecretFile); !ok || pod.Volumes[volumes[vol]].Secret == nil {
			t.Errorf("peer_secret_file %s is not mounted from a Secret", cfg.PeerSecretFile)
		}
		cfg.PeerSecretFile = writeFile(t, "peer-secret", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n")
		if err := os.Chmod(cfg.PeerSecretFile, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	// The admin token comes from a Secret mounted as a directory (so a
	// rotation reaches the pod).
	if cfg.AdminTokenFile != "" {
		if vol, sub, ok := mountOf(cfg.AdminTokenFile); !ok || pod.Volumes[volumes[vol]].Secret == nil || sub != "" {
			t.Errorf("admin_token_file %s is not in a Secret mounted as a directory", cfg.AdminTokenFile)
		}
		cfg.AdminTokenFile = writeFile(t, "admin-token", "0123456789abcdef0123456789abcdef\n")
		if err := os.Chmod(cfg.AdminTokenFile, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	// TLS files come from a Secret mounted as a directory (a subPath
	// mount never sees a renewed secret).
	pki := newTestPKI(t)
	testCert, testKey := pki.pair(t, "deploy", validNow)
	for _, f := range []struct {
		path *string
		test string
	}{{&cfg.TLSCert, testCert}, {&cfg.TLSKey, testKey}, {&cfg.AdminTLSCert, testCert}, {&cfg.AdminTLSKey, testKey}} {
		if *f.path == "" {
			continue
		}
		vol, sub, ok := mountOf(*f.path)
		if !ok || pod.Volumes[volumes[vol]].Secret == nil || sub != "" {
			t.Errorf("TLS file %s is not in a Secret mounted as a directory", *f.path)
		}
		*f.path = f.test
	}
	if !c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("the root filesystem is writable")
	}
	if _, err := cfg.checkConfig(); err != nil {
		t.Fatalf("--check-config on the deploy config: %v", err)
	}

	// Ports.
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	listens := map[string]string{"s3": cfg.Listen, "admin": cfg.AdminListen}
	if cfg.PeerListen != "" {
		listens["peer"] = cfg.PeerListen
	}
	for name, addr := range listens {
		host, port, err := splitHostPort(addr)
		if err != nil {
			t.Fatalf("%s listen: %v", name, err)
		}
		if host != "0.0.0.0" && host != "" {
			t.Errorf("%s listens on %s, unreachable from outside the pod", name, addr)
		}
		if fmt.Sprint(ports[name]) != port {
			t.Errorf("container port %s = %d, but wharf listens on %s", name, ports[name], addr)
		}
	}
	for _, svc := range byKind["Service"] {
		for _, p := range svc.Spec.Ports {
			if _, ok := ports[p.TargetPort]; !ok {
				t.Errorf("Service %s targets port %q, which the container does not name", svc.Metadata.Name, p.TargetPort)
			}
		}
	}

	// Peers: each dns+ member names a headless Service of the example
	// that publishes not-ready pods (a starting pod finds the others) and
	// maps the member's port to the container's peer port.
	for _, m := range cfg.peerList() {
		rest, ok := strings.CutPrefix(m, "dns+http://")
		if !ok {
			rest, ok = strings.CutPrefix(m, "dns+https://")
		}
		if !ok {
			continue
		}
		host, port, err := splitHostPort(rest)
		if err != nil {
			t.Fatalf("--peers %s: %v", m, err)
		}
		name, _, _ := strings.Cut(host, ".")
		found := false
		for _, svc := range byKind["Service"] {
			if svc.Metadata.Name != name {
				continue
			}
			found = true
			if svc.Spec.ClusterIP != "None" || !svc.Spec.PublishNotReadyAddresses {
				t.Errorf("Service %s (the peers' %s): clusterIP %q, publishNotReadyAddresses %v; want a headless Service (None) publishing not-ready pods",
					name, m, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
			}
			mapped := false
			for _, p := range svc.Spec.Ports {
				mapped = mapped || (fmt.Sprint(p.Port) == port && p.TargetPort == "peer")
			}
			if !mapped {
				t.Errorf("Service %s maps no port %s to the container's peer port", name, port)
			}
		}
		if !found {
			t.Errorf("--peers %s names no Service of the example", m)
		}
	}

	// A NetworkPolicy lets every named port in that the container has, and
	// the peer port only from the replicas themselves.
	for _, np := range byKind["NetworkPolicy"] {
		open := map[string]string{}
		for _, rule := range np.Spec.Ingress {
			from := "anywhere"
			if len(rule.From) > 0 {
				from = "others"
				for _, f := range rule.From {
					if f.PodSelector != nil && reflect.DeepEqual(f.PodSelector.MatchLabels, dep.Spec.Selector.MatchLabels) && len(rule.From) == 1 {
						from = "replicas"
					}
				}
			}
			for _, p := range rule.Ports {
				if _, ok := ports[p.Port]; !ok {
					t.Errorf("NetworkPolicy %s opens port %q, which the container does not name", np.Metadata.Name, p.Port)
				}
				// The widest rule wins: a port open to anywhere in one
				// rule is open to anywhere.
				if open[p.Port] != "anywhere" && (open[p.Port] == "" || from != "replicas") {
					open[p.Port] = from
				}
			}
		}
		for name := range ports {
			want := "anywhere"
			if name == "peer" {
				want = "replicas"
			}
			if open[name] != want {
				t.Errorf("NetworkPolicy %s: port %s open to %q, want %s", np.Metadata.Name, name, open[name], want)
			}
		}
	}

	// Probes, over HTTPS when the admin listener serves TLS.
	wantScheme := ""
	if on, _ := cfg.adminTLS(); on {
		wantScheme = "HTTPS"
	}
	for name, tc := range map[string]struct {
		p    k8sProbe
		path string
	}{"readiness": {c.ReadinessProbe, "/readyz"}, "liveness": {c.LivenessProbe, "/healthz"}} {
		if tc.p.HTTPGet == nil || tc.p.HTTPGet.Path != tc.path || tc.p.HTTPGet.Port != "admin" || tc.p.HTTPGet.Scheme != wantScheme {
			t.Errorf("%s probe %+v, want GET %s on the admin port, scheme %q", name, tc.p.HTTPGet, tc.path, wantScheme)
		}
	}

	// Resources: the memory limit holds the frame cache plus headroom for
	// indexes, buffers and the runtime (docs/operations.md sizing rule).
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" {
		t.Error("requests not set")
	}
	if limit < cfg.CacheBytes+512<<20 {
		t.Errorf("memory limit %d is below cache_bytes %d + 512 MiB", limit, cfg.CacheBytes)
	}
	gomem, handSet := envs["GOMEMLIMIT"]
	if cfg.MemoryTarget != 0 {
		// --memory-target is the container's limit, and its division
		// (applied by checkConfig above) fits in it with the runtime's
		// headroom; a hand-set GOMEMLIMIT beside it would be replaced.
		if cfg.MemoryTarget != limit {
			t.Errorf("--memory-target %d, want the container's memory limit %d", cfg.MemoryTarget, limit)
		}
		if handSet {
			t.Errorf("GOMEMLIMIT %s is set beside --memory-target, which replaces it", gomem)
		}
		if read := cfg.Read.frameCache(cfg.CacheBytes).MemoryBudget(); read+int64(cfg.IndexMemory)+minRuntime > limit*90/100 {
			t.Errorf("read memory %d + index memory %d + 64 MiB exceed 90%% of the limit %d", read, cfg.IndexMemory, limit)
		}
	} else {
		// GOMEMLIMIT (the runtime's soft limit) sits between the read
		// budget and the container's limit, with room for the runtime.
		soft, err := parseK8sQuantity(strings.TrimSuffix(gomem, "B"))
		if err != nil {
			t.Fatalf("neither --memory-target nor GOMEMLIMIT: GOMEMLIMIT %q: %v", gomem, err)
		}
		if read := cfg.Read.frameCache(cfg.CacheBytes).MemoryBudget(); soft < read+128<<20 || soft > limit*95/100 {
			t.Errorf("GOMEMLIMIT %s: want between read memory %d + 128 MiB and 95%% of the limit %d", gomem, read, limit)
		}
	}

	// Non-root.
	sc := pod.SecurityContext
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("pod security context %+v does not force non-root", sc)
	}
}

// parseK8sQuantity reads the binary and decimal memory suffixes used above.
func parseK8sQuantity(q string) (int64, error) {
	for _, u := range []struct {
		s string
		m int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}} {
		if n, ok := strings.CutSuffix(q, u.s); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * u.m, err
		}
	}
	return strconv.ParseInt(q, 10, 64)
}

// configDump writes cfg's file-settable options as a config document that
// sets every one of them (empty lists included).
func configDump(t testing.TB, cfg serveConfig) []byte {
	t.Helper()
	fc := fileConfig{
		Listen: cfg.Listen, AdminListen: cfg.AdminListen, Store: cfg.StoreURL,
		Discover: cfg.Discover, Aliases: cfg.Aliases, Rescan: cfg.Rescan, RetireGrace: cfg.RetireGrace,
		OpenConcurrency: cfg.OpenConcurrency, WaitOpen: cfg.WaitOpen, OpenWait: cfg.OpenWait,
		Anonymous: cfg.Anonymous, Keys: cfg.Keys, KeysFile: cfg.KeysFile, CacheBytes: yamlBytes(cfg.CacheBytes),
		IndexCacheDir: cfg.indexCache(), VirtualHostBase: cfg.VirtualHostBase, Region: cfg.Region,
		LogFormat: cfg.LogFormat, ShutdownTimeout: cfg.ShutdownTimeout, MaxInflightPerKey: cfg.MaxInflightPerKey,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout, ReadTimeout: cfg.ReadTimeout, IdleTimeout: cfg.IdleTimeout,
		MaxHeaderBytes: yamlBytes(cfg.MaxHeaderBytes), SendTimeout: cfg.SendTimeout,
		ReadMemory: yamlBytes(cfg.Read.ReadMemory), PartSize: yamlBytes(cfg.Read.PartSize),
		StreamParts: cfg.Read.StreamParts, MaxParts: cfg.Read.MaxParts,
		TrustUnframed: cfg.Read.TrustUnframed, AllowKeyPrefixes: cfg.Read.AllowKeyPrefixes,
		MaxFrameBytes:   yamlBytes(cfg.Read.MaxFrameBytes),
		frontDoorConfig: cfg.frontDoorConfig,
		AllowRestore:    cfg.AllowRestore, RestoreStatusTTL: cfg.RestoreStatusTTL,
		peerConfig: cfg.peerConfig,
	}
	if fc.AllowKeyPrefixes == nil {
		fc.AllowKeyPrefixes = []string{}
	}
	if fc.CORSAllowOrigins == nil {
		fc.CORSAllowOrigins = []string{}
	}
	if fc.Peers == nil {
		fc.Peers = []string{}
	}
	fc.S3.Endpoint, fc.S3.Region, fc.S3.PathStyle = cfg.S3.Endpoint, cfg.S3.Region, cfg.S3.PathStyle
	for _, a := range cfg.Archives {
		fc.Archives = append(fc.Archives, struct {
			Name     string `yaml:"name"`
			Manifest string `yaml:"manifest"`
		}{a.Name, a.ManifestURL})
	}
	// Lists are written even when empty, so the dump overrides them too.
	if fc.Archives == nil {
		fc.Archives = []struct {
			Name     string `yaml:"name"`
			Manifest string `yaml:"manifest"`
		}{}
	}
	out, err := yaml.Marshal(fc)
	if err != nil {
		t.Fatalf("marshal %+v: %v", fc, err)
	}
	return out
}

// fileSettable is cfg reduced to what a config file can set, with empty
// lists as nil, for comparisons.
func fileSettable(cfg serveConfig) serveConfig {
	out := serveConfig{
		Listen: cfg.Listen, AdminListen: cfg.AdminListen, StoreURL: cfg.StoreURL,
		Rescan: cfg.Rescan, RetireGrace: cfg.RetireGrace, Anonymous: cfg.Anonymous, KeysFile: cfg.KeysFile,
		OpenConcurrency: cfg.OpenConcurrency, WaitOpen: cfg.WaitOpen, OpenWait: cfg.OpenWait,
		CacheBytes: cfg.CacheBytes, IndexCacheDir: cfg.IndexCacheDir, IndexCacheURL: cfg.IndexCacheURL, VirtualHostBase: cfg.VirtualHostBase,
		Region: cfg.Region, LogFormat: cfg.LogFormat, ShutdownTimeout: cfg.ShutdownTimeout,
		MaxInflightPerKey: cfg.MaxInflightPerKey, ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout: cfg.ReadTimeout, IdleTimeout: cfg.IdleTimeout, MaxHeaderBytes: cfg.MaxHeaderBytes, SendTimeout: cfg.SendTimeout,
		Read: cfg.Read, frontDoorConfig: cfg.frontDoorConfig, AllowRestore: cfg.AllowRestore, RestoreStatusTTL: cfg.RestoreStatusTTL,
		peerConfig: cfg.peerConfig,
	}
	if len(out.Read.AllowKeyPrefixes) == 0 {
		out.Read.AllowKeyPrefixes = nil
	}
	if len(out.CORSAllowOrigins) == 0 {
		out.CORSAllowOrigins = nil
	}
	if len(out.Peers) == 0 {
		out.Peers = nil
	}
	out.S3.Endpoint, out.S3.Region, out.S3.PathStyle = cfg.S3.Endpoint, cfg.S3.Region, cfg.S3.PathStyle
	if len(cfg.Archives) > 0 {
		out.Archives = cfg.Archives
	}
	if len(cfg.Discover) > 0 {
		out.Discover = cfg.Discover
	}
	if len(cfg.Aliases) > 0 {
		out.Aliases = cfg.Aliases
	}
	for _, k := range cfg.Keys {
		if len(k.Buckets) == 0 {
			k.Buckets = nil
		}
		out.Keys = append(out.Keys, k)
	}
	return out
}

// configBase is a starting configuration in which every file-settable
// option differs from the defaults, and (between variant 0 and 1) from
// each other, so that an option the decoder fails to apply shows.
func configBase(variant int) serveConfig {
	v := strconv.Itoa(variant)
	d := time.Duration(1000 + variant)
	c := defaultServeConfig()
	c.Listen, c.AdminListen, c.StoreURL = "base"+v+".invalid:1", "base"+v+".invalid:2", "file:///base"+v
	c.S3.Endpoint, c.S3.Region, c.S3.PathStyle = "http://base"+v+".invalid", "base-region-"+v, variant == 0
	c.Archives = []serveArchive{{Name: "base" + v, ManifestURL: "s3://base/" + v}}
	c.Discover = []string{"s3://base/discover" + v}
	c.Aliases = []serveAlias{{Name: "alias" + v, Target: "s3://base/" + v + "@latest"}}
	c.Rescan, c.RetireGrace, c.ShutdownTimeout = d, d+1, d+2
	c.OpenConcurrency, c.WaitOpen, c.OpenWait = 40+variant, variant == 0, d+8
	c.ReadHeaderTimeout, c.ReadTimeout, c.IdleTimeout = d+3, d+4, d+5
	c.SendTimeout = time.Second + d
	c.Anonymous = variant == 1
	c.Keys = []auth.Key{{AccessKey: "BASE" + v, SecretKey: "base-secret-" + v}}
	c.KeysFile, c.IndexCacheDir, c.VirtualHostBase = "/base/keys"+v, "/base/cache"+v, "base"+v+".invalid"
	c.Region, c.LogFormat = "base-"+v, "base-format-"+v
	c.CacheBytes, c.MaxInflightPerKey, c.MaxHeaderBytes = 7001+int64(variant), 7+variant, 9001+variant
	c.Read = readOptions{ReadMemory: 3<<30 + int64(variant), PartSize: 5<<20 + int64(variant), StreamParts: 5 + variant, MaxParts: 50 + variant,
		TrustUnframed: variant == 0, AllowKeyPrefixes: []string{"base" + v + "/"}, MaxFrameBytes: 2<<20 + int64(variant)}
	c.frontDoorConfig = frontDoorConfig{TLSCert: "/base/cert" + v, TLSKey: "/base/key" + v,
		AdminTLSCert: "/base/admin-cert" + v, AdminTLSKey: "/base/admin-key" + v, AdminPlain: variant == 0,
		TLSReloadInterval: d + 6, CORSAllowOrigins: []string{"https://base" + v + ".invalid"}, CORSMaxAge: d + 7}
	c.AllowRestore, c.RestoreStatusTTL = variant == 1, d+9
	return c
}

// checkConfigRoundTrip: a document that applies to the defaults gives a
// configuration that, written out whole and applied onto two different
// starting configurations, comes back unchanged: every option lands in
// its own field and none is dropped. And checkConfig judges the copies as
// it judges the original.
func checkConfigRoundTrip(t testing.TB, data []byte) {
	t.Helper()
	cfg := defaultServeConfig()
	if err := applyConfigYAML(data, &cfg); err != nil {
		t.Fatalf("the document does not apply: %v", err)
	}
	cfg.KeysFile = "" // checkConfig must never read arbitrary paths
	for _, p := range []*string{&cfg.TLSCert, &cfg.TLSKey, &cfg.AdminTLSCert, &cfg.AdminTLSKey} {
		if *p != "" {
			*p = "/nonexistent/fuzz.pem"
		}
	}
	_, wantErr := cfg.checkConfig()
	dump := configDump(t, cfg)
	for variant := range 2 {
		got := configBase(variant)
		if err := applyConfigYAML(dump, &got); err != nil {
			t.Fatalf("the written-out configuration does not apply: %v\n%s", err, dump)
		}
		if g, w := fileSettable(got), fileSettable(cfg); !reflect.DeepEqual(g, w) {
			t.Fatalf("round trip onto base %d changed the configuration\n got  %+v\n want %+v\ndocument:\n%s", variant, g, w, dump)
		}
		if _, err := got.checkConfig(); fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("checkConfig: %v for the original, %v for its round trip", wantErr, err)
		}
	}
}

func TestConfigDumpRoundTrip(t *testing.T) {
	for _, doc := range []string{
		strings.ReplaceAll(fullConfigYAML, "KEYS_FILE", "/etc/wharf/keys"),
		"",
		"store: s3://\ndiscover: [s3://a/b]\n",
		"archives: []\nkeys: []\nrescan: 0s\n",
		"listen: null\ncache_bytes: 1KiB\n",
	} {
		checkConfigRoundTrip(t, []byte(doc))
	}
}

// FuzzConfigYAML: for any document, applyConfigYAML either fails with an
// error that points at the problem (a line, or the option's name), or
// yields a configuration that round-trips (checkConfigRoundTrip).
func FuzzConfigYAML(f *testing.F) {
	f.Add([]byte(fullConfigYAML))
	f.Add([]byte("store: s3://\ndiscover: [s3://a/b]\n"))
	f.Add([]byte("aliases: [{name: x, target: s3://a/b@latest}]\ncache_bytes: 1KiB\n"))
	f.Add([]byte("cache_bytes: [1]\n"))
	f.Add([]byte("archives: [{name: '', manifest: x}]\n"))
	f.Add([]byte("max_header_bytes: 2GiB\n"))
	f.Add([]byte("keys: [{access_key: a, secret_key: b, buckets: []}]\nrescan: -1s\n"))
	f.Add([]byte("store: s3://\ndiscover: [s3://a/b]\ntls_cert: a\ntls_key: b\nadmin_plain: true\ncors_allow_origins: ['*', 'http://x:1']\ncors_max_age: 1s\nindex_cache_dir: s3://i/p\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := defaultServeConfig()
		err := applyConfigYAML(data, &cfg)
		if err == nil {
			checkConfigRoundTrip(t, data)
			return
		}
		// A document that is not YAML at all may fail in the parser's
		// own words; one that is YAML but not a valid configuration must
		// name the line or the option.
		var node yaml.Node
		if yaml.Unmarshal(data, &node) != nil {
			return
		}
		msg := err.Error()
		if strings.Contains(msg, "line ") || strings.Contains(msg, "archives[") || strings.Contains(msg, "max_header_bytes") {
			return
		}
		t.Fatalf("error %q names neither a line nor an option\n%s", msg, data)
	})
}

// TestStartFilesNotRegular: a --config, --keys-file or --tls-cert naming a
// FIFO, a directory or a device is refused at once, naming the file. Before,
// opening a FIFO waited for a writer and the start hung.
func TestStartFilesNotRegular(t *testing.T) {
	t.Setenv("WHARF_ACCESS_KEY", "")
	t.Setenv("WHARF_SECRET_KEY", "")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if !testMkfifo(t, fifo) {
		fifo = dir // no FIFOs here: a directory instead
	}
	good := writeFile(t, "c.yaml", "store: s3://\ndiscover: [s3://a/b]\n")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"config a fifo", []string{"--config", fifo}},
		{"config a directory", []string{"--config", dir}},
		{"config a device", []string{"--config", "/dev/zero"}},
		{"keys file a fifo", []string{"--config", good, "--keys-file", fifo}},
		{"tls cert a fifo", []string{"--config", good, "--tls-cert", fifo, "--tls-key", fifo}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				args := append(tc.args, "--check-config")
				cfg, _, err := parseServeArgs(args)
				if err == nil {
					_, err = cfg.checkConfig()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "not a regular file") {
					t.Fatalf("error %v, want one saying not a regular file", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("start still waiting after 5s (a FIFO opened for reading waits for a writer)")
			}
		})
	}
}
