package index

// The MAC of a shared index object (archiveview.StoreIndexCache with a
// Secret). The
// object is the index file, unchanged, followed by a 48-byte trailer:
//
//	magic "WIDXMAC1" | key id [8] | HMAC-SHA256 [32]
//
// The HMAC, keyed with the fleet's secret, covers
//
//	"wharf shared index object v1" 0x00 | bucket | manifest key |
//	manifest ETag | every byte of the index file | the file's length u64
//
// (strings as a u32 length and the bytes, little-endian), so an object is
// bound to its name: another archive's index, or an older manifest
// version's, fails the MAC under this name as surely as a changed byte. The
// key id (the first 8 bytes of an HMAC of a fixed label) only tells an
// object MACed with another secret (a rotation) from a forged one in the
// log; it is not secret and proves nothing.

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
)

// ObjectName is what a shared index object is bound to (archiveview's
// IndexName: the bucket, the manifest key and the manifest's ETag).
type ObjectName struct {
	Bucket, ManifestKey, ETag string
}

// ErrUnauthenticated is wrapped by every refusal of a shared index
// object that does not carry a valid MAC under its name (or is larger than
// the cache accepts): Fetch never hands such an object out, and Publish
// replaces it.
var ErrUnauthenticated = errors.New("index object not authenticated")

// MinSecretBytes is the shortest secret NewSecret accepts.
const MinSecretBytes = 32

const (
	indexMACMagic   = "WIDXMAC1"
	indexMACTrailer = len(indexMACMagic) + 8 + sha256.Size
	indexMACDomain  = "wharf shared index object v1\x00"
	indexKeyIDLabel = "wharf shared index key id v1"
)

// Secret is the key that authenticates a shared index cache's
// objects. Every replica sharing the cache holds the same one.
type Secret struct {
	key []byte
	id  [8]byte
}

// NewSecret wraps key (copied), which must hold at least
// MinSecretBytes bytes.
func NewSecret(key []byte) (*Secret, error) {
	if len(key) < MinSecretBytes {
		return nil, fmt.Errorf("index cache secret of %d bytes: want at least %d", len(key), MinSecretBytes)
	}
	s := &Secret{key: bytes.Clone(key)}
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(indexKeyIDLabel))
	copy(s.id[:], m.Sum(nil))
	return s, nil
}

// KeyID is the secret's public 8-byte id, hex (for logs).
func (s *Secret) KeyID() string { return fmt.Sprintf("%x", s.id) }

// mac starts the HMAC of an object named name: the file's bytes follow.
func (s *Secret) mac(name ObjectName) hash.Hash {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(indexMACDomain))
	for _, f := range []string{name.Bucket, name.ManifestKey, name.ETag} {
		var n [4]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(f)))
		m.Write(n[:])
		m.Write([]byte(f))
	}
	return m
}

// seal ends the HMAC m over a file of n bytes and returns the trailer.
func (s *Secret) seal(m hash.Hash, n int64) []byte {
	var l [8]byte
	binary.LittleEndian.PutUint64(l[:], uint64(n))
	m.Write(l[:])
	t := make([]byte, 0, indexMACTrailer)
	t = append(t, indexMACMagic...)
	t = append(t, s.id[:]...)
	return m.Sum(t)
}

// TrailerFor reads the index file r to its end and returns its trailer
// under name.
func (s *Secret) TrailerFor(name ObjectName, r io.Reader) ([]byte, error) {
	m := s.mac(name)
	n, err := io.Copy(m, r)
	if err != nil {
		return nil, err
	}
	return s.seal(m, n), nil
}

// SpoolObject copies the object src to dst without its trailer. With
// a secret the trailer must be a valid MAC of what was copied under name
// (else an error wrapping ErrUnauthenticated; dst then holds bytes
// nothing may use). Without one a trailer, if any, is dropped unchecked.
// An object of more than limit bytes is refused.
func SpoolObject(dst io.Writer, src io.Reader, limit int64, secret *Secret, name ObjectName) error {
	var m hash.Hash
	if secret != nil {
		m = secret.mac(name)
	}
	buf := make([]byte, indexMACTrailer+64<<10)
	held := 0 // bytes at the front of buf not yet written (at most the trailer)
	var total, written int64
	for {
		n, err := src.Read(buf[held:])
		held += n
		total += int64(n)
		if total > limit {
			return fmt.Errorf("%w: larger than %d bytes", ErrUnauthenticated, limit)
		}
		if out := held - indexMACTrailer; out > 0 {
			if _, werr := dst.Write(buf[:out]); werr != nil {
				return werr
			}
			if m != nil {
				m.Write(buf[:out])
			}
			written += int64(out)
			held = copy(buf, buf[out:held])
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	tail := buf[:held]
	hasTrailer := held == indexMACTrailer && string(tail[:len(indexMACMagic)]) == indexMACMagic
	if secret == nil {
		if !hasTrailer {
			_, err := dst.Write(tail)
			return err
		}
		return nil
	}
	switch {
	case !hasTrailer:
		return fmt.Errorf("%w: it carries no MAC (written by a replica without the secret, or forged)", ErrUnauthenticated)
	case !bytes.Equal(tail[len(indexMACMagic):len(indexMACMagic)+8], secret.id[:]):
		return fmt.Errorf("%w: MACed with another secret (key id %x, this replica's %x)", ErrUnauthenticated,
			tail[len(indexMACMagic):len(indexMACMagic)+8], secret.id)
	}
	want := secret.seal(m, written)
	if !hmac.Equal(want, tail) {
		return fmt.Errorf("%w: the MAC does not match (damaged, forged, or published under another name)", ErrUnauthenticated)
	}
	return nil
}

// NewTrailed is the body Publish uploads: file, then its trailer, as one
// seekable reader.
func NewTrailed(file *io.SectionReader, trailer []byte) *Trailed {
	return &Trailed{file: file, trailer: trailer}
}

// Trailed reads a file and then its trailer, as one seekable body.
type Trailed struct {
	file    *io.SectionReader
	trailer []byte
	off     int64
}

func (t *Trailed) Read(p []byte) (int, error) {
	size := t.file.Size()
	if t.off < size {
		n, err := t.file.ReadAt(p[:min(int64(len(p)), size-t.off)], t.off)
		t.off += int64(n)
		if err == io.EOF {
			err = nil
		}
		return n, err
	}
	rest := t.off - size
	if rest >= int64(len(t.trailer)) {
		return 0, io.EOF
	}
	n := copy(p, t.trailer[rest:])
	t.off += int64(n)
	return n, nil
}

func (t *Trailed) Seek(offset int64, whence int) (int64, error) {
	end := t.file.Size() + int64(len(t.trailer))
	switch whence {
	case io.SeekCurrent:
		offset += t.off
	case io.SeekEnd:
		offset += end
	}
	if offset < 0 {
		return 0, errors.New("seek before the start")
	}
	t.off = offset
	return offset, nil
}
