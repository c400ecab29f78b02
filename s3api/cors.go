package s3api

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// CORS for browser clients (Zarr and COG viewers, data portals) that read
// wharf with fetch() from a page on another origin.
//
// A CORSPolicy (Config.CORS) is a bucket's CORS configuration, S3's
// CORSConfiguration: rules, the first of which that matches a request
// decides it. CORSRules is the implementation wharf serves, the same rules
// for every bucket; ReadOnlyCORSRule is the one rule a read-only endpoint
// needs. The server applies the policy in two places (server.go): the
// preflight (OPTIONS, bucket.go) and every other response, including
// errors, which gets Access-Control-Allow-Origin and the exposed headers
// when its origin and method match a rule. GET ?cors shows the rules as
// S3's CORSConfiguration XML.

// CORSRule is one rule of a CORS configuration, with S3's meaning.
type CORSRule struct {
	// AllowedOrigins are origins as ParseCORSOrigin returns them: exact
	// "scheme://host[:port]" values, or "*" for every origin.
	AllowedOrigins []string
	// AllowedMethods are the request methods the rule allows (GET, HEAD).
	AllowedMethods []string
	// AllowedHeaders are the request header names a preflight may ask
	// for, lower-case; each may hold one '*' that matches any run of
	// characters ("x-amz-*").
	AllowedHeaders []string
	// ExposeHeaders are the response headers a page's script may read.
	ExposeHeaders []string
	// MaxAgeSeconds is how long a browser may cache a preflight answer;
	// 0 = no Access-Control-Max-Age header (the browser's default, 5 s).
	MaxAgeSeconds int
}

// ReadOnlyCORSRule is the rule browser clients of a read-only S3 endpoint
// need: GET and HEAD from origins; the request headers S3 clients send
// (Authorization and the x-amz-* signing headers, Range, the If-*
// conditionals, the SDKs' amz-sdk-* headers, Content-Type and
// Cache-Control); and every response header wharf sets that a viewer may
// read (Content-Range, ETag, Last-Modified, the version and checksum
// headers, the restore state, Retry-After, the request ids ...).
// maxAgeSeconds is MaxAgeSeconds.
func ReadOnlyCORSRule(origins []string, maxAgeSeconds int) CORSRule {
	return CORSRule{
		AllowedOrigins: append([]string(nil), origins...),
		AllowedMethods: []string{http.MethodGet, http.MethodHead},
		AllowedHeaders: []string{"authorization", "range", "if-*", "x-amz-*", "amz-sdk-*", "content-type", "cache-control"},
		ExposeHeaders: []string{
			"Accept-Ranges", "Content-Range", "Content-Length", "Content-Type", "Content-Encoding",
			"Content-Disposition", "Content-Language", "Cache-Control", "Expires", "ETag", "Last-Modified",
			"x-amz-version-id", "x-amz-delete-marker", "x-amz-checksum-sha256", "x-amz-checksum-type",
			"x-amz-mp-parts-count", "x-amz-storage-class", "x-amz-meta-mtime", "x-amz-bucket-region",
			"x-amz-request-id", "x-amz-id-2",
			// An archived object's state (restore.go), and how long to
			// wait after a 503 (a bucket still opening, reads busy).
			"x-amz-restore", "x-amz-archive-status", "Retry-After",
		},
		MaxAgeSeconds: maxAgeSeconds,
	}
}

// CORSPolicy is the CORS configuration of the served buckets.
type CORSPolicy interface {
	// Preflight decides a preflight on bucket from origin (never ""),
	// asking for method (Access-Control-Request-Method, "" when absent)
	// and headers (Access-Control-Request-Headers, split on ','). enabled
	// is false when bucket has no CORS configuration (403 AccessForbidden,
	// "CORS is not enabled for this bucket"); otherwise allow holds the
	// Access-Control-* headers of the 200 answer, or is nil when no rule
	// matches (403 AccessForbidden, "This CORS request is not allowed").
	Preflight(bucket, origin, method string, headers []string) (allow http.Header, enabled bool)
	// Actual returns the headers to add to the response to a request
	// (not a preflight) on bucket ("" for ListBuckets) with method from
	// origin (never ""): Access-Control-Allow-Origin and the rest when a
	// rule matches, nil when none does.
	Actual(bucket, origin, method string) http.Header
	// Rules returns bucket's configuration for GET ?cors; none (nil) is
	// 404 NoSuchCORSConfiguration.
	Rules(bucket string) []CORSRule
}

