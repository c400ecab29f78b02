package archiveview

// The shared index objects' MAC lives in internal/index (mac.go): the
// object format and its parser, beside the index file's. These are its
// public names.

import "github.com/wharf-s3/wharf/archiveview/internal/index"

// ErrUnauthenticatedIndex is wrapped by every refusal of a shared index
// object that does not carry a valid MAC under its name (or is larger than
// the cache accepts): Fetch never hands such an object out, and Publish
// replaces it.
var ErrUnauthenticatedIndex = index.ErrUnauthenticated

// MinIndexSecretBytes is the shortest secret NewIndexSecret accepts.
const MinIndexSecretBytes = index.MinSecretBytes

// IndexSecret is the key that authenticates a shared index cache's
// objects. Every replica sharing the cache holds the same one.
type IndexSecret = index.Secret

// NewIndexSecret wraps key (copied), which must hold at least
// MinIndexSecretBytes bytes.
func NewIndexSecret(key []byte) (*IndexSecret, error) { return index.NewSecret(key) }
