package auth

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// maxPresignV2 caps how far in the future a SigV2 presigned URL may expire.
// AWS sets no cap for SigV2; wharf applies the SigV4 week so that no URL is
// a permanent credential.
const maxPresignV2 = 604800 * time.Second

// isSubResourceV2 reports whether a query parameter is one S3 includes in the
// SigV2 canonicalized resource: the union of AWS's documented list, botocore's
// (auth.py HmacV1Auth.QSAOfInterest) and minio-go's (pkg/signer resourceList).
func isSubResourceV2(k string) bool {
	switch k {
	case "accelerate", "acl", "analytics", "cors", "delete", "encryption", "inventory",
		"legal-hold", "lifecycle", "location", "logging", "metrics", "notification",
		"object-lock", "partNumber", "policy", "publicAccessBlock", "replication",
		"requestPayment", "restore", "retention", "select", "select-type", "tagging",
		"torrent", "uploadId", "uploads", "versionId", "versioning", "versions", "website",
		"response-cache-control", "response-content-disposition", "response-content-encoding",
		"response-content-language", "response-content-type", "response-expires":
		return true
	}
	return false
}

// rawPath returns the request path exactly as the client sent it.
func rawPath(r *http.Request) string {
	if strings.HasPrefix(r.RequestURI, "/") {
		p, _, _ := strings.Cut(r.RequestURI, "?")
		return p
	}
	return r.URL.EscapedPath()
}

// canonicalResourcesV2 returns the SigV2 canonicalized resources to try: the
// raw path as sent and the path re-encoded the AWS way (both denote the same
// decoded path), each followed by the signed sub-resources, sorted, with
// "=value" only for non-empty values. For a virtual-hosted request (Host
// "<bucket>.<base>" with a configured base) the paths are prefixed with
// "/<bucket>"; otherwise no bucket is guessed from the Host header.
func canonicalResourcesV2(r *http.Request, q Query, base string) []string {
	var keys []string
	vals := map[string]string{}
	for _, p := range q {
		if isSubResourceV2(p.Key) {
			if _, seen := vals[p.Key]; !seen {
				keys = append(keys, p.Key)
				vals[p.Key] = p.Value
			}
		}
	}
	sort.Strings(keys)
	var sub strings.Builder
	for i, k := range keys {
		if i == 0 {
			sub.WriteByte('?')
		} else {
			sub.WriteByte('&')
		}
		sub.WriteString(k)
		if vals[k] != "" {
			sub.WriteByte('=')
			sub.WriteString(vals[k])
		}
	}
	raw := rawPath(r)
	enc := canonicalURI(r.URL)
	if b := HostBucket(r.Host, base); b != "" {
		raw, enc = "/"+b+raw, "/"+b+enc
	}
	if raw == enc {
		return []string{raw + sub.String()}
	}
	return []string{raw + sub.String(), enc + sub.String()}
}

// amzHeadersV2 is the SigV2 CanonicalizedAmzHeaders block.
func amzHeadersV2(r *http.Request) string {
	var names []string
	for name := range r.Header {
		if n := strings.ToLower(name); strings.HasPrefix(n, "x-amz-") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte(':')
		for i, v := range r.Header.Values(n) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strings.TrimSpace(v))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// matchV2 recomputes the SigV2 signature over each canonical resource and
// compares it with sig in constant time. dateLine is the Date (header auth)
// or Expires (query auth) line of the string to sign.
func matchV2(r *http.Request, q Query, base, secret, dateLine string, sig []byte) bool {
	prefix := r.Method + "\n" + r.Header.Get("Content-Md5") + "\n" + r.Header.Get("Content-Type") + "\n" +
		dateLine + "\n" + amzHeadersV2(r)
	ok := false
	for _, res := range canonicalResourcesV2(r, q, base) {
		m := hmac.New(sha1.New, []byte(secret))
		m.Write([]byte(prefix + res))
		if hmac.Equal(m.Sum(nil), sig) {
			ok = true
		}
	}
	return ok
}

// decodeSigV2 decodes a base64 SigV2 signature. A '+' that arrived as a
// space (an unescaped '+' in a query string) is put back.
func decodeSigV2(s string) ([]byte, bool) {
	b, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(s, " ", "+"))
	return b, err == nil && len(b) == sha1.Size
}

