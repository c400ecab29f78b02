package dataset

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/backend"
)

const ds = "lith-bench/published/smoke"

// good is the real pointer of docs/cargoship-published-datasets.md.
const good = `{
  "schema": "cargoship.current/1",
  "version_id": "20260913T213513Z-13de9c",
  "manifest_key": "lith-bench/published/smoke/v/20260913T213513Z-13de9c/uploads/20260913-8cbf0a0b/manifest.json.gz",
  "index_key": "lith-bench/published/smoke/v/20260913T213513Z-13de9c/index.lith",
  "index_sha256": "5c2324ae6e94c29a162fed5f1a2c52c180f6b1ff47995d7270e680142b0e73a8",
  "created": "2026-09-13T21:35:50Z",
  "file_count": 4,
  "total_bytes": 204965,
  "previous_version_id": "20260913T213437Z-487888"
}
`

func TestParseGood(t *testing.T) {
	p, err := Parse([]byte(good), "b", ds)
	if err != nil {
		t.Fatal(err)
	}
	if p.VersionID != "20260913T213513Z-13de9c" || p.FileCount != 4 || p.TotalBytes != 204965 ||
		p.PreviousVersionID != "20260913T213437Z-487888" || !strings.HasSuffix(p.ManifestKey, "/manifest.json.gz") {
		t.Fatalf("parsed %+v", p)
	}
	// A dataset at the bucket root.
	root := strings.ReplaceAll(good, "lith-bench/published/smoke/", "")
	if _, err := Parse([]byte(root), "b", ""); err != nil {
		t.Fatal(err)
	}
}

// replace returns good with old replaced by new (which must occur).
func replace(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(good, old) {
		t.Fatalf("%q not in the pointer", old)
	}
	return strings.Replace(good, old, new, 1)
}

func TestParseRefuses(t *testing.T) {
	drop := func(field string) string {
		lines := strings.Split(good, "\n")
		var out []string
		for _, l := range lines {
			if !strings.Contains(l, `"`+field+`"`) {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	cases := []struct{ name, data, want string }{
		{"nothing", "", "empty object (no JSON)"},
		{"empty object", "{}", "empty object"},
		{"blank", "  \n", "empty object (no JSON)"},
		{"array", "[]", "not a JSON object"},
		{"string", `"x"`, "not a JSON object"},
		{"truncated", good[:len(good)/2], "not JSON"},
		{"other schema", replace(t, `"cargoship.current/1"`, `"cargoship.current/2"`), `schema "cargoship.current/2"`},
		{"no schema", drop("schema"), "schema \"\""},
		{"unknown field", replace(t, `"created"`, `"extra": 1, "created"`), `unknown field "extra"`},
		{"duplicate field", replace(t, `"created"`, `"file_count": 5, "created"`), `field "file_count" given twice`},
		{"trailing object", good + `{}`, "trailing data"},
		{"trailing garbage", good + "x", "trailing data"},
		{"missing version_id", drop("version_id"), "missing version_id"},
		{"missing manifest_key", drop("manifest_key"), "missing manifest_key"},
		{"missing index_key", drop("index_key"), "missing index_key"},
		{"missing index_sha256", drop("index_sha256"), "missing index_sha256"},
		{"null version_id", replace(t, `"20260913T213513Z-13de9c",`, `null,`), `field "version_id": want a string`},
		{"short sha", replace(t, `5c2324ae`, `5c2324a`), "not 64 hexadecimal"},
		{"non-hex sha", replace(t, `5c2324ae`, `5c2324zz`), "not 64 hexadecimal"},
		{"negative file_count", replace(t, `"file_count": 4`, `"file_count": -1`), "negative file_count"},
		{"negative total_bytes", replace(t, `"total_bytes": 204965`, `"total_bytes": -204965`), "negative total_bytes"},
		{"fractional count", replace(t, `"file_count": 4`, `"file_count": 4.5`), "want an integer"},
		{"huge count", replace(t, `"file_count": 4`, `"file_count": 99999999999999999999`), "want an integer"},
		{"string count", replace(t, `"file_count": 4`, `"file_count": "4"`), "want a number"},
		{"bad created", replace(t, `2026-09-13T21:35:50Z`, `yesterday`), "not an RFC 3339"},
		{"manifest of another version", replace(t, "smoke/v/20260913T213513Z-13de9c/uploads", "smoke/v/20260913T213437Z-487888/uploads"), "does not lie under"},
		{"manifest outside the dataset", replace(t, `"lith-bench/published/smoke/v/20260913T213513Z-13de9c/uploads/`, `"other/v/20260913T213513Z-13de9c/uploads/`), "does not lie under"},
		{"manifest climbing out", replace(t, "/uploads/20260913-8cbf0a0b/", "/../../../x/"), `".." segment`},
		{"manifest is the folder", replace(t, "uploads/20260913-8cbf0a0b/manifest.json.gz", ""), "does not lie under"},
		{"resume checkpoint", replace(t, "/manifest.json.gz", "/manifest.partial.json.gz"), "not a finished upload's manifest"},
		{"encrypted manifest", replace(t, "/manifest.json.gz", "/manifest.encrypted.json.gz"), "not a finished upload's manifest"},
		{"manifest is the index", replace(t, "uploads/20260913-8cbf0a0b/manifest.json.gz", "index.lith"), "not a finished upload's manifest"},
		{"manifest not under uploads", replace(t, "/uploads/20260913-8cbf0a0b/", "/other/20260913-8cbf0a0b/"), "not a finished upload's manifest"},
		{"manifest deeper", replace(t, "/uploads/20260913-8cbf0a0b/", "/uploads/20260913-8cbf0a0b/x/"), "not a finished upload's manifest"},
		{"manifest directly under uploads", replace(t, "/uploads/20260913-8cbf0a0b/", "/uploads/"), "not a finished upload's manifest"},
		{"version id with a slash", strings.ReplaceAll(good, "20260913T213513Z-13de9c", "a/b"), "not allowed"},
		{"version id dot dot", strings.ReplaceAll(good, "20260913T213513Z-13de9c", ".."), "not a folder name"},
		{"bad previous version", replace(t, `"20260913T213437Z-487888"`, `"a b"`), "previous_version_id"},
		{"too large", good + strings.Repeat(" ", MaxPointerBytes), "at most 65536"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.data), "bkt", ds)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrBadPointer) || !strings.Contains(err.Error(), "s3://bkt/"+ds+"/CURRENT") ||
				!strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q: want ErrBadPointer naming the key and %q", err, c.want)
			}
		})
	}
}