// CORSRules is a CORS configuration that every bucket has. Rules are
// evaluated in order and the first that matches decides, as S3 evaluates a
// bucket's rules. A rule matches a request when:
//   - the Origin equals one of its AllowedOrigins, or it allows "*";
//   - the method (a preflight's Access-Control-Request-Method) is one of
//     its AllowedMethods;
//   - on a preflight, every requested header matches one of its
//     AllowedHeaders (case-insensitively).
//
// The answer names the origin itself, with Access-Control-Allow-Credentials:
// true, when the rule lists the origin; a rule that matches only through
// "*" answers Access-Control-Allow-Origin: * without credentials, as S3
// does (a response that is the same for every origin can be cached by a
// shared cache). A preflight answer also carries Access-Control-Allow-Methods
// (the rule's methods), Access-Control-Allow-Headers (the requested headers,
// lower-case, when there are any), Access-Control-Expose-Headers,
// Access-Control-Max-Age (when set) and Vary: Origin,
// Access-Control-Request-Headers, Access-Control-Request-Method; other
// answers carry Access-Control-Allow-Origin, -Allow-Credentials,
// -Expose-Headers and Vary: Origin.
type CORSRules []CORSRule

// Preflight implements CORSPolicy.
func (rs CORSRules) Preflight(bucket, origin, method string, headers []string) (http.Header, bool) {
	if len(rs) == 0 {
		return nil, false
	}
	lower := make([]string, len(headers))
	for i, h := range headers {
		lower[i] = strings.ToLower(strings.TrimSpace(h))
	}
	for _, r := range rs {
		exact, ok := r.matchOrigin(origin)
		if !ok || !r.allowsMethod(method) || !r.allowsHeaders(lower) {
			continue
		}
		h := r.base(origin, exact)
		h.Set("Access-Control-Allow-Methods", strings.Join(r.AllowedMethods, ", "))
		if len(lower) > 0 {
			h.Set("Access-Control-Allow-Headers", strings.Join(lower, ", "))
		}
		if r.MaxAgeSeconds > 0 {
			h.Set("Access-Control-Max-Age", strconv.Itoa(r.MaxAgeSeconds))
		}
		h.Set("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method")
		return h, true
	}
	return nil, true
}

// Actual implements CORSPolicy.
func (rs CORSRules) Actual(bucket, origin, method string) http.Header {
	for _, r := range rs {
		exact, ok := r.matchOrigin(origin)
		if !ok || !r.allowsMethod(method) {
			continue
		}
		h := r.base(origin, exact)
		h.Set("Vary", "Origin")
		return h
	}
	return nil
}

// Rules implements CORSPolicy.
func (rs CORSRules) Rules(bucket string) []CORSRule {
	if len(rs) == 0 {
		return nil
	}
	return rs
}

// base holds the headers of every matching answer: the allowed origin,
// credentials for a listed origin, and the exposed headers.
func (r CORSRule) base(origin string, exact bool) http.Header {
	h := http.Header{}
	if exact {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
	} else {
		h.Set("Access-Control-Allow-Origin", "*")
	}
	if len(r.ExposeHeaders) > 0 {
		h.Set("Access-Control-Expose-Headers", strings.Join(r.ExposeHeaders, ", "))
	}
	return h
}

// matchOrigin reports whether the rule allows origin, and whether it lists
// it exactly (rather than through "*").
func (r CORSRule) matchOrigin(origin string) (exact, ok bool) {
	star := false
	for _, o := range r.AllowedOrigins {
		if o == origin {
			return true, true
		}
		star = star || o == "*"
	}
	return false, star
}

func (r CORSRule) allowsMethod(m string) bool {
	for _, x := range r.AllowedMethods {
		if x == m {
			return true
		}
	}
	return false
}

// allowsHeaders reports whether every (lower-case) header matches an
// allowed pattern.
func (r CORSRule) allowsHeaders(headers []string) bool {
	for _, h := range headers {
		ok := false
		for _, p := range r.AllowedHeaders {
			if matchWildcard(strings.ToLower(p), h) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// matchWildcard matches s against pattern, in which one '*' stands for any
// run of characters (none included).
func matchWildcard(pattern, s string) bool {
	pre, post, star := strings.Cut(pattern, "*")
	if !star {
		return pattern == s
	}
	return len(s) >= len(pre)+len(post) && strings.HasPrefix(s, pre) && strings.HasSuffix(s, post)
}

// ParseCORSOrigin checks an allowed origin as an operator writes it and
// returns the form browsers send in the Origin header, which is what
// requests are matched against:
//   - "*" is every origin and is returned as is.
//   - Otherwise "scheme://host" or "scheme://host:port": scheme http or
//     https; host a DNS name (letters, digits, '-' and '.'; non-ASCII names
//     must be written in their punycode "xn--" form) or an IP address (IPv6
//     in brackets); port 1-65535. Scheme and host are lower-cased and the
//     scheme's default port (:80 for http, :443 for https) is dropped, as
//     browsers serialize an origin.
//   - Anything else is an error naming the value: a missing or other
//     scheme, an empty host, user info, a path (even "/"), a query or
//     fragment, a bad port, whitespace, wildcards inside a name, and
//     "null" (the opaque origin of file: pages and sandboxed frames, which
//     any page can claim).
//
// It is a pure function; it never panics on any input.
func ParseCORSOrigin(v string) (string, error) {
	if v == "*" {
		return v, nil
	}
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("CORS origin %q: %s (want scheme://host[:port], such as https://viewer.example.org, or *)", v, why)
	}
	scheme, rest, ok := strings.Cut(v, "://")
	if !ok {
		return bad("no scheme")
	}
	scheme = strings.ToLower(scheme)
	if scheme != "http" && scheme != "https" {
		return bad("scheme must be http or https")
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		return bad("an origin has no path, query or fragment")
	}
	if strings.Contains(rest, "@") {
		return bad("an origin has no user info")
	}
	host, port := rest, ""
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return bad("unclosed IPv6 bracket")
		}
		host, port = rest[:end+1], rest[end+1:]
		if err := checkIPv6(host[1:end]); err != nil {
			return bad(err.Error())
		}
		if port != "" && port[0] != ':' {
			return bad("junk after the host")
		}
		port = strings.TrimPrefix(port, ":")
		if port == "" && strings.HasSuffix(rest, ":") {
			return bad("empty port")
		}
	} else {
		var hasPort bool
		host, port, hasPort = strings.Cut(rest, ":")
		if hasPort && port == "" {
			return bad("empty port")
		}
		if err := checkDNSHost(host); err != nil {
			return bad(err.Error())
		}
	}
	host = strings.ToLower(host)
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' || port[0] == '+' {
			return bad("port must be 1-65535")
		}
		if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
			port = ""
		}
	}
	out := scheme + "://" + host
	if port != "" {
		out += ":" + port
	}
	return out, nil
}