// verifyV2Query verifies a SigV2 presigned URL
// (?AWSAccessKeyId=AK&Expires=unix&Signature=b64).
func (v *Verifier) verifyV2Query(r *http.Request, q Query) (Identity, error) {
	vals := map[string]string{}
	for _, name := range []string{"AWSAccessKeyId", "Expires", "Signature"} {
		val, n := q.first(name)
		if n != 1 {
			return Identity{}, &Error{Code: "AccessDenied", Status: http.StatusForbidden,
				Message: "Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters (each exactly once)"}
		}
		vals[name] = val
	}
	exp, err := strconv.ParseInt(vals["Expires"], 10, 64)
	if err != nil {
		return Identity{}, &Error{Code: "AccessDenied", Status: http.StatusForbidden,
			Message: "Invalid date (should be seconds since epoch): " + vals["Expires"]}
	}
	key, err := v.lookup(vals["AWSAccessKeyId"])
	if err != nil {
		return Identity{}, err
	}
	sig, ok := decodeSigV2(vals["Signature"])
	if !ok || !matchV2(r, q, v.cfg.VirtualHostBase, key.secret, vals["Expires"], sig) {
		return Identity{}, errSignature()
	}
	now := v.cfg.Now()
	if now.Unix() > exp {
		return Identity{}, errExpired()
	}
	// In seconds, not with time.Unix: it wraps around for an Expires near
	// the largest int64, which would make such a URL look already due.
	if exp-now.Unix() > int64((maxPresignV2+maxSkew)/time.Second) {
		return Identity{}, &Error{Code: "AccessDenied", Status: http.StatusForbidden,
			Message: "Expires is more than 7 days in the future; this endpoint does not accept longer-lived presigned URLs"}
	}
	return v.identity(vals["AWSAccessKeyId"]), nil
}

// verifyV2Header verifies SigV2 header authentication
// (Authorization: AWS AK:base64sig).
func (v *Verifier) verifyV2Header(r *http.Request, q Query, authz string) (Identity, error) {
	cred := strings.TrimSpace(strings.TrimPrefix(authz, "AWS "))
	i := strings.LastIndexByte(cred, ':')
	if i <= 0 {
		return Identity{}, errMalformedHeader(`expecting "AWS <AccessKeyId>:<Signature>"`)
	}
	ak := cred[:i]
	key, err := v.lookup(ak)
	if err != nil {
		return Identity{}, err
	}
	// With x-amz-date present the Date line of the string to sign is empty
	// and the time comes from x-amz-date (which is signed as an amz header).
	var t time.Time
	dateLine := ""
	if d := r.Header.Get("X-Amz-Date"); d != "" {
		t, err = parseHTTPDate(d)
	} else if d := r.Header.Get("Date"); d != "" {
		dateLine = d
		t, err = parseHTTPDate(d)
	} else {
		err = errNoDate
	}
	if err != nil {
		return Identity{}, &Error{Code: "AccessDenied", Status: http.StatusForbidden,
			Message: "AWS authentication requires a valid Date or x-amz-date header"}
	}
	if d := v.cfg.Now().Sub(t); d > maxSkew || d < -maxSkew {
		return Identity{}, errSkewed()
	}
	sig, ok := decodeSigV2(cred[i+1:])
	if !ok || !matchV2(r, q, v.cfg.VirtualHostBase, key.secret, dateLine, sig) {
		return Identity{}, errSignature()
	}
	return v.identity(ak), nil
}

// parseHTTPDate parses a Date or x-amz-date header: the HTTP formats
// (RFC 1123 with GMT, RFC 850, asctime), RFC 1123 with a numeric zone (as in
// AWS's SigV2 examples) or the zone name "UTC" (rclone's SigV2 signer), and
// the SigV4 basic ISO 8601 form.
func parseHTTPDate(s string) (time.Time, error) {
	if t, err := http.ParseTime(s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC1123Z, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC1123, s); err == nil && t.Location() == time.UTC {
		return t, nil
	}
	return time.Parse(iso8601Basic, s)
}

// HostBucket returns the bucket named by a virtual-hosted Host
// ("<bucket>.<base>", optional port, case-insensitive base), or "" when base
// is empty, host is an IP address, or host is not under base. The bucket
// label keeps the case it was sent with, since that is what was signed.
func HostBucket(host, base string) string {
	base = strings.ToLower(strings.TrimSuffix(base, "."))
	if base == "" || host == "" {
		return ""
	}
	h := host
	if hp, _, err := net.SplitHostPort(host); err == nil {
		h = hp
	}
	h = strings.TrimSuffix(h, ".")
	if net.ParseIP(strings.Trim(h, "[]")) != nil {
		return ""
	}
	if len(h) <= len(base)+1 || !strings.HasSuffix(strings.ToLower(h), "."+base) {
		return ""
	}
	return h[:len(h)-len(base)-1]
}
