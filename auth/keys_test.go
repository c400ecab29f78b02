package auth

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadKeysFile(t *testing.T) {
	cases := []struct {
		name    string
		yaml    string
		want    []Key
		wantErr string
	}{
		{"two keys, grants and awkward secret", `
keys:
  - access_key: AKIAONE
    secret_key: "wJalr+XUt nFEMI/K7%MDENG/ü"
  - access_key: AKIATWO
    secret_key: two
    buckets: [photos, logs]
`, []Key{{AccessKey: "AKIAONE", SecretKey: "wJalr+XUt nFEMI/K7%MDENG/ü"}, {AccessKey: "AKIATWO", SecretKey: "two", Buckets: []string{"photos", "logs"}}}, ""},
		{"misspelt field", "keys:\n  - access_key: A\n    secret_key: s\n    bucket: [x]\n", nil, "bucket"},
		{"duplicate key", "keys:\n  - {access_key: A, secret_key: s}\n  - {access_key: A, secret_key: t}\n", nil, "configured twice"},
		{"empty secret", "keys:\n  - {access_key: A, secret_key: \"\"}\n", nil, "empty secret"},
		{"no keys", "keys: []\n", nil, "no keys"},
		{"empty file", "", nil, "empty"},
		{"not yaml", "keys: [\n", nil, "keys file"},
		// A second document's keys were silently dropped: the keys in it
		// got InvalidAccessKeyId with no word at start.
		{"second document", "keys:\n  - {access_key: A, secret_key: s}\n---\nkeys:\n  - {access_key: B, secret_key: t}\n", nil, "more than one YAML document"},
		{"trailing document marker", "keys:\n  - {access_key: A, secret_key: s}\n---\n", []Key{{AccessKey: "A", SecretKey: "s"}}, ""},
	}
	dir := t.TempDir()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, "keys"+string(rune('a'+i))+".yaml")
			if err := os.WriteFile(p, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := LoadKeysFile(p)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), p) {
					t.Fatalf("want error naming %s and containing %q, got %v", p, c.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		p := filepath.Join(dir, "nope.yaml")
		if _, err := LoadKeysFile(p); err == nil || !strings.Contains(err.Error(), p) || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("want a not-exist error naming %s, got %v", p, err)
		}
	})
}

func TestKeysFromEnv(t *testing.T) {
	cases := []struct {
		name, ak, sk string
		want         []Key
		wantErr      bool
	}{
		{"neither", "", "", nil, false},
		{"both", "AKIAENV", "s+e c/ret", []Key{{AccessKey: "AKIAENV", SecretKey: "s+e c/ret"}}, false},
		{"only access key", "AKIAENV", "", nil, true},
		{"only secret", "", "x", nil, true},
		{"bad access key", "AK ENV", "x", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("WHARF_ACCESS_KEY", c.ak)
			t.Setenv("WHARF_SECRET_KEY", c.sk)
			got, err := KeysFromEnv()
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, c.wantErr)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
