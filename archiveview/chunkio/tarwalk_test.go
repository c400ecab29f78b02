package chunkio

import (
	"archive/tar"
	"bytes"
	"errors"
	"strings"
	"testing"
)

// tarHeaderBlock returns the 512-byte header Go's tar writer puts right in
// front of the data of an entry (after any PAX records).
func tarHeaderBlock(t testing.TB, hdr *tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(hdr); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), b.Bytes()[b.Len()-512:]...)
}

func TestCheckTarHeader(t *testing.T) {
	long := "/src/" + strings.Repeat("d", 90) + "/" + strings.Repeat("n", 80) + ".txt"
	uni := "/src/données/été-ü.txt"
	longUni := "/src/" + strings.Repeat("é", 70) + "/file.txt"
	reg := func(name string, size int64) *tar.Header {
		return &tar.Header{Name: name, Size: size, Mode: 0o644, Typeflag: tar.TypeReg}
	}
	for _, tc := range []struct {
		name    string
		block   []byte
		tarName string
		length  int64
		ok      bool
	}{
		{"exact", tarHeaderBlock(t, reg("/src/a.txt", 10)), "/src/a.txt", 10, true},
		{"empty file", tarHeaderBlock(t, reg("/src/e", 0)), "/src/e", 0, true},
		{"ustar prefix split", tarHeaderBlock(t, &tar.Header{Name: long, Size: 5, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}), long, 5, true},
		{"pax long name truncated", tarHeaderBlock(t, &tar.Header{Name: long, Size: 5, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}), long, 5, true},
		{"pax non-ascii", tarHeaderBlock(t, reg(uni, 7)), uni, 7, true},
		{"pax long non-ascii", tarHeaderBlock(t, reg(longUni, 7)), longUni, 7, true},
		{"pax huge size", tarHeaderBlock(t, reg("/src/huge.bin", 1<<40)), "/src/huge.bin", 1 << 40, true},
		{"split part", tarHeaderBlock(t, reg("/src/big.bin.part2", 1000)), "/src/big.bin.part2", 1000, true},
		{"no name check for unnamed extents", tarHeaderBlock(t, reg("/src/x", 3)), "", 3, true},
		{"other member", tarHeaderBlock(t, reg("/src/b.txt", 10)), "/src/a.txt", 10, false},
		{"other member same prefix", tarHeaderBlock(t, reg("/src/a.txt.part1", 10)), "/src/a.txt", 10, false},
		{"wrong size", tarHeaderBlock(t, reg("/src/a.txt", 11)), "/src/a.txt", 10, false},
		{"directory", tarHeaderBlock(t, &tar.Header{Name: "/src/a.txt/", Mode: 0o755, Typeflag: tar.TypeDir}), "/src/a.txt/", 0, false},
		{"zero block", make([]byte, 512), "/src/a.txt", 0, false},
		{"file data", bytes.Repeat([]byte("data"), 128), "/src/a.txt", 10, false},
		{"short", []byte("abc"), "x", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkTarHeader(tc.block, tc.tarName, tc.length)
			if tc.ok && err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrWrongMember) {
				t.Fatalf("err %v, want ErrWrongMember", err)
			}
		})
	}
}

func TestCheckTarHeaderCorruptChecksum(t *testing.T) {
	b := tarHeaderBlock(t, &tar.Header{Name: "/src/a.txt", Size: 10, Mode: 0o644, Typeflag: tar.TypeReg})
	b[0] ^= 1 // name byte changed, checksum now wrong
	if err := checkTarHeader(b, "/src/a.txt", 10); !errors.Is(err, ErrWrongMember) {
		t.Fatalf("corrupt header accepted: %v", err)
	}
}

func TestParseNumericBase256(t *testing.T) {
	b := make([]byte, 12)
	b[0] = 0x80
	b[11] = 0x05
	b[10] = 0x01
	if n, err := parseNumeric(b); err != nil || n != 0x105 {
		t.Fatalf("base-256: %d %v", n, err)
	}
	b[0] = 0xff
	if _, err := parseNumeric(b); err == nil {
		t.Fatal("negative base-256 accepted")
	}
}

// FuzzCheckTarHeader: arbitrary blocks never panic, and only a block with a
// valid checksum and a regular type can pass.
func FuzzCheckTarHeader(f *testing.F) {
	f.Add(tarHeaderBlock(f, &tar.Header{Name: "/src/a.txt", Size: 10, Mode: 0o644, Typeflag: tar.TypeReg}), "/src/a.txt", int64(10))
	f.Add(tarHeaderBlock(f, &tar.Header{Name: "/s/" + strings.Repeat("x", 150), Size: 1, Mode: 0o644, Typeflag: tar.TypeReg}), "/s/"+strings.Repeat("x", 150), int64(1))
	f.Add(tarHeaderBlock(f, &tar.Header{Name: "/s/é", Size: 1 << 40, Mode: 0o644, Typeflag: tar.TypeReg}), "/s/é", int64(1<<40))
	f.Add(make([]byte, 512), "", int64(0))
	f.Add([]byte("short"), "x", int64(-1))
	f.Fuzz(func(t *testing.T, block []byte, name string, length int64) {
		err := checkTarHeader(block, name, length)
		if err == nil {
			if len(block) != 512 {
				t.Fatalf("accepted a %d-byte block", len(block))
			}
			if tf := block[156]; tf != tar.TypeReg && tf != typeRegOld && tf != tar.TypeCont {
				t.Fatalf("accepted type %q", tf)
			}
		} else if !errors.Is(err, ErrWrongMember) {
			t.Fatalf("error without ErrWrongMember: %v", err)
		}
	})
}
