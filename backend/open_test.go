package backend

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseObjectURL(t *testing.T) {
	tests := []struct {
		in          string
		bucket, key string
		ok          bool
	}{
		{"s3://bkt/uploads/x/manifest.json", "bkt", "uploads/x/manifest.json", true},
		{"bkt/uploads/x/manifest.json.gz", "bkt", "uploads/x/manifest.json.gz", true},
		{"s3://bkt/k", "bkt", "k", true},
		{"s3://bkt//double//slash", "bkt", "/double//slash", true},
		{"s3://bkt/a/../b", "bkt", "a/../b", true},
		{"s3://bkt/sp ace%20?q#f", "bkt", "sp ace%20?q#f", true},
		{"s3://my.bucket-1/ü/日本", "my.bucket-1", "ü/日本", true},
		{"s3://bkt/", "", "", false},
		{"s3://bkt", "", "", false},
		{"s3:///key", "", "", false},
		{"s3://", "", "", false},
		{"bkt", "", "", false},
		{"", "", "", false},
		{"/bkt/key", "", "", false},
		{"http://host/bkt/key", "", "", false},
		{"file:///data/bkt/key", "", "", false},
		{"S3://bkt/key", "", "", false},
		{"s3://b kt/key", "", "", false},
		{"s3://../key", "", "", false},
		{"s3://bkt/k\x00ey", "", "", false},
		{"s3://bkt/\xff", "", "", false},
		{"s3://bkt/" + strings.Repeat("k", 1025), "", "", false},
		{"s3://bkt/" + strings.Repeat("k", 1024), "bkt", strings.Repeat("k", 1024), true},
	}
	for _, tc := range tests {
		b, k, err := ParseObjectURL(tc.in)
		if tc.ok {
			if err != nil || b != tc.bucket || k != tc.key {
				t.Errorf("ParseObjectURL(%q) = %q, %q, %v; want %q, %q", tc.in, b, k, err, tc.bucket, tc.key)
			}
			continue
		}
		if err == nil {
			t.Errorf("ParseObjectURL(%q) = %q, %q; want an error", tc.in, b, k)
		} else if !strings.Contains(err.Error(), strings.ToValidUTF8(tc.in[:min(len(tc.in), 40)], "\ufffd")) && !strings.Contains(err.Error(), "\\x") {
			t.Errorf("error %q does not name the URL %q", err, tc.in)
		}
	}
}

func FuzzParseObjectURL(f *testing.F) {
	for _, s := range []string{"s3://bkt/key", "bkt/key", "s3://b/", "s3:///k", "http://h/b/k",
		"s3://bkt/a/../b", "s3://b/k\x00", "s3://b/\xff", "s3://s3://b/k", "b/s3://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		b, k, err := ParseObjectURL(in)
		if err != nil {
			if b != "" || k != "" {
				t.Fatalf("%q: error with results %q %q", in, b, k)
			}
			return
		}
		if b == "" || k == "" || strings.Contains(b, "/") || !utf8.ValidString(k) ||
			strings.ContainsRune(k, 0) || len(k) > 1024 {
			t.Fatalf("%q: accepted bad parts %q %q", in, b, k)
		}
		// The parts rebuild the input exactly (nothing decoded or cleaned),
		// and the canonical form parses back to the same parts.
		if in != "s3://"+b+"/"+k && in != b+"/"+k {
			t.Fatalf("%q: parts %q %q do not rebuild it", in, b, k)
		}
		b2, k2, err := ParseObjectURL("s3://" + b + "/" + k)
		if err != nil || b2 != b || k2 != k {
			t.Fatalf("%q: canonical form parses to %q %q %v", in, b2, k2, err)
		}
	})
}

// TestNewS3StoreRefusesBadEndpoint: an endpoint that is not an http(s) URL
// (a bare host:port, a path) is refused when the store is built, for every
// command, instead of failing at the first request.
func TestNewS3StoreRefusesBadEndpoint(t *testing.T) {
	for _, tc := range []struct {
		endpoint, want string
	}{
		{"localhost:9000", "want an http:// or https:// URL"},
		{"/tmp/minio", "want an http:// or https:// URL"},
		{"http://", "no host"},
		{"https://user:pw@s3.example.com", "no user info"},
		{"http://127.0.0.1:9000#x", "no user info"},
	} {
		_, err := NewS3Store(context.Background(), S3Config{Endpoint: tc.endpoint, Anonymous: true})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.endpoint) {
			t.Errorf("endpoint %q: error %v, want one naming it and %q", tc.endpoint, err, tc.want)
		}
	}
	for _, region := range []string{"http://127.0.0.1:9000", "us east 1", "eu-west-1/"} {
		_, err := NewS3Store(context.Background(), S3Config{Region: region, Anonymous: true})
		if err == nil || !strings.Contains(err.Error(), "S3 region") {
			t.Errorf("region %q: error %v, want the region refused", region, err)
		}
	}
	for _, ok := range []string{"", "http://127.0.0.1:9000", "https://s3.example.com", "http://[::1]:9000/prefix"} {
		if _, err := NewS3Store(context.Background(), S3Config{Endpoint: ok, Anonymous: true}); err != nil {
			t.Errorf("endpoint %q refused: %v", ok, err)
		}
	}
}
