package index

// The MAC of a shared index object (archiveview.StoreIndexCache with a
// Secret). The object is a 56-byte header, the index file unchanged, and a
// 48-byte trailer:
//
//	header:  magic "WIDXHDR2" | key id [8] | file length u64 | HMAC-SHA256 [32]
//	trailer: magic "WIDXMAC2" | key id [8] | HMAC-SHA256 [32]
//
// The trailer's HMAC, keyed with the fleet's secret, covers
//
//	"wharf shared index object v2" 0x00 | bucket | manifest key |
//	manifest ETag | every byte of the index file | the file's length u64
//
// and the header's covers "wharf shared index object header v2" 0x00, the
// same three strings and the file's length (strings as a u32 length and
// the bytes, little-endian), so an object is bound to its name: another
// archive's index, or an older manifest version's, fails the MAC under
// this name as surely as a changed byte. The header is checked first: a
// reader takes the file's length from an authenticated header, so an
// object that is not a secret holder's seal under this name is refused
// after its first 56 bytes, and no more than the declared length is ever
// spooled (a writer of the shared prefix without the secret cannot make
// replicas download a large object before the trailer refuses it). The
// key id (the first 8 bytes of an HMAC of a fixed label) only tells an
// object MACed with another secret (a rotation) from a forged one in the
// log; it is not secret and proves nothing. Objects of the earlier format
// (trailer "WIDXMAC1", no header) carry no header and are refused like
// any object without a MAC (and replaced by Publish).

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
	indexMACMagic     = "WIDXMAC2"
	indexMACTrailer   = len(indexMACMagic) + 8 + sha256.Size
	indexMACDomain    = "wharf shared index object v2\x00"
	indexHeaderMagic  = "WIDXHDR2"
	indexMACHeader    = len(indexHeaderMagic) + 8 + 8 + sha256.Size
	indexHeaderDomain = "wharf shared index object header v2\x00"
	indexKeyIDLabel   = "wharf shared index key id v1"
)

// Overhead is what a sealed object adds to the index file: its header
// and its trailer.
const Overhead = indexMACHeader + indexMACTrailer

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
func (s *Secret) mac(name ObjectName) hash.Hash { return s.macIn(indexMACDomain, name) }

// header is the header of a file of n bytes sealed under name.
func (s *Secret) header(name ObjectName, n int64) []byte {
	m := s.macIn(indexHeaderDomain, name)
	var l [8]byte
	binary.LittleEndian.PutUint64(l[:], uint64(n))
	m.Write(l[:])
	h := make([]byte, 0, indexMACHeader)
	h = append(h, indexHeaderMagic...)
	h = append(h, s.id[:]...)
	h = append(h, l[:]...)
	return m.Sum(h)
}

// macIn starts an HMAC in domain over name's three strings.
func (s *Secret) macIn(domain string, name ObjectName) hash.Hash {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(domain))
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

// Seal reads the index file r to its end and returns the header and the
// trailer that make it an object under name.
func (s *Secret) Seal(name ObjectName, r io.Reader) (header, trailer []byte, err error) {
	m := s.mac(name)
	n, err := io.Copy(m, r)
	if err != nil {
		return nil, nil, err
	}
	return s.header(name, n), s.seal(m, n), nil
}