// put writes a FileStore object.
func put(t testing.TB, dir, bucket, key string, data []byte) {
	t.Helper()
	p := filepath.Join(dir, bucket, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadPointerFileStore(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "b", ds+"/CURRENT", []byte(good))
	store := backend.NewFileStore(dir)
	ctx := context.Background()
	r, err := ReadPointer(ctx, store, "b", ds, "")
	if err != nil || r.NotModified || r.Pointer.VersionID != "20260913T213513Z-13de9c" || r.ETag == "" {
		t.Fatalf("read %+v, %v", r, err)
	}
	again, err := ReadPointer(ctx, store, "b", ds, r.ETag)
	if err != nil || !again.NotModified {
		t.Fatalf("unchanged pointer: %+v, %v", again, err)
	}
	// Missing: the store's not-found, naming the key.
	_, err = ReadPointer(ctx, store, "b", "nothing/here", "")
	if !errors.Is(err, backend.ErrNotFound) || !strings.Contains(err.Error(), "s3://b/nothing/here/CURRENT") {
		t.Fatalf("missing pointer: %v", err)
	}
	// Larger than 64 KiB: refused by its size.
	put(t, dir, "b", "big/CURRENT", bytes.Repeat([]byte(" "), MaxPointerBytes+1))
	_, err = ReadPointer(ctx, store, "b", "big", "")
	if !errors.Is(err, ErrBadPointer) || !errors.Is(err, backend.ErrTooBig) {
		t.Fatalf("big pointer: %v", err)
	}
	// Empty.
	put(t, dir, "b", "empty/CURRENT", nil)
	_, err = ReadPointer(ctx, store, "b", "empty", "")
	if !errors.Is(err, ErrBadPointer) {
		t.Fatalf("empty pointer: %v", err)
	}
}

func FuzzParsePointer(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(`{}`))
	f.Add([]byte(``))
	f.Add([]byte(good + `{}`))
	f.Add([]byte(strings.Replace(good, `"file_count": 4`, `"file_count": -4`, 1)))
	f.Add([]byte(strings.Replace(good, `"created"`, `"x": [1,{"y":null}], "created"`, 1)))
	f.Add([]byte(`{"schema":"cargoship.current/1","schema":"cargoship.current/1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, "b", ds)
		if err != nil {
			if !errors.Is(err, ErrBadPointer) || !strings.Contains(err.Error(), "s3://b/"+ds+"/CURRENT") {
				t.Fatalf("error %q does not wrap ErrBadPointer naming the key", err)
			}
			return
		}
		// Whatever is accepted obeys every rule.
		if p.Schema != Schema || p.VersionID == "" || p.IndexKey == "" || len(p.IndexSHA256) != 64 ||
			p.FileCount < 0 || p.TotalBytes < 0 || ValidVersionID(p.VersionID) != nil ||
			!strings.HasPrefix(p.ManifestKey, VersionPrefix(ds, p.VersionID)+"uploads/") || strings.Contains(p.ManifestKey, "/../") ||
			!strings.HasSuffix(p.ManifestKey, "/manifest.json.gz") && !strings.HasSuffix(p.ManifestKey, "/manifest.json") {
			t.Fatalf("accepted %+v", p)
		}
	})
}
