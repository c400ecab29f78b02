// Package auth verifies S3 request signatures for wharf: SigV4 (header and
// presigned query), SigV2 presigned query, access keys with per-bucket
// grants, and anonymous mode.
package auth

import (
	"net/http"
	"time"
)

// Key is one access key and the buckets it may read (empty Buckets = all).
type Key struct {
	AccessKey string   `yaml:"access_key"`
	SecretKey string   `yaml:"secret_key"`
	Buckets   []string `yaml:"buckets,omitempty"`
}

// Config configures a Verifier.
type Config struct {
	Keys      []Key
	Anonymous bool             // allow unsigned requests (read-only, every bucket)
	Now       func() time.Time // nil = time.Now
}

// Identity is who made a request. AccessKey is "" for an anonymous request.
type Identity struct {
	AccessKey string
	buckets   map[string]bool // nil = every bucket
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
	cfg Config
}

// New builds a Verifier.
func New(cfg Config) (*Verifier, error) { return &Verifier{cfg: cfg}, nil }

// Authenticate checks r's signature (if any) and returns the caller's identity,
// or an *Error. It never reads the request body.
func (v *Verifier) Authenticate(r *http.Request) (Identity, error) {
	panic("auth.Authenticate: not implemented yet")
}

// CanRead reports whether the identity may read bucket.
func (id Identity) CanRead(bucket string) bool {
	return id.buckets == nil || id.buckets[bucket]
}
