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