// checkDNSHost accepts a DNS name or an IPv4 address: labels of ASCII
// letters, digits and '-', not starting or ending with '-', joined by '.'.
func checkDNSHost(h string) error {
	if h == "" {
		return errors.New("empty host")
	}
	if len(h) > 253 {
		return errors.New("host longer than 253 characters")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" {
			return errors.New("empty label in host")
		}
		if len(label) > 63 {
			return errors.New("host label longer than 63 characters")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("host label starts or ends with '-'")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return fmt.Errorf("character %q in host (non-ASCII names: use the xn-- form)", c)
			}
		}
	}
	return nil
}

// checkIPv6 accepts the inside of an IPv6 literal's brackets: hex digits,
// ':' and '.', at least two colons.
func checkIPv6(s string) error {
	if strings.Count(s, ":") < 2 {
		return errors.New("not an IPv6 address in brackets")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' || c == ':' || c == '.') {
			return fmt.Errorf("character %q in IPv6 address", c)
		}
	}
	return nil
}

// corsConfiguration is S3's GetBucketCors answer.
type corsConfiguration struct {
	XMLName xml.Name      `xml:"CORSConfiguration"`
	Xmlns   string        `xml:"xmlns,attr"`
	Rules   []corsRuleXML `xml:"CORSRule"`
}

type corsRuleXML struct {
	AllowedHeaders []string `xml:"AllowedHeader"`
	AllowedMethods []string `xml:"AllowedMethod"`
	AllowedOrigins []string `xml:"AllowedOrigin"`
	ExposeHeaders  []string `xml:"ExposeHeader"`
	MaxAgeSeconds  int      `xml:"MaxAgeSeconds,omitempty"`
}

// getBucketCORS answers GET ?cors: the effective rules, or 404
// NoSuchCORSConfiguration when the bucket has none.
func (s *server) getBucketCORS(req *request) {
	var rules []CORSRule
	if s.cfg.CORS != nil {
		rules = s.cfg.CORS.Rules(req.bucket)
	}
	if len(rules) == 0 {
		s.writeError(req, &apiError{Code: errNoSuchCORS, Bucket: req.bucket})
		return
	}
	out := &corsConfiguration{Xmlns: xmlNS}
	for _, r := range rules {
		out.Rules = append(out.Rules, corsRuleXML{AllowedHeaders: r.AllowedHeaders, AllowedMethods: r.AllowedMethods,
			AllowedOrigins: r.AllowedOrigins, ExposeHeaders: r.ExposeHeaders, MaxAgeSeconds: r.MaxAgeSeconds})
	}
	s.writeXML(req, http.StatusOK, out)
}

// corsActual adds the CORS headers of a request that is not a preflight:
// Vary: Origin on every response when CORS is configured (the answer
// depends on the Origin, so no cache may share it across origins), and the
// policy's headers when the request has an Origin that a rule allows.
func (s *server) corsActual(req *request) {
	if s.cfg.CORS == nil || len(s.cfg.CORS.Rules(req.bucket)) == 0 {
		return
	}
	h := req.w.Header()
	h.Add("Vary", "Origin")
	origin := req.r.Header.Get("Origin")
	if origin == "" {
		return
	}
	for k, vs := range s.cfg.CORS.Actual(req.bucket, origin, req.method) {
		if k == "Vary" {
			continue
		}
		h[k] = vs
	}
}
