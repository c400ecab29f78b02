// Package auth verifies S3 request signatures for wharf: SigV4 (header and
// presigned query), SigV2 (presigned query and header), access keys with
// per-bucket grants, and anonymous mode.
//
// Authenticate never reads the request body and holds no mutable state: a
// Verifier is built once from a Config and is safe for concurrent use. Every
// failure is an *Error carrying the S3 error code and HTTP status AWS uses for
// the same condition, so the s3api layer can render it without translation.
//
// What is verified, in order: request shape (one Authorization header, no
// body on GET/HEAD, not both header and query auth, no session token), the
// credential (known access key), the time window (±15 minutes for header
// auth; X-Amz-Date+X-Amz-Expires or Expires for presigned URLs), for SigV4
// (header or presigned) that every x-amz-* header present is signed, and
// the signature, recomputed from the request as received and compared in
// constant time. Identity.PayloadHash gives a handler that reads a body the
// hash the SigV4 signature covers. The canonical request follows the AWS S3
// rules: the path is decoded and re-encoded once (no dot-segment or "//"
// cleaning), the query is sorted and %20-encoded, and Host, Content-Length
// and Transfer-Encoding are reconstructed from where net/http moves them.
package auth

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Key is one access key, the buckets it may read (empty Buckets = all) and
// where it may ask for restores of archived objects (restore.go).
type Key struct {
	AccessKey string       `yaml:"access_key"`
	SecretKey string       `yaml:"secret_key"`
	Buckets   []string     `yaml:"buckets,omitempty"`
	Restore   RestoreGrant `yaml:"restore,omitempty"`
}

// Config configures a Verifier.
type Config struct {
	Keys      []Key
	Anonymous bool             // allow unsigned requests (read-only, every bucket)
	Now       func() time.Time // nil = time.Now

	// VirtualHostBase is the domain under which a Host "<bucket>.<base>"
	// names a bucket, as in s3api.Config.VirtualHostBase. SigV2 signs the
	// bucket as part of the resource ("/<bucket>/<key>"), so the verifier
	// must know it; SigV4 does not need it. "" = path-style only: the bucket
	// is never guessed from the Host header.
	VirtualHostBase string
}

// Identity is who made a request. AccessKey is "" for an anonymous request.
type Identity struct {
	AccessKey string
	buckets   map[string]bool // nil = every bucket
	restore   RestoreGrant
	payload   string // the payload hash the SigV4 signature covers; see PayloadHash
}

