package archiveview

// File identities: what tells two versions of a key apart, read from the
// index columns without building a File (a dataset history compares every
// key of every published version).

import (
	"encoding/hex"

	"github.com/wharf-s3/wharf/archiveview/internal/index"
)

// ETag kinds of a FileIdentity: which of File.ETag's forms it has.
const (
	etagSHA256   uint8 = iota // "sha256-" + hex of the checksum's first 16 bytes
	etagIdentity              // "wharf-" + hex of the location digest
	etagMD5                   // hex of the manifest's content_hash
)

// FileIdentity is a file's size, checksum and ETag in raw form: a
// comparable value (==) that needs no allocation. SHA256Hex and ETag
// render them as File.SHA256 and File.ETag are.
type FileIdentity struct {
	Size      int64
	HasSHA256 bool
	SHA256    [32]byte // when HasSHA256
	etagKind  uint8
	etag      [16]byte
}

// SHA256Hex is File.SHA256: the checksum in hex, "" when there is none.
func (id FileIdentity) SHA256Hex() string {
	if !id.HasSHA256 {
		return ""
	}
	return hex.EncodeToString(id.SHA256[:])
}

// ETag is File.ETag.
func (id FileIdentity) ETag() string {
	h := hex.EncodeToString(id.etag[:])
	switch id.etagKind {
	case etagSHA256:
		return "sha256-" + h
	case etagIdentity:
		return "wharf-" + h
	}
	return h
}

// SameETag reports whether a and b have the same File.ETag.
func (id FileIdentity) SameETag(b FileIdentity) bool {
	return id.etagKind == b.etagKind && id.etag == b.etag
}

// EachIdentity calls fn with every file's key and identity, in key order,
// and stops at fn's first error, which it returns. key is a view of the
// index (of the mapped file, for an index served in place): valid during
// the call only, strings.Clone what is kept. A fault reading a mapped
// index file (truncated under the server) returns an error wrapping
// ErrIndexFileChanged instead of a panic.
func (a *Archive) EachIdentity(fn func(key string, id FileIdentity) error) error {
	x := &a.tree.Idx
	var ferr error
	gerr := x.Guard(func() {
		for i, n := 0, x.N(); i < n; i++ {
			fl := x.Flags[i]
			id := FileIdentity{Size: x.Size[i]}
			sum := &x.Sum[i]
			switch {
			case fl&index.FlagSum != 0:
				id.HasSHA256, id.SHA256 = true, *sum
				id.etagKind = etagSHA256
				copy(id.etag[:], sum[:16])
			default:
				id.etagKind = etagIdentity
				copy(id.etag[:], sum[:16])
			}
			if fl&index.FlagMD5 != 0 && fl&index.FlagSplit == 0 {
				id.etagKind, id.etag = etagMD5, x.MD5[i]
			}
			if ferr = fn(x.RawKey(i), id); ferr != nil {
				return
			}
		}
	})
	if gerr != nil {
		return gerr
	}
	return ferr
}

// ObjectKeys returns the keys of the distinct objects (chunks, direct
// objects) holding f's bytes, in the order f's bytes use them; no
// request. f is a file of a (from Stat or List).
func (a *Archive) ObjectKeys(f File) ([]string, error) {
	arc, cis, err := fileChunks(a, f)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(cis))
	for i, ci := range cis {
		keys[i] = arc.tree.Chunks[ci].Key
	}
	return keys, nil
}
