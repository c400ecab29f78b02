package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// Load reads, decodes and validates one manifest object read from r, whose
// object key is key (used in every error and for the encrypted-name check).
//
// Contract:
//   - At most lim.MaxStoredBytes are read from r; one byte more is
//     ErrTooLarge. Gzip is detected by its magic bytes (1f 8b), never by
//     name, and the gunzipped JSON is capped at lim.MaxJSONBytes
//     (ErrTooLarge: a gzip bomb stops at the cap, not at EOF). A gzip
//     stream is read to its end so its CRC is checked.
//   - A key ending manifest.encrypted.json[.gz], or a JSON object with
//     encrypted_data or encrypted_dek and no files, is ErrEncrypted.
//   - The JSON is decoded as a stream: unknown fields are ignored, null
//     arrays accepted, and the files/chunks/frames/deleted_paths counts are
//     capped as entries arrive, each file entry checked as it is decoded,
//     so hostile input fails at its first bad entry or at the cap, not after
//     allocating everything. Trailing data after the object is ErrInvalid.
//   - Then Validate runs; its warnings are in the result's Warnings.
//
// lim's zero fields take the defaults. Every error is an *Error naming key.
func Load(r io.Reader, key string, lim Limits) (*Manifest, error) {
	return load(r, key, lim, lexBufSize)
}

// load is Load with the decoder's initial buffer size (it grows on demand).
func load(r io.Reader, key string, lim Limits, bufSize int) (*Manifest, error) {
	lim = lim.WithDefaults()
	m, err := readManifest(r, key, lim, bufSize, nil)
	if err != nil {
		return nil, err
	}
	if _, err := Validate(m, key, lim); err != nil {
		return nil, err
	}
	return m, nil
}

// readManifest reads and decodes one manifest object (Load's contract up
// to Validate), streaming the files to st when it is not nil. lim has its
// defaults.
func readManifest(r io.Reader, key string, lim Limits, bufSize int, st *streamState) (*Manifest, error) {
	stored := &capReader{r: ioReader{r}, left: lim.MaxStoredBytes, limit: lim.MaxStoredBytes, what: "stored manifest object"}
	br := bufio.NewReaderSize(stored, min(bufSize, 32<<10))
	var src io.Reader = br
	if head, _ := br.Peek(2); len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			if isEncryptedName(key) {
				return nil, encryptedErr(key, encryptedWrapper{})
			}
			return nil, readErr(key, err, "gzip header")
		}
		defer zr.Close()
		src = zr
	}
	js := &capReader{r: src, left: lim.MaxJSONBytes, limit: lim.MaxJSONBytes, what: "manifest JSON"}
	if isEncryptedName(key) {
		// The name decides; the wrapper is read (bounded) only for the
		// message's algorithm and binding_version.
		return nil, encryptedErr(key, sniffBinding(js))
	}
	return decodeWith(js, key, lim, bufSize, st)
}

// Parse is Load over a byte slice.
func Parse(data []byte, key string, lim Limits) (*Manifest, error) {
	// Small documents get small buffers: validating many small manifests
	// (chains, fuzzing) should not allocate 64 KiB each.
	return load(bytes.NewReader(data), key, lim, min(max(4*len(data), 4<<10), lexBufSize))
}

func isEncryptedName(key string) bool {
	return strings.HasSuffix(key, ManifestNameEncryptedGzip) || strings.HasSuffix(key, ManifestNameEncryptedPlain)
}

// encryptedWrapper is the KMS envelope CargoShip writes instead of the
// manifest (encryption.md).
type encryptedWrapper struct {
	Algorithm      string // "algorithm"
	BindingVersion *int   // "binding_version"; nil when absent or unreadable
}

// sniffBinding reads an encrypted wrapper for its algorithm and
// binding_version, streaming past the (possibly large) base64 members and
// stopping once both are known; the error message is given either way.
func sniffBinding(r io.Reader) encryptedWrapper {
	var w encryptedWrapper
	l := newLexer(r, 4<<10)
	errDone := errors.New("done")
	_ = l.object(func(name []byte) error {
		switch string(name) {
		case "algorithm":
			if l.ws() == '"' {
				if err := l.str(&w.Algorithm); err != nil {
					return err
				}
				break
			}
			return l.skipValue()
		case "binding_version":
			var v int64
			if err := l.i64(&v); err != nil {
				return err
			}
			bv := int(v)
			w.BindingVersion = &bv
		default:
			return l.skipValue()
		}
		if w.Algorithm != "" && w.BindingVersion != nil {
			return errDone
		}
		return nil
	})
	return w
}

func encryptedErr(key string, w encryptedWrapper) error {
	alg := w.Algorithm
	if alg == "" {
		alg = "AES-256-GCM"
	}
	bv := "unknown"
	if w.BindingVersion != nil {
		bv = fmt.Sprint(*w.BindingVersion)
	}
	return newErr(key, ErrEncrypted, nil, fmt.Sprintf("KMS-encrypted manifest (%s envelope, binding_version %s) not supported", clip(alg), bv))
}

// capError is returned by a capReader past its cap.
type capError struct {
	what  string
	limit int64
	count bool // limit is an entry count, not bytes
	files bool // the count is capped at Limits.MaxFiles
}

func (e *capError) Error() string {
	if e.count {
		return fmt.Sprintf("more than %d %s", e.limit, e.what)
	}
	return fmt.Sprintf("%s exceeds %d bytes", e.what, e.limit)
}

// capReader passes through at most left bytes and then fails with a
// capError if r has more (rather than a silent EOF that would turn a
// truncated read into a "valid" shorter document).
type capReader struct {
	r     io.Reader
	left  int64
	limit int64
	what  string
	err   error
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.left <= 0 {
		var one [1]byte
		for {
			n, err := c.r.Read(one[:])
			if n > 0 {
				c.err = &capError{what: c.what, limit: c.limit}
				return 0, c.err
			}
			if err != nil {
				c.err = err
				return 0, err
			}
		}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if err != nil {
		c.err = err
	}
	return n, err
}

// ioError marks a failure of the caller's reader, as opposed to bad content.
type ioError struct{ err error }

func (e *ioError) Error() string { return e.err.Error() }
func (e *ioError) Unwrap() error { return e.err }

// ioReader wraps the caller's reader so its failures stay distinguishable.
type ioReader struct{ r io.Reader }

func (r ioReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = &ioError{err}
	}
	return n, err
}

// readErr classifies an error met while reading or decoding.
func readErr(key string, err error, where string) error {
	var ie *ioError
	if errors.As(err, &ie) {
		return newErr(key, nil, ie.err, "reading")
	}
	var ce *capError
	if errors.As(err, &ce) {
		e := newErr(key, ErrTooLarge, nil, ce.Error())
		if ce.files {
			e.FilesLimit = int(ce.limit)
		}
		return e
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) {
		return newErr(key, ErrInvalid, err, where+": truncated or corrupt")
	}
	return newErr(key, ErrInvalid, err, where)
}
