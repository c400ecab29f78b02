package archiveview

// The MAC of a shared index object (StoreIndexCache with a Secret). The
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

// ErrUnauthenticatedIndex is wrapped by every refusal of a shared index
// object that does not carry a valid MAC under its name (or is larger than
// the cache accepts): Fetch never hands such an object out, and Publish
// replaces it.
var ErrUnauthenticatedIndex = errors.New("index object not authenticated")

// MinIndexSecretBytes is the shortest secret NewIndexSecret accepts.
const MinIndexSecretBytes = 32

const (
	indexMACMagic   = "WIDXMAC1"
	indexMACTrailer = len(indexMACMagic) + 8 + sha256.Size
	indexMACDomain  = "wharf shared index object v1\x00"
	indexKeyIDLabel = "wharf shared index key id v1"
)

// IndexSecret is the key that authenticates a shared index cache's
// objects. Every replica sharing the cache holds the same one.
type IndexSecret struct {
	key []byte
	id  [8]byte
}

// NewIndexSecret wraps key (copied), which must hold at least
// MinIndexSecretBytes bytes.
func NewIndexSecret(key []byte) (*IndexSecret, error) {
	if len(key) < MinIndexSecretBytes {
		return nil, fmt.Errorf("index cache secret of %d bytes: want at least %d", len(key), MinIndexSecretBytes)
	}
	s := &IndexSecret{key: bytes.Clone(key)}
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(indexKeyIDLabel))
	copy(s.id[:], m.Sum(nil))
	return s, nil
}

// KeyID is the secret's public 8-byte id, hex (for logs).
func (s *IndexSecret) KeyID() string { return fmt.Sprintf("%x", s.id) }

// mac starts the HMAC of an object named name: the file's bytes follow.
func (s *IndexSecret) mac(name IndexName) hash.Hash {
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
func (s *IndexSecret) seal(m hash.Hash, n int64) []byte {
	var l [8]byte
	binary.LittleEndian.PutUint64(l[:], uint64(n))
	m.Write(l[:])
	t := make([]byte, 0, indexMACTrailer)
	t = append(t, indexMACMagic...)
	t = append(t, s.id[:]...)
	return m.Sum(t)
}

// trailerFor reads the index file r to its end and returns its trailer
// under name.
func (s *IndexSecret) trailerFor(name IndexName, r io.Reader) ([]byte, error) {
	m := s.mac(name)
	n, err := io.Copy(m, r)
	if err != nil {
		return nil, err
	}
	return s.seal(m, n), nil
}

// spoolIndexObject copies the object src to dst without its trailer. With
// a secret the trailer must be a valid MAC of what was copied under name
// (else an error wrapping ErrUnauthenticatedIndex; dst then holds bytes
// nothing may use). Without one a trailer, if any, is dropped unchecked.
// An object of more than limit bytes is refused.
func spoolIndexObject(dst io.Writer, src io.Reader, limit int64, secret *IndexSecret, name IndexName) error {
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
			return fmt.Errorf("%w: larger than %d bytes", ErrUnauthenticatedIndex, limit)
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
		return fmt.Errorf("%w: it carries no MAC (written by a replica without the secret, or forged)", ErrUnauthenticatedIndex)
	case !bytes.Equal(tail[len(indexMACMagic):len(indexMACMagic)+8], secret.id[:]):
		return fmt.Errorf("%w: MACed with another secret (key id %x, this replica's %x)", ErrUnauthenticatedIndex,
			tail[len(indexMACMagic):len(indexMACMagic)+8], secret.id)
	}
	want := secret.seal(m, written)
	if !hmac.Equal(want, tail) {
		return fmt.Errorf("%w: the MAC does not match (damaged, forged, or published under another name)", ErrUnauthenticatedIndex)
	}
	return nil
}

// trailed reads a file and then its trailer, as one seekable body.
type trailed struct {
	file    *io.SectionReader
	trailer []byte
	off     int64
}

func (t *trailed) Read(p []byte) (int, error) {
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

func (t *trailed) Seek(offset int64, whence int) (int64, error) {
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
