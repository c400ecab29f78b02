package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	algoV4          = "AWS4-HMAC-SHA256"
	iso8601Basic    = "20060102T150405Z"
	scopeDateLayout = "20060102"
	maxSkew         = 15 * time.Minute
	maxPresignV4    = 604800 // seconds: 7 days
	unsignedPayload = "UNSIGNED-PAYLOAD"
	emptySHA256     = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// v4Auth is a parsed SigV4 Authorization header (or the equivalent query
// parameters of a presigned URL).
type v4Auth struct {
	AccessKey     string
	Date          string // scope date, yyyymmdd
	Region        string
	Service       string
	SignedHeaders []string
	Signature     []byte // decoded hex
}

// scope is the credential scope "yyyymmdd/region/service/aws4_request".
func (a v4Auth) scope() string {
	return a.Date + "/" + a.Region + "/" + a.Service + "/aws4_request"
}

// parseAuthorization parses a SigV4 Authorization header value:
//
//	AWS4-HMAC-SHA256 Credential=AK/yyyymmdd/region/s3/aws4_request, SignedHeaders=a;b, Signature=hex
//
// Components may be separated by commas, spaces or both, in any order. The
// returned error is an *Error with code AuthorizationHeaderMalformed.
func parseAuthorization(h string) (v4Auth, error) {
	rest, ok := strings.CutPrefix(h, algoV4+" ")
	if !ok {
		return v4Auth{}, errMalformedHeader("the authorization mechanism is not " + algoV4)
	}
	var cred, signed, sig string
	var haveCred, haveSigned, haveSig bool
	for _, f := range strings.FieldsFunc(rest, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		k, val, found := strings.Cut(f, "=")
		if !found {
			return v4Auth{}, errMalformedHeader("the component " + strconv.Quote(f) + " is not of the form Name=value")
		}
		var dst *string
		var seen *bool
		switch k {
		case "Credential":
			dst, seen = &cred, &haveCred
		case "SignedHeaders":
			dst, seen = &signed, &haveSigned
		case "Signature":
			dst, seen = &sig, &haveSig
		default:
			return v4Auth{}, errMalformedHeader("unknown component " + strconv.Quote(k))
		}
		if *seen {
			return v4Auth{}, errMalformedHeader("the component " + k + " appears more than once")
		}
		*dst, *seen = val, true
	}
	if !haveCred || !haveSigned || !haveSig {
		return v4Auth{}, errMalformedHeader("it must contain Credential, SignedHeaders and Signature")
	}
	a, detail := parseCredential(cred)
	if detail != "" {
		return v4Auth{}, errMalformedHeader(detail)
	}
	if a.SignedHeaders, detail = parseSignedHeaders(signed); detail != "" {
		return v4Auth{}, errMalformedHeader(detail)
	}
	if a.Signature, detail = parseSignature(sig); detail != "" {
		return v4Auth{}, errMalformedHeader(detail)
	}
	return a, nil
}

// parseCredential parses "AK/yyyymmdd/region/service/aws4_request". On
// failure it returns a non-empty description of the problem.
func parseCredential(s string) (v4Auth, string) {
	const want = `the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".`
	parts := strings.Split(s, "/")
	if len(parts) != 5 || parts[0] == "" || parts[2] == "" || parts[4] != "aws4_request" {
		return v4Auth{}, want
	}
	if _, err := time.Parse(scopeDateLayout, parts[1]); err != nil || len(parts[1]) != 8 {
		return v4Auth{}, "incorrect date format " + strconv.Quote(parts[1]) + ". This date in the credential must be in the format \"yyyyMMdd\"."
	}
	if parts[3] != "s3" {
		return v4Auth{}, "incorrect service " + strconv.Quote(parts[3]) + ". This endpoint belongs to \"s3\"."
	}
	return v4Auth{AccessKey: parts[0], Date: parts[1], Region: parts[2], Service: parts[3]}, ""
}