// SpoolObject copies the object src to dst without its header and
// trailer. With a secret, the header is checked first (a valid MAC of the
// file's length under name), then exactly that many bytes are copied, and
// the trailer must be a valid MAC of what was copied under name, with
// nothing after it; any failure is an error wrapping ErrUnauthenticated
// (dst then holds bytes nothing may use), and no more of src is read than
// the header promised. Without one, a header and a trailer, if any, are
// dropped unchecked. An object of more than limit bytes is refused.
func SpoolObject(dst io.Writer, src io.Reader, limit int64, secret *Secret, name ObjectName) error {
	if secret == nil {
		return spoolTrusted(dst, src, limit)
	}
	var h [indexMACHeader]byte
	if _, err := io.ReadFull(src, h[:]); err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return err
	} else if err != nil || string(h[:len(indexHeaderMagic)]) != indexHeaderMagic {
		return fmt.Errorf("%w: it carries no MAC (written by a replica without the secret or by an older wharf, or forged)", ErrUnauthenticated)
	}
	id := h[len(indexHeaderMagic) : len(indexHeaderMagic)+8]
	if !bytes.Equal(id, secret.id[:]) {
		return fmt.Errorf("%w: MACed with another secret (key id %x, this replica's %x)", ErrUnauthenticated, id, secret.id)
	}
	n := binary.LittleEndian.Uint64(h[len(indexHeaderMagic)+8:])
	if !hmac.Equal(secret.header(name, int64(n)), h[:]) {
		return fmt.Errorf("%w: the MAC does not match (damaged, forged, or published under another name)", ErrUnauthenticated)
	}
	if n > uint64(limit) || int64(n) > limit-int64(Overhead) {
		return fmt.Errorf("%w: larger than %d bytes", ErrUnauthenticated, limit)
	}
	m := secret.mac(name)
	if _, err := io.CopyN(io.MultiWriter(dst, m), src, int64(n)); err != nil {
		if err == io.EOF {
			return fmt.Errorf("%w: cut short of the %d bytes its header declares", ErrUnauthenticated, n)
		}
		return err
	}
	var tr [indexMACTrailer + 1]byte
	got, err := io.ReadFull(src, tr[:])
	switch {
	case err != nil && err != io.ErrUnexpectedEOF && err != io.EOF:
		return err
	case got != indexMACTrailer:
		return fmt.Errorf("%w: %d bytes after the file, want the %d-byte trailer alone", ErrUnauthenticated, got, indexMACTrailer)
	}
	if !hmac.Equal(secret.seal(m, int64(n)), tr[:indexMACTrailer]) {
		return fmt.Errorf("%w: the MAC does not match (damaged, forged, or published under another name)", ErrUnauthenticated)
	}
	return nil
}

// spoolTrusted is SpoolObject without a secret: the object is streamed
// through a fixed buffer, its header (if any) dropped from the front and
// its trailer (if any) held back at the end and dropped.
func spoolTrusted(dst io.Writer, src io.Reader, limit int64) error {
	buf := make([]byte, indexMACTrailer+64<<10)
	held := 0 // bytes at the front of buf not yet written (at most the trailer)
	var total int64
	front := true // the header, if any, not yet dropped
	for {
		n, err := src.Read(buf[held:])
		held += n
		total += int64(n)
		if total > limit {
			return fmt.Errorf("%w: larger than %d bytes", ErrUnauthenticated, limit)
		}
		if front && (held >= indexMACHeader || err != nil) {
			front = false
			if held >= indexMACHeader && string(buf[:len(indexHeaderMagic)]) == indexHeaderMagic {
				held = copy(buf, buf[indexMACHeader:held])
			}
		}
		if out := held - indexMACTrailer; !front && out > 0 {
			if _, werr := dst.Write(buf[:out]); werr != nil {
				return werr
			}
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
	if held == indexMACTrailer && string(tail[:len(indexMACMagic)]) == indexMACMagic {
		return nil
	}
	_, err := dst.Write(tail)
	return err
}

// NewTrailed is the body Publish uploads: header, file, then trailer, as
// one seekable reader.
func NewTrailed(header []byte, file *io.SectionReader, trailer []byte) *Trailed {
	return &Trailed{header: header, file: file, trailer: trailer}
}

// Trailed reads a header, a file and then its trailer, as one seekable
// body.
type Trailed struct {
	header  []byte
	file    *io.SectionReader
	trailer []byte
	off     int64
}

func (t *Trailed) Read(p []byte) (int, error) {
	h := int64(len(t.header))
	if t.off < h {
		n := copy(p, t.header[t.off:])
		t.off += int64(n)
		return n, nil
	}
	size := t.file.Size()
	if t.off-h < size {
		n, err := t.file.ReadAt(p[:min(int64(len(p)), size-(t.off-h))], t.off-h)
		t.off += int64(n)
		if err == io.EOF {
			err = nil
		}
		return n, err
	}
	rest := t.off - h - size
	if rest >= int64(len(t.trailer)) {
		return 0, io.EOF
	}
	n := copy(p, t.trailer[rest:])
	t.off += int64(n)
	return n, nil
}

func (t *Trailed) Seek(offset int64, whence int) (int64, error) {
	end := int64(len(t.header)) + t.file.Size() + int64(len(t.trailer))
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
