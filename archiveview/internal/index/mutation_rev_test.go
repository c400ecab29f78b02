package index

// Tests written for the hand mutants of the rev-mutation audit that no
// test killed (TESTING.md, "Mutation audit (rev-mutation)").

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestForgedHeaderRefusedAfterHeader: the header is checked before any
// of the file is read. An object whose header has the right magic and
// the (public) key id but a MAC that is not the secret's declares a large
// length: it is refused after its 56 header bytes, with nothing spooled,
// rather than after downloading the length it declares (the trailer would
// refuse it too, but only at the end).
func TestForgedHeaderRefusedAfterHeader(t *testing.T) {
	secret, err := NewSecret(bytes.Repeat([]byte("k"), MinSecretBytes))
	if err != nil {
		t.Fatal(err)
	}
	name := ObjectName{Bucket: "b", ManifestKey: "m.json.gz", ETag: "e"}
	const declared = 1 << 20
	for _, tc := range []struct {
		name string
		mac  func(h []byte) // writes the header's MAC field
	}{
		{"zero MAC", func(h []byte) {}},
		{"MAC of another length", func(h []byte) { copy(h[indexMACHeader-32:], secret.header(name, declared-1)[indexMACHeader-32:]) }},
		{"MAC under another name", func(h []byte) {
			copy(h[indexMACHeader-32:], secret.header(ObjectName{Bucket: "b", ManifestKey: "other", ETag: "e"}, declared)[indexMACHeader-32:])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := make([]byte, indexMACHeader)
			copy(h, indexHeaderMagic)
			copy(h[len(indexHeaderMagic):], secret.id[:])
			binary.LittleEndian.PutUint64(h[len(indexHeaderMagic)+8:], declared)
			tc.mac(h)
			obj := append(h, make([]byte, declared+indexMACTrailer)...)
			src := &countingReader{r: bytes.NewReader(obj)}
			var out bytes.Buffer
			err := SpoolObject(&out, src, 4<<20, secret, name)
			if !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("forged header: %v, want ErrUnauthenticated", err)
			}
			if out.Len() != 0 || src.n > int64(indexMACHeader) {
				t.Fatalf("forged header refused after reading %d bytes of the object and spooling %d; want at most the %d-byte header and nothing spooled",
					src.n, out.Len(), indexMACHeader)
			}
		})
	}
}

// TestSealedObjectOverLimit: with a secret, an authentic object (a valid
// seal under its name) larger than the limit is refused from its header's
// length, before its file is read; one that fits exactly is accepted.
// TestObjectTooLarge checks only the path without a secret.
func TestSealedObjectOverLimit(t *testing.T) {
	secret, err := NewSecret(bytes.Repeat([]byte("k"), MinSecretBytes))
	if err != nil {
		t.Fatal(err)
	}
	name := ObjectName{Bucket: "b", ManifestKey: "m.json.gz", ETag: "e"}
	file := bytes.Repeat([]byte("index bytes "), 100)
	header, trailer, err := secret.Seal(name, bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	obj := append(append(bytes.Clone(header), file...), trailer...)
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{
		{int64(len(obj)), true},
		{int64(len(obj)) - 1, false},
		{int64(len(file)), false},
		{int64(len(file)) / 2, false},
	} {
		src := &countingReader{r: bytes.NewReader(obj)}
		var out bytes.Buffer
		err := SpoolObject(&out, src, tc.limit, secret, name)
		if tc.ok {
			if err != nil || !bytes.Equal(out.Bytes(), file) {
				t.Fatalf("limit %d (the object's size): err %v, %d bytes spooled of %d", tc.limit, err, out.Len(), len(file))
			}
			continue
		}
		if !errors.Is(err, ErrUnauthenticated) || out.Len() != 0 || src.n > int64(indexMACHeader) {
			t.Fatalf("a sealed object of %d bytes under a limit of %d: err %v, read %d bytes, spooled %d; want ErrUnauthenticated after the header, nothing spooled",
				len(obj), tc.limit, err, src.n, out.Len())
		}
	}
}
