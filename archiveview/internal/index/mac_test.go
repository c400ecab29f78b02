package index

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// FuzzObjectMAC: SpoolObject, the parser of a shared index
// object's header and trailer. A file sealed under a name spools back to
// exactly the file (read in any chunking); the same object under another
// name, with any byte changed, cut, extended, or without its header or
// trailer, is refused with
// ErrUnauthenticated; arbitrary objects never panic and are accepted
// only if they are a valid seal.
func FuzzObjectMAC(f *testing.F) {
	f.Add([]byte("WHARFIDX index bytes"), "bkt", "pre/manifest.json.gz", "etag", uint16(3))
	f.Add([]byte{}, "", "", "", uint16(0))
	f.Add(bytes.Repeat([]byte{0xa5}, 70000), "b", "k", "e", uint16(65535))
	secret, err := NewSecret(bytes.Repeat([]byte("s"), MinSecretBytes))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, file []byte, bucket, key, etag string, pos uint16) {
		name := ObjectName{Bucket: bucket, ManifestKey: key, ETag: etag}
		header, trailer, err := secret.Seal(name, bytes.NewReader(file))
		if err != nil {
			t.Fatal(err)
		}
		obj := append(append(bytes.Clone(header), file...), trailer...)
		spool := func(obj []byte, n ObjectName, s *Secret) ([]byte, error) {
			var out bytes.Buffer
			err := SpoolObject(&out, iotest.OneByteReader(bytes.NewReader(obj)), 1<<20, s, n)
			return out.Bytes(), err
		}
		got, err := spool(obj, name, secret)
		if err != nil || !bytes.Equal(got, file) {
			t.Fatalf("a sealed file: err %v, %d bytes back of %d", err, len(got), len(file))
		}
		if got, err := spool(obj, name, nil); err != nil || !bytes.Equal(got, file) {
			t.Fatalf("without a secret the header and trailer are not stripped: err %v", err)
		}
		if got, err := spool(file, name, nil); err != nil || !bytes.Equal(got, file) {
			t.Fatalf("without a secret a bare file does not spool back: err %v", err)
		}
		refused := func(what string, obj []byte, n ObjectName) {
			t.Helper()
			if _, err := spool(obj, n, secret); !errors.Is(err, ErrUnauthenticated) {
				t.Errorf("%s: %v, want ErrUnauthenticated", what, err)
			}
		}
		flipped := bytes.Clone(obj)
		flipped[int(pos)%len(flipped)] ^= 1
		refused("a flipped byte", flipped, name)
		refused("cut", obj[:len(obj)-1-int(pos)%len(obj)], name)
		refused("extended", append(bytes.Clone(obj), byte(pos)), name)
		refused("another ETag", obj, ObjectName{Bucket: bucket, ManifestKey: key, ETag: etag + "x"})
		refused("another key", obj, ObjectName{Bucket: bucket, ManifestKey: key + "x", ETag: etag})
		if key != "" {
			refused("fields shifted", obj, ObjectName{Bucket: bucket + key, ManifestKey: "", ETag: etag})
		}
		refused("no trailer", append(bytes.Clone(header), file...), name)
		refused("no header", append(bytes.Clone(file), trailer...), name)
		refused("neither", file, name)
		// Arbitrary bytes: accepted only when they are this seal.
		if got, err := spool(file, name, secret); err == nil {
			t.Errorf("unsealed bytes accepted (%d bytes)", len(got))
		}
		// The body Publish uploads is the same object, and seeks.
		body := NewTrailed(header, io.NewSectionReader(bytes.NewReader(file), 0, int64(len(file))), trailer)
		for range 2 {
			b, err := io.ReadAll(body)
			if err != nil || !bytes.Equal(b, obj) {
				t.Fatalf("Trailed body: err %v, %d bytes, want %d", err, len(b), len(obj))
			}
			body.Seek(0, io.SeekStart)
		}
	})
}

// TestSecretShort: a secret under MinSecretBytes is refused.
func TestSecretShort(t *testing.T) {
	if _, err := NewSecret(make([]byte, MinSecretBytes-1)); err == nil {
		t.Error("a 31-byte secret accepted")
	}
}

// TestObjectTooLarge: an object over the limit is refused (the spool
// stops there).
func TestObjectTooLarge(t *testing.T) {
	var out bytes.Buffer
	err := SpoolObject(&out, bytes.NewReader(make([]byte, 1000)), 999, nil, ObjectName{})
	if !errors.Is(err, ErrUnauthenticated) || out.Len() > 999 {
		t.Errorf("err %v, %d bytes spooled", err, out.Len())
	}
}
