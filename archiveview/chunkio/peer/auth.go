package peer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
)

// The wire protocol (version 1).
const (
	framePath = "/wharf-peer/v1/frame"

	hdrDate   = "X-Wharf-Peer-Date"   // Unix seconds of the request
	hdrNonce  = "X-Wharf-Peer-Nonce"  // 32 hex digits, random per request
	hdrFrom   = "X-Wharf-Peer-From"   // the asker's advertised URL
	hdrTo     = "X-Wharf-Peer-To"     // the owner's ring name, as the asker's ring names it
	hdrAuth   = "Authorization"       // "WharfPeer " + hex MAC of the request
	hdrAnswer = "X-Wharf-Peer-Answer" // hex MAC of a 200 answer
	authPre   = "WharfPeer "

	// MinSecretBytes is the shortest shared secret accepted.
	MinSecretBytes = 32
	// DefaultMaxSkew is how far a request's date may be from the
	// owner's clock, either way.
	DefaultMaxSkew = 30 * time.Second

	maxKeyLen    = 1024 // S3's key limit
	maxBucketLen = 255
	maxETagLen   = 256
	maxFromLen   = 300 // also the longest destination (X-Wharf-Peer-To)
)

// keys are the MAC keys derived from the shared secret: one for requests,
// one for answers, so that neither MAC can stand for the other and the
// secret file can be reused elsewhere without the same key appearing
// twice.
type keys struct {
	req, ans []byte
}

func deriveKeys(secret []byte) keys {
	d := func(label string) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(label))
		return m.Sum(nil)
	}
	return keys{req: d("wharf peer v1 request"), ans: d("wharf peer v1 answer")}
}

// requestMAC is the MAC of a request: method, path and raw query as sent,
// date, nonce, the asker's URL and the ring name of the owner it is
// addressed to, each on its own line (none may hold a newline: the parsers
// refuse them).
func (k keys) requestMAC(method, path, rawQuery, date, nonce, from, to string) []byte {
	m := hmac.New(sha256.New, k.req)
	for _, s := range []string{method, path, rawQuery, date, nonce, from, to} {
		m.Write([]byte(s))
		m.Write([]byte{'\n'})
	}
	return m.Sum(nil)
}

// answerMAC is the MAC of a 200 answer to the request with nonce: the
// body's length and the sha256 the owner checked the body against.
func (k keys) answerMAC(nonce string, length int64, sum [32]byte) []byte {
	m := hmac.New(sha256.New, k.ans)
	fmt.Fprintf(m, "%s\n%d\n%x\n", nonce, length, sum)
	return m.Sum(nil)
}

// frameQuery is the query naming frame id, in the one order the asker
// writes it (the MAC covers it as sent, so no canonical form is needed).
func frameQuery(id chunkio.FrameID) string {
	var b strings.Builder
	b.WriteString("b=")
	b.WriteString(url.QueryEscape(id.Bucket))
	b.WriteString("&k=")
	b.WriteString(url.QueryEscape(id.Key))
	b.WriteString("&e=")
	b.WriteString(url.QueryEscape(id.ETag))
	fmt.Fprintf(&b, "&o=%d&n=%d&s=%x", id.Off, id.Size, id.Sum)
	return b.String()
}

// errBadRequest: a request that is not a well-formed frame request.
var errBadRequest = errors.New("malformed peer request")

// parseFrameQuery reads a frame request's query: exactly the fields b, k,
// e, o, n and s, each once; a bucket and key of sane lengths without
// control characters; a non-negative offset; a size from 1 to maxSize;
// a sha256 of 64 hex digits.
func parseFrameQuery(raw string, maxSize int64) (chunkio.FrameID, error) {
	var id chunkio.FrameID
	fail := func(format string, args ...any) (chunkio.FrameID, error) {
		return chunkio.FrameID{}, fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), errBadRequest)
	}
	if len(raw) > 4*maxKeyLen {
		return fail("query of %d bytes", len(raw))
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return fail("query: %v", err)
	}
	want := []string{"b", "k", "e", "o", "n", "s"}
	if len(q) != len(want) {
		return fail("want the fields b, k, e, o, n, s")
	}
	for _, f := range want {
		if len(q[f]) != 1 {
			return fail("field %s: want it once", f)
		}
	}
	id.Bucket, id.Key, id.ETag = q.Get("b"), q.Get("k"), q.Get("e")
	switch {
	case id.Bucket == "" || len(id.Bucket) > maxBucketLen || hasControl(id.Bucket):
		return fail("bucket")
	case id.Key == "" || len(id.Key) > maxKeyLen || hasControl(id.Key):
		return fail("key")
	case len(id.ETag) > maxETagLen || hasControl(id.ETag):
		return fail("etag")
	}
	if id.Off, err = strconv.ParseInt(q.Get("o"), 10, 64); err != nil || id.Off < 0 {
		return fail("offset %q", q.Get("o"))
	}
	if id.Size, err = strconv.ParseInt(q.Get("n"), 10, 64); err != nil || id.Size < 1 || id.Size > maxSize {
		return fail("size %q (want 1 to %d)", q.Get("n"), maxSize)
	}
	if id.Off > 1<<62 {
		return fail("offset %d", id.Off)
	}
	s := q.Get("s")
	if len(s) != 64 {
		return fail("sha256: want 64 hex digits")
	}
	if _, err := hex.Decode(id.Sum[:], []byte(s)); err != nil {
		return fail("sha256: %v", err)
	}
	return id, nil
}

// hasControl reports whether s holds a control character (a newline would
// make two MAC inputs collide; none belongs in a name).
func hasControl(s string) bool {
	for _, c := range []byte(s) {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// checkDate reads a request date (decimal Unix seconds) and checks that it
// is within skew of now.
func checkDate(v string, now time.Time, skew time.Duration) (time.Time, error) {
	if v == "" || len(v) > 20 {
		return time.Time{}, errors.New("no date")
	}
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("date %q: %w", v, err)
	}
	d := now.Sub(time.Unix(sec, 0))
	if d > skew || d < -skew {
		return time.Time{}, fmt.Errorf("date %s is %s from this replica's clock (at most %s)", time.Unix(sec, 0).UTC().Format(time.RFC3339), d.Round(time.Second), skew)
	}
	return time.Unix(sec, 0), nil
}

// validNonce: 32 lower-case hex digits.
func validNonce(v string) bool {
	if len(v) != 32 {
		return false
	}
	for _, c := range []byte(v) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// macFromHeader reads "WharfPeer <64 hex>".
func macFromHeader(v string) ([]byte, bool) {
	h, ok := strings.CutPrefix(v, authPre)
	if !ok || len(h) != 64 {
		return nil, false
	}
	b, err := hex.DecodeString(h)
	return b, err == nil
}