// parseSignedHeaders parses "a;b;c": lower-case names, no empties, no
// repeats, and "host" among them.
func parseSignedHeaders(s string) ([]string, string) {
	if s == "" {
		return nil, "SignedHeaders is empty"
	}
	names := strings.Split(s, ";")
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if n == "" || n != strings.ToLower(n) || strings.ContainsAny(n, " \t:") {
			return nil, "SignedHeaders contains an invalid header name " + strconv.Quote(n)
		}
		if seen[n] {
			return nil, "SignedHeaders lists " + strconv.Quote(n) + " twice"
		}
		seen[n] = true
	}
	if !seen["host"] {
		return nil, "the host header must be signed"
	}
	return names, ""
}

// parseSignature decodes a 64-digit hex signature.
func parseSignature(s string) ([]byte, string) {
	if len(s) != 2*sha256.Size {
		return nil, "the Signature must be 64 hexadecimal digits"
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, "the Signature must be 64 hexadecimal digits"
	}
	return b, ""
}

// checkPayloadHash applies the read-only endpoint's rules to the
// x-amz-content-sha256 value: UNSIGNED-PAYLOAD or a SHA-256 hex digest; no
// STREAMING-* payloads; on GET and HEAD only the empty-body digest.
func checkPayloadHash(method, h string) error {
	switch {
	case h == unsignedPayload:
		return nil
	case strings.HasPrefix(h, "STREAMING-"):
		return &Error{Code: "InvalidRequest", Status: http.StatusBadRequest,
			Message: "streaming (aws-chunked) payloads are not supported by this read-only endpoint"}
	case len(h) != 2*sha256.Size || !isLowerHex(h):
		return &Error{Code: "InvalidArgument", Status: http.StatusBadRequest,
			Message: "x-amz-content-sha256 must be UNSIGNED-PAYLOAD or a valid sha256 value."}
	case (method == http.MethodGet || method == http.MethodHead) && h != emptySHA256:
		return &Error{Code: "XAmzContentSHA256Mismatch", Status: http.StatusBadRequest,
			Message: "The provided 'x-amz-content-sha256' header does not match what was computed: " + method + " requests have an empty body."}
	}
	return nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// signingKeyV4 derives the SigV4 signing key of secret for a's scope
// (date, region, service).
func signingKeyV4(secret string, a v4Auth) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), a.Date)
	k = hmacSHA256(k, a.Region)
	k = hmacSHA256(k, a.Service)
	return hmacSHA256(k, "aws4_request")
}

// signV4 computes the SigV4 signature of a canonical request with the
// signing key of a's scope.
func signV4(key []byte, a v4Auth, t time.Time, creq string) []byte {
	sum := sha256.Sum256([]byte(creq))
	sts := algoV4 + "\n" + t.UTC().Format(iso8601Basic) + "\n" + a.scope() + "\n" + hex.EncodeToString(sum[:])
	return hmacSHA256(key, sts)
}

// maxSigningKeys bounds the signing keys a Verifier keeps, and
// maxKeptScopeField the length of a scope's region (parseScope fixes its date and service) for
// its key to be kept (real ones are far shorter): a key holder sending
// long made-up regions keeps no more than a few hundred KiB.
const (
	maxSigningKeys    = 1024
	maxKeptScopeField = 64
)

// signingScope names one kept signing key: an access key (whose secret is
// fixed for the Verifier's life) and a credential scope.
type signingScope struct{ access, date, region, service string }

// signingKeys keeps the signing keys of scopes that verified a request,
// so that the next request in the same scope (every request of a client
// on the same day) costs one HMAC instead of five. Only a key that made a
// signature match is kept: a request without the secret adds nothing.
// When full it starts again empty (at most maxSigningKeys entries).
type signingKeys struct {
	mu sync.Mutex
	m  map[signingScope][]byte
}

func (c *signingKeys) get(s signingScope) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[s]
}

func (c *signingKeys) put(s signingScope, k []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxSigningKeys {
		c.m = make(map[signingScope][]byte)
	}
	c.m[s] = k
}

