package auth

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestRestoreGrantYAML(t *testing.T) {
	tests := []struct {
		yaml string
		want RestoreGrant
		bad  string
	}{
		{"", RestoreGrant{}, ""},
		{"restore: true", RestoreGrant{}, ""},
		{"restore: false", RestoreGrant{Deny: true}, ""},
		{"restore: [photos]", RestoreGrant{Buckets: []string{"photos"}}, ""},
		{"restore:\n  - a\n  - b", RestoreGrant{Buckets: []string{"a", "b"}}, ""},
		{"restore: []", RestoreGrant{}, "empty list"},
		{"restore: yes-please", RestoreGrant{}, "want true, false"},
		{"restore: {a: b}", RestoreGrant{}, "want true, false"},
		{"restore: [[a]]", RestoreGrant{}, "list of bucket names"},
	}
	for _, tc := range tests {
		t.Run(tc.yaml, func(t *testing.T) {
			var k struct {
				Restore RestoreGrant `yaml:"restore,omitempty"`
			}
			err := yaml.Unmarshal([]byte(tc.yaml), &k)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("got %+v, %v; want an error containing %q", k.Restore, err, tc.bad)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(k.Restore, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", k.Restore, err, tc.want)
			}
			// Round trip.
			out, err := yaml.Marshal(k)
			if err != nil {
				t.Fatal(err)
			}
			var back struct {
				Restore RestoreGrant `yaml:"restore,omitempty"`
			}
			if err := yaml.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back.Restore, tc.want) {
				t.Fatalf("round trip %q: %+v %v", out, back.Restore, err)
			}
		})
	}
}

func TestCanRestore(t *testing.T) {
	v, err := New(Config{Keys: []Key{
		{AccessKey: "ALL", SecretKey: "s"},
		{AccessKey: "NONE", SecretKey: "s", Restore: RestoreGrant{Deny: true}},
		{AccessKey: "SOME", SecretKey: "s", Restore: RestoreGrant{Buckets: []string{"photos"}}},
		{AccessKey: "READONE", SecretKey: "s", Buckets: []string{"logs"}},
		{AccessKey: "READTWO", SecretKey: "s", Buckets: []string{"logs", "photos"}, Restore: RestoreGrant{Buckets: []string{"photos"}}},
	}, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ak     string
		bucket string
		want   bool
	}{
		{"ALL", "photos", true}, {"ALL", "logs", true},
		{"NONE", "photos", false},
		{"SOME", "photos", true}, {"SOME", "logs", false},
		{"READONE", "logs", true}, {"READONE", "photos", false},
		{"READTWO", "photos", true}, {"READTWO", "logs", false},
		{"", "photos", false}, // anonymous
	}
	for _, tc := range tests {
		id := Identity{}
		if tc.ak != "" {
			id = v.identity(tc.ak)
		}
		if got := id.CanRestore(tc.bucket); got != tc.want {
			t.Errorf("%s CanRestore(%s) = %v, want %v", tc.ak, tc.bucket, got, tc.want)
		}
	}
	for _, bad := range []Key{
		{AccessKey: "X", SecretKey: "s", Buckets: []string{"logs"}, Restore: RestoreGrant{Buckets: []string{"photos"}}},
		{AccessKey: "X", SecretKey: "s", Restore: RestoreGrant{Buckets: []string{""}}},
		{AccessKey: "X", SecretKey: "s", Restore: RestoreGrant{Deny: true, Buckets: []string{"a"}}},
	} {
		if _, err := New(Config{Keys: []Key{bad}}); err == nil || !strings.Contains(err.Error(), "restore grant") {
			t.Errorf("New(%+v): %v, want a restore grant error", bad, err)
		}
	}
}

func TestKeysFileRestoreGrant(t *testing.T) {
	p := filepath.Join(t.TempDir(), "keys.yaml")
	doc := "keys:\n  - {access_key: A, secret_key: s, buckets: [x, y], restore: [y]}\n  - {access_key: B, secret_key: s, restore: false}\n"
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := LoadKeysFile(p)
	want := []Key{{AccessKey: "A", SecretKey: "s", Buckets: []string{"x", "y"}, Restore: RestoreGrant{Buckets: []string{"y"}}},
		{AccessKey: "B", SecretKey: "s", Restore: RestoreGrant{Deny: true}}}
	if err != nil || !reflect.DeepEqual(keys, want) {
		t.Fatalf("%+v %v", keys, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("keys:\n  - {access_key: A, secret_key: s, buckets: [x], restore: [z]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeysFile(bad); err == nil || !strings.Contains(err.Error(), `"z"`) {
		t.Fatalf("grant outside the readable buckets: %v", err)
	}
}
