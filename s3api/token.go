package s3api

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
)

// Continuation tokens are opaque to clients: base64 RawURL (URL- and
// XML-inert, so DuckDB's plain string search and every URL encoder leave it
// alone) of
//
//	version byte (1) | crc32-IEEE of the After value, big endian | After bytes
//
// The checksum makes a garbage token a 400 instead of a silent listing from
// an arbitrary position.
const tokenVersion = 1

var errBadToken = errors.New("the continuation token provided is incorrect")

// maxTokenAfter bounds the After value a token may carry. It must exceed
// the longest key an archive can hold (a manifest path may have
// manifest.DefaultMaxPathBytes = 4096 bytes, more with raised limits), or
// a listing could not page past that key with the token it handed out
// (TestListV2PagesPastLongKey). The request line is bounded anyway by the
// server's max header bytes.
const maxTokenAfter = 64 << 10

// maxTokenLen is the length of the token of a maxTokenAfter-byte After
// (unpadded base64: 4 characters per 3 bytes, rounded up).
const maxTokenLen = ((5+maxTokenAfter)*4 + 2) / 3

// encodeToken makes the NextContinuationToken that resumes after `after`.
func encodeToken(after string) string {
	buf := make([]byte, 5+len(after))
	buf[0] = tokenVersion
	binary.BigEndian.PutUint32(buf[1:5], crc32.ChecksumIEEE([]byte(after)))
	copy(buf[5:], after)
	return base64.RawURLEncoding.EncodeToString(buf)
}

// decodeToken returns the After value of a token made by encodeToken.
func decodeToken(tok string) (string, error) {
	// The base64 decoder skips '\r' and '\n' even in strict mode: refuse
	// them, so that exactly one spelling of each token is accepted.
	if tok == "" || len(tok) > maxTokenLen || strings.ContainsAny(tok, "\r\n") {
		return "", errBadToken
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(tok)
	if err != nil {
		return "", errBadToken
	}
	if len(raw) < 5 || raw[0] != tokenVersion {
		return "", errBadToken
	}
	after := raw[5:]
	if binary.BigEndian.Uint32(raw[1:5]) != crc32.ChecksumIEEE(after) {
		return "", errBadToken
	}
	return string(after), nil
}