func (c *signingKeys) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// matchKeyV4 is matchV4 with the signing key of a's scope taken from v's
// kept keys, or derived from secret and kept when it made the signature
// match.
func (v *Verifier) matchKeyV4(r *http.Request, secret string, a v4Auth, t time.Time, canonQuery, payloadHash string) bool {
	scope := signingScope{access: a.AccessKey, date: a.Date, region: a.Region, service: a.Service}
	if k := v.sigKeys.get(scope); k != nil {
		return matchV4(r, k, a, t, canonQuery, payloadHash)
	}
	k := signingKeyV4(secret, a)
	if !matchV4(r, k, a, t, canonQuery, payloadHash) {
		return false
	}
	if len(a.Region) <= maxKeptScopeField { // parseScope fixes the date (8 bytes) and the service ("s3")
		v.sigKeys.put(scope, k)
	}
	return true
}

// uriCandidates returns the canonical URIs to try: the path decoded and
// re-encoded once the AWS way, and the path exactly as sent when that
// differs (a client that escaped more, e.g. "%2F", or less, e.g. a raw "+",
// and signed what it sent). Both decode to the same r.URL.Path, which is
// what the request addresses, so accepting either does not widen what a
// signature authorizes.
func uriCandidates(r *http.Request) []string {
	enc := canonicalURI(r.URL)
	if raw := rawPath(r); raw != enc && raw != "" {
		return []string{enc, raw}
	}
	return []string{enc}
}

// matchV4 recomputes the signature for each URI and Host candidate and
// compares it with the one sent, in constant time.
func matchV4(r *http.Request, key []byte, a v4Auth, t time.Time, canonQuery, payloadHash string) bool {
	ok := false
	for _, uri := range uriCandidates(r) {
		for _, host := range hostCandidates(r.Host) {
			creq := canonicalRequest(r.Method, uri, canonQuery, canonicalHeaders(r, a.SignedHeaders, host), a.SignedHeaders, payloadHash)
			if hmac.Equal(signV4(key, a, t, creq), a.Signature) {
				ok = true
			}
		}
	}
	return ok
}

// verifyV4Header verifies SigV4 header authentication.
func (v *Verifier) verifyV4Header(r *http.Request, q Query, authz string) (Identity, error) {
	a, err := parseAuthorization(authz)
	if err != nil {
		return Identity{}, err
	}
	key, err := v.lookup(a.AccessKey)
	if err != nil {
		return Identity{}, err
	}
	var t time.Time
	if d := r.Header.Get("X-Amz-Date"); d != "" {
		t, err = time.Parse(iso8601Basic, d)
	} else if d := r.Header.Get("Date"); d != "" {
		t, err = parseHTTPDate(d)
	} else {
		err = errNoDate
	}
	if err != nil {
		return Identity{}, &Error{Code: "AccessDenied", Status: http.StatusForbidden,
			Message: "AWS authentication requires a valid Date or x-amz-date header"}
	}
	if t.UTC().Format(scopeDateLayout) != a.Date {
		return Identity{}, errMalformedHeader("Invalid credential date. Date is not the same as X-Amz-Date.")
	}
	if d := v.cfg.Now().Sub(t); d > maxSkew || d < -maxSkew {
		return Identity{}, errSkewed()
	}
	if err := checkAmzHeadersSigned(r, a.SignedHeaders); err != nil {
		return Identity{}, err
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		return Identity{}, &Error{Code: "InvalidRequest", Status: http.StatusBadRequest,
			Message: "Missing required header for this request: x-amz-content-sha256"}
	}
	if err := checkPayloadHash(r.Method, payload); err != nil {
		return Identity{}, err
	}
	if !v.matchKeyV4(r, key.secret, a, t, canonicalQuery(q, ""), payload) {
		return Identity{}, errSignature()
	}
	id := v.identity(a.AccessKey)
	id.payload = payload
	return id, nil
}

// checkAmzHeadersSigned refuses a request carrying an x-amz-* header that
// signedHeaders does not list, as AWS does for header and presigned auth
// alike: such headers change what is answered.
func checkAmzHeadersSigned(r *http.Request, signedHeaders []string) error {
	signed := make(map[string]bool, len(signedHeaders))
	for _, n := range signedHeaders {
		signed[n] = true
	}
	for name := range r.Header {
		if n := strings.ToLower(name); strings.HasPrefix(n, "x-amz-") && !signed[n] {
			return &Error{Code: "AccessDenied", Status: http.StatusForbidden,
				Message: "There were headers present in the request which were not signed: " + n}
		}
	}
	return nil
}