// Error is an authentication or authorization failure, with the S3 error code
// AWS would give (AccessDenied, SignatureDoesNotMatch, InvalidAccessKeyId,
// RequestTimeTooSkewed, AuthorizationQueryParametersError, ...).
type Error struct {
	Code    string
	Message string
	Status  int // HTTP status, usually 403 (400 for malformed auth)
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Verifier authenticates requests. Safe for concurrent use.
type Verifier struct {
	cfg  Config
	keys map[string]keyEntry // access key → secret and grants; read-only after New

	sigKeys signingKeys // SigV4 signing keys of scopes that verified (sigv4.go)
}

type keyEntry struct {
	secret  string
	buckets map[string]bool // nil = every bucket
	restore RestoreGrant
}

// New builds a Verifier. It rejects an empty access or secret key, an access
// key containing characters that cannot be carried in an Authorization header
// (whitespace, control characters, ',', '/', ':', '='), duplicate access
// keys, and a restore grant naming a bucket the key may not read. Secrets
// may contain any characters.
func New(cfg Config) (*Verifier, error) {
	v := &Verifier{cfg: cfg, keys: make(map[string]keyEntry, len(cfg.Keys))}
	for i, k := range cfg.Keys {
		if k.AccessKey == "" {
			return nil, fmt.Errorf("auth: key %d: empty access key", i)
		}
		if strings.IndexFunc(k.AccessKey, badAccessKeyRune) >= 0 {
			return nil, fmt.Errorf("auth: access key %q: contains whitespace, a control character or one of , / : =", k.AccessKey)
		}
		if k.SecretKey == "" {
			return nil, fmt.Errorf("auth: access key %q: empty secret key", k.AccessKey)
		}
		if _, dup := v.keys[k.AccessKey]; dup {
			return nil, fmt.Errorf("auth: access key %q: configured twice", k.AccessKey)
		}
		e := keyEntry{secret: k.SecretKey}
		if len(k.Buckets) > 0 {
			e.buckets = make(map[string]bool, len(k.Buckets))
			for _, b := range k.Buckets {
				if b == "" {
					return nil, fmt.Errorf("auth: access key %q: empty bucket name in grants", k.AccessKey)
				}
				e.buckets[b] = true
			}
		}
		if err := k.Restore.check(e.buckets); err != nil {
			return nil, fmt.Errorf("auth: access key %q: %w", k.AccessKey, err)
		}
		e.restore = k.Restore
		v.keys[k.AccessKey] = e
	}
	if cfg.Now == nil {
		v.cfg.Now = time.Now
	}
	return v, nil
}

func badAccessKeyRune(r rune) bool {
	return r <= ' ' || r == 0x7f || r == ',' || r == '/' || r == ':' || r == '='
}

// Authenticate checks r's signature (if any) and returns the caller's identity,
// or an *Error. It never reads the request body. It is AuthenticateQuery
// with the query parsed here by ParseQuery.
func (v *Verifier) Authenticate(r *http.Request) (Identity, error) {
	q, err := ParseQuery(r.URL.RawQuery)
	if err != nil {
		return Identity{}, err
	}
	return v.AuthenticateQuery(r, q)
}

// AuthenticateQuery is Authenticate for a caller that has already parsed
// r's query: q must be ParseQuery(r.URL.RawQuery). The signature is
// checked over q, every pair in request order, so a caller that serves the
// request from the same q serves exactly what was signed.
//
// Header auth (SigV4 "AWS4-HMAC-SHA256 ..." or SigV2 "AWS AK:sig"), SigV4
// presigned query (X-Amz-Algorithm...) and SigV2 presigned query
// (AWSAccessKeyId, Expires, Signature) are accepted. A request carrying no
// credentials is anonymous: allowed (AccessKey "", every bucket) only when
// Config.Anonymous is set. A request that carries credentials is always
// verified, even in anonymous mode: a bad signature is refused, never
// downgraded to anonymous.
func (v *Verifier) AuthenticateQuery(r *http.Request, q Query) (Identity, error) {
	if len(r.Header.Values("Authorization")) > 1 {
		return Identity{}, errMalformedHeader("multiple Authorization headers")
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		if len(r.TransferEncoding) > 0 {
			return Identity{}, &Error{Code: "InvalidRequest", Status: http.StatusBadRequest,
				Message: "Transfer-Encoding is not allowed on " + r.Method + " requests"}
		}
		// -1 is a body of unknown length: over HTTP/2, a HEADERS frame
		// that did not end the stream and no content-length (the HTTP/2
		// form of a chunked body).
		if r.ContentLength != 0 {
			return Identity{}, &Error{Code: "InvalidRequest", Status: http.StatusBadRequest,
				Message: "a request body is not allowed on " + r.Method + " requests"}
		}
	}
	authz := r.Header.Get("Authorization")
	queryV4 := q.Has("X-Amz-Algorithm") || q.Has("X-Amz-Credential") || q.Has("X-Amz-Signature")
	queryV2 := q.Has("AWSAccessKeyId") || q.Has("Signature")
	if authz != "" && (queryV4 || queryV2) || queryV4 && queryV2 {
		return Identity{}, &Error{Code: "InvalidArgument", Status: http.StatusBadRequest,
			Message: "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified"}
	}
	signed := authz != "" || queryV4 || queryV2
	if signed && (r.Header.Get("X-Amz-Security-Token") != "" || q.Has("X-Amz-Security-Token")) {
		return Identity{}, &Error{Code: "InvalidToken", Status: http.StatusBadRequest,
			Message: "The provided token is malformed or otherwise invalid: session tokens are not supported by this endpoint; use a static access key"}
	}
	switch {
	case strings.HasPrefix(authz, algoV4+" "):
		return v.verifyV4Header(r, q, authz)
	case strings.HasPrefix(authz, "AWS "):
		return v.verifyV2Header(r, q, authz)
	case authz != "":
		return Identity{}, &Error{Code: "InvalidArgument", Status: http.StatusBadRequest,
			Message: "Unsupported Authorization Type"}
	case queryV4:
		return v.verifyV4Query(r, q)
	case queryV2:
		return v.verifyV2Query(r, q)
	}
	if v.cfg.Anonymous {
		return Identity{}, nil
	}
	return Identity{}, &Error{Code: "AccessDenied", Status: http.StatusForbidden, Message: "Access Denied"}
}

// AllowsAnonymous reports whether unsigned requests are served
// (Config.Anonymous): then every bucket is readable by anyone.
func (v *Verifier) AllowsAnonymous() bool { return v.cfg.Anonymous }

// identity returns the Identity for a verified access key.
func (v *Verifier) identity(ak string) Identity {
	e := v.keys[ak]
	return Identity{AccessKey: ak, buckets: e.buckets, restore: e.restore}
}

// lookup finds the key entry, or returns InvalidAccessKeyId.
func (v *Verifier) lookup(ak string) (keyEntry, error) {
	e, ok := v.keys[ak]
	if !ok {
		return keyEntry{}, &Error{Code: "InvalidAccessKeyId", Status: http.StatusForbidden,
			Message: "The AWS Access Key Id you provided does not exist in our records."}
	}
	return e, nil
}

// PayloadHash is the payload hash the request's SigV4 signature covers: a
// lower-case SHA-256 hex digest of the body (x-amz-content-sha256 in header
// auth, X-Amz-Content-Sha256 in a presigned URL), UNSIGNED-PAYLOAD, or ""
// when no signature covers one (SigV2, anonymous). Authenticate never reads
// the body: a handler that reads one must refuse it when its digest is not
// the one given here.
func (id Identity) PayloadHash() string { return id.payload }

// CanRead reports whether the identity may read bucket.
func (id Identity) CanRead(bucket string) bool {
	return id.buckets == nil || id.buckets[bucket]
}

// Anonymous reports whether the identity is an unsigned (anonymous) caller.
func (id Identity) Anonymous() bool { return id.AccessKey == "" }

func errMalformedHeader(detail string) *Error {
	return &Error{Code: "AuthorizationHeaderMalformed", Status: http.StatusBadRequest,
		Message: "The authorization header is malformed; " + detail}
}

func errQueryParams(status int, msg string) *Error {
	return &Error{Code: "AuthorizationQueryParametersError", Status: status, Message: msg}
}

func errSignature() *Error {
	return &Error{Code: "SignatureDoesNotMatch", Status: http.StatusForbidden,
		Message: "The request signature we calculated does not match the signature you provided. Check your key and signing method."}
}

func errSkewed() *Error {
	return &Error{Code: "RequestTimeTooSkewed", Status: http.StatusForbidden,
		Message: "The difference between the request time and the current time is too large."}
}

func errExpired() *Error {
	return &Error{Code: "AccessDenied", Status: http.StatusForbidden, Message: "Request has expired"}
}
