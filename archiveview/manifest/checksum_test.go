package manifest

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestParseChecksum(t *testing.T) {
	sum := sha256.Sum256([]byte("wharf"))
	lower := hex.EncodeToString(sum[:])
	tests := []struct {
		in      string
		ok      bool
		wantErr bool
	}{
		{"", false, false},
		{"sha256:", false, false},
		{lower, true, false},
		{strings.ToUpper(lower), true, false},
		{"sha256:" + lower, true, false},
		{"SHA256:" + lower, true, false},
		{lower[:63], false, true},
		{lower + "0", false, true},
		{lower[:62] + "zz", false, true},
		{"abc", false, true},
		{"md5:" + lower, false, true},
		{" " + lower, false, true},
	}
	for _, tt := range tests {
		got, ok, err := ParseChecksum(tt.in)
		if ok != tt.ok || (err != nil) != tt.wantErr {
			t.Errorf("ParseChecksum(%q) = ok %v, err %v; want ok %v, err %v", tt.in, ok, err, tt.ok, tt.wantErr)
		}
		if ok && got != sum {
			t.Errorf("ParseChecksum(%q) = %x, want %x", tt.in, got, sum)
		}
	}
}

func TestParseMD5(t *testing.T) {
	sum := md5.Sum([]byte("wharf"))
	lower := hex.EncodeToString(sum[:])
	tests := []struct {
		in      string
		ok      bool
		wantErr bool
	}{
		{"", false, false},
		{lower, true, false},
		{strings.ToUpper(lower), true, false},
		{"md5:" + lower, true, false},
		{lower[:31], false, true},
		{lower + lower, false, true},
		{"g" + lower[1:], false, true},
	}
	for _, tt := range tests {
		got, ok, err := ParseMD5(tt.in)
		if ok != tt.ok || (err != nil) != tt.wantErr {
			t.Errorf("ParseMD5(%q) = ok %v, err %v; want ok %v, err %v", tt.in, ok, err, tt.ok, tt.wantErr)
		}
		if ok && got != sum {
			t.Errorf("ParseMD5(%q) = %x, want %x", tt.in, got, sum)
		}
	}
}

func FuzzParseChecksum(f *testing.F) {
	for _, s := range []string{"", "sha256:", "abc", "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08", "md5:0cc175b9c0f1b6a831c399e269772661"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sum, ok, err := ParseChecksum(s)
		if ok && err != nil || !ok && err == nil && s != "" && !strings.EqualFold(s, "sha256:") {
			t.Fatalf("ParseChecksum(%q) = ok %v, err %v", s, ok, err)
		}
		if ok {
			body := strings.ToLower(s)
			body = strings.TrimPrefix(body, "sha256:")
			if hex.EncodeToString(sum[:]) != body {
				t.Fatalf("ParseChecksum(%q) = %x", s, sum)
			}
		}
		md, ok, err := ParseMD5(s)
		if ok && err != nil {
			t.Fatalf("ParseMD5(%q) = ok and %v", s, err)
		}
		if ok && hex.EncodeToString(md[:]) != strings.TrimPrefix(strings.ToLower(s), "md5:") {
			t.Fatalf("ParseMD5(%q) = %x", s, md)
		}
	})
}