type constError string

func (e constError) Error() string { return string(e) }

const errNoDate = constError("no Date or X-Amz-Date header")

// verifyV4Query verifies a SigV4 presigned URL.
func (v *Verifier) verifyV4Query(r *http.Request, q Query) (Identity, error) {
	const required = "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters."
	vals := map[string]string{}
	for _, name := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Expires"} {
		val, n := q.first(name)
		if n == 0 {
			return Identity{}, errQueryParams(http.StatusBadRequest, required)
		}
		if n > 1 {
			return Identity{}, errQueryParams(http.StatusBadRequest, "the query parameter "+name+" appears more than once")
		}
		vals[name] = val
	}
	if vals["X-Amz-Algorithm"] != algoV4 {
		return Identity{}, errQueryParams(http.StatusBadRequest, `X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"`)
	}
	a, detail := parseCredential(vals["X-Amz-Credential"])
	if detail != "" {
		return Identity{}, errQueryParams(http.StatusBadRequest, "Error parsing the X-Amz-Credential parameter; "+detail)
	}
	if a.SignedHeaders, detail = parseSignedHeaders(vals["X-Amz-SignedHeaders"]); detail != "" {
		return Identity{}, errQueryParams(http.StatusBadRequest, "Error parsing the X-Amz-SignedHeaders parameter; "+detail)
	}
	if a.Signature, detail = parseSignature(vals["X-Amz-Signature"]); detail != "" {
		return Identity{}, errQueryParams(http.StatusBadRequest, "Error parsing the X-Amz-Signature parameter; "+detail)
	}
	t, err := time.Parse(iso8601Basic, vals["X-Amz-Date"])
	if err != nil {
		return Identity{}, errQueryParams(http.StatusBadRequest, `X-Amz-Date must be in the ISO8601 Long Format "yyyyMMdd'T'HHmmss'Z'"`)
	}
	if t.UTC().Format(scopeDateLayout) != a.Date {
		return Identity{}, errQueryParams(http.StatusBadRequest, "Invalid credential date. Date is not the same as X-Amz-Date.")
	}
	expires, err := strconv.ParseInt(vals["X-Amz-Expires"], 10, 64)
	if err != nil {
		return Identity{}, errQueryParams(http.StatusBadRequest, "X-Amz-Expires should be a number")
	}
	// Out-of-range expiries are 403 here, as ceph/s3-tests
	// test_object_raw_get_x_amz_expires_out_* expect, with AWS's code and text.
	if expires < 0 {
		return Identity{}, errQueryParams(http.StatusForbidden, "X-Amz-Expires must be non-negative")
	}
	if expires > maxPresignV4 {
		return Identity{}, errQueryParams(http.StatusForbidden, "X-Amz-Expires must be less than a week (in seconds) that is 604800")
	}
	key, err := v.lookup(a.AccessKey)
	if err != nil {
		return Identity{}, err
	}
	if err := checkAmzHeadersSigned(r, a.SignedHeaders); err != nil {
		return Identity{}, err
	}
	payload := unsignedPayload
	if p, n := q.first("X-Amz-Content-Sha256"); n > 0 {
		if err := checkPayloadHash(r.Method, p); err != nil {
			return Identity{}, err
		}
		payload = p
	}
	if !v.matchKeyV4(r, key.secret, a, t, canonicalQuery(q, "X-Amz-Signature"), payload) {
		return Identity{}, errSignature()
	}
	now := v.cfg.Now()
	if now.Before(t.Add(-maxSkew)) {
		return Identity{}, &Error{Code: "AccessDenied", Status: http.StatusForbidden, Message: "Request is not valid yet"}
	}
	if now.After(t.Add(time.Duration(expires) * time.Second)) {
		return Identity{}, errExpired()
	}
	id := v.identity(a.AccessKey)
	id.payload = payload
	return id, nil
}
