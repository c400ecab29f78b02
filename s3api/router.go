package s3api

import (
	"bytes"
	"encoding/xml"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/auth"
)

// Operation names used as the op label of metrics and in access lines.
const (
	opListBuckets           = "ListBuckets"
	opHeadBucket            = "HeadBucket"
	opGetBucketLocation     = "GetBucketLocation"
	opGetBucketACL          = "GetBucketAcl"
	opGetBucketPolicy       = "GetBucketPolicy"
	opGetBucketCORS         = "GetBucketCors"
	opGetBucketVersioning   = "GetBucketVersioning"
	opGetBucketTagging      = "GetBucketTagging"
	opGetBucketPolicyStatus = "GetBucketPolicyStatus"
	opGetObjectLockConfig   = "GetObjectLockConfiguration"
	opListObjects           = "ListObjects"
	opListObjectsV2         = "ListObjectsV2"
	opListObjectVersions    = "ListObjectVersions"
	opHeadObject            = "HeadObject"
	opGetObject             = "GetObject"
	opGetObjectACL          = "GetObjectAcl"
	opGetObjectTagging      = "GetObjectTagging"
	opGetObjectAttributes   = "GetObjectAttributes"
	opGetObjectRetention    = "GetObjectRetention"
	opGetObjectLegalHold    = "GetObjectLegalHold"
	opRestoreObject         = "RestoreObject"
	opCORSPreflight         = "CORSPreflight"
	opNotImplemented        = "NotImplemented"
	opWrite                 = "Write"
	opMethodNotAllowed      = "MethodNotAllowed"
	opConsole               = "Console"
)

// allOps lists every op label, for pre-initialized metrics.
var allOps = []string{
	opListBuckets, opHeadBucket, opGetBucketLocation, opGetBucketACL,
	opGetBucketPolicy, opGetBucketCORS, opGetBucketVersioning, opGetBucketTagging,
	opGetBucketPolicyStatus, opGetObjectLockConfig,
	opListObjects, opListObjectsV2, opListObjectVersions, opHeadObject, opGetObject, opGetObjectACL,
	opGetObjectTagging, opGetObjectAttributes, opGetObjectRetention, opGetObjectLegalHold,
	opRestoreObject, opCORSPreflight, opNotImplemented, opWrite, opMethodNotAllowed, opConsole,
}

// subResources are the S3 query sub-resources that select an operation other
// than a listing or an object read. Some are answered (operationName); the
// rest are 501 NotImplemented, never a listing.
var subResources = map[string]bool{
	"accelerate": true, "acl": true, "analytics": true, "attributes": true,
	"cors": true, "delete": true, "encryption": true, "intelligent-tiering": true,
	"inventory": true, "legal-hold": true, "lifecycle": true, "location": true,
	"logging": true, "metadataConfiguration": true, "metadataTable": true,
	"metrics": true, "notification": true, "object-lock": true,
	"ownershipControls": true, "policy": true, "policyStatus": true,
	"publicAccessBlock": true, "replication": true, "requestPayment": true,
	"restore": true, "retention": true, "select": true, "session": true,
	"tagging": true, "torrent": true, "uploadId": true, "uploads": true,
	"versioning": true, "versions": true, "website": true, "renameObject": true,
}

// subResource returns the first sub-resource named in q ("" = none).
// Sub-resources are checked in a fixed order so the answer is deterministic.
func subResource(q auth.Query) string {
	var found string
	for _, p := range q {
		if subResources[p.Key] && (found == "" || p.Key < found) {
			found = p.Key
		}
	}
	return found
}

// address splits a request into bucket and key. Path-style always works;
// virtual-hosted addressing applies only when the Host is
// "<bucket>.<VirtualHostBase>" — never for an IP address or a host equal to
// the base. The key is the decoded path after the bucket, byte for byte
// ("//" kept, '+' literal).
func (s *server) address(r *http.Request) (bucket, key string) {
	p := r.URL.Path
	// The bucket label is served lower-cased (S3 bucket names are); auth
	// verifies SigV2 over the label as sent, which is what the client signed.
	if b := strings.ToLower(auth.HostBucket(r.Host, s.cfg.VirtualHostBase)); b != "" {
		return b, strings.TrimPrefix(p, "/")
	}
	p = strings.TrimPrefix(p, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, ""
}

// operationName names the S3 operation a request asks for.
func operationName(method, bucket string, hasKey bool, q auth.Query) string {
	switch method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		if hasKey && bucket != "" && subResource(q) == "restore" {
			return opRestoreObject
		}
		return opWrite
	case http.MethodPut, http.MethodDelete:
		return opWrite
	case http.MethodOptions:
		return opCORSPreflight
	default:
		return opMethodNotAllowed
	}
	if bucket == "" {
		return opListBuckets
	}
	sub := subResource(q)
	if !hasKey {
		if method == http.MethodHead && sub == "" {
			return opHeadBucket
		}
		switch sub {
		case "":
			if q.Get("list-type") == "2" {
				return opListObjectsV2
			}
			return opListObjects
		case "location":
			return opGetBucketLocation
		case "acl":
			return opGetBucketACL
		case "policy":
			return opGetBucketPolicy
		case "cors":
			return opGetBucketCORS
		case "versioning":
			return opGetBucketVersioning
		case "versions":
			return opListObjectVersions
		case "tagging":
			return opGetBucketTagging
		case "policyStatus":
			return opGetBucketPolicyStatus
		case "object-lock":
			return opGetObjectLockConfig
		}
		return opNotImplemented
	}
	switch sub {
	case "":
		if method == http.MethodHead {
			return opHeadObject
		}
		return opGetObject
	case "acl":
		return opGetObjectACL
	case "tagging":
		return opGetObjectTagging
	case "attributes":
		return opGetObjectAttributes
	case "retention":
		return opGetObjectRetention
	case "legal-hold":
		return opGetObjectLegalHold
	}
	return opNotImplemented
}

// route dispatches an authenticated, authorized GET or HEAD (or the one
// POST wharf serves, RestoreObject).
func (s *server) route(req *request) {
	switch req.op {
	case opListBuckets:
		s.listBuckets(req)
		return
	case opNotImplemented:
		s.writeError(req, &apiError{Code: errNotImplemented, Bucket: req.bucket, Key: req.key})
		return
	}
	a, ok, err := s.cfg.Catalog.Bucket(req.r.Context(), req.bucket)
	if !ok {
		s.writeError(req, &apiError{Code: errNoSuchBucket, Bucket: req.bucket})
		return
	}
	if err != nil {
		s.bucketUnavailable(req, err)
		return
	}
	switch req.op {
	case opHeadBucket:
		s.headBucket(req)
	case opGetBucketLocation:
		s.getBucketLocation(req)
	case opGetBucketACL:
		s.getACL(req)
	case opGetBucketPolicy:
		s.writeError(req, &apiError{Code: errNoSuchBucketPolicy, Bucket: req.bucket})
	case opGetBucketCORS:
		s.getBucketCORS(req)
	case opGetBucketVersioning:
		s.getBucketVersioning(req)
	case opGetBucketTagging:
		s.writeError(req, &apiError{Code: errNoSuchTagSet, Bucket: req.bucket})
	case opGetBucketPolicyStatus:
		s.getBucketPolicyStatus(req)
	case opGetObjectLockConfig:
		s.writeError(req, &apiError{Code: errNoObjectLockConfig, Bucket: req.bucket})
	case opGetObjectRetention, opGetObjectLegalHold:
		// No bucket has Object Lock, so no object has a retention or a
		// legal hold: S3 answers this without looking at the key.
		s.writeError(req, &apiError{Code: errInvalidRequest, Bucket: req.bucket, Key: req.key,
			Message: "Bucket is missing Object Lock Configuration"})
	case opGetObjectAttributes:
		s.getObjectAttributes(req, a)
	case opListObjects:
		s.listObjects(req, a, false)
	case opListObjectsV2:
		s.listObjects(req, a, true)
	case opListObjectVersions:
		s.listObjectVersions(req, a)
	case opGetObjectACL, opGetObjectTagging:
		// The key (or the version ?versionId names) must exist.
		if _, _, _, ok := s.objectVersion(req, a); !ok {
			return
		}
		if req.op == opGetObjectACL {
			s.getACL(req)
		} else {
			s.writeXML(req, http.StatusOK, &tagging{})
		}
	case opHeadObject, opGetObject:
		s.getObject(req, a)
	case opRestoreObject:
		s.restoreObject(req, a)
	default:
		s.writeError(req, &apiError{Code: errNotImplemented, Bucket: req.bucket, Key: req.key})
	}
}

const xmlNS = "http://s3.amazonaws.com/doc/2006-03-01/"

// writeXML writes a 200-class XML response (no body for HEAD).
func (s *server) writeXML(req *request, status int, v any) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	if err := xml.NewEncoder(&buf).Encode(v); err != nil {
		s.writeError(req, &apiError{Code: errInternalError, Bucket: req.bucket, Key: req.key, Cause: err})
		return
	}
	s.writeBody(req, status, "application/xml", buf.Bytes())
}

// writeBody writes a complete small response (no body for HEAD).
func (s *server) writeBody(req *request, status int, contentType string, body []byte) {
	h := req.w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	req.w.WriteHeader(status)
	if req.method != http.MethodHead {
		_, _ = req.w.Write(body)
	}
}

// objectHeaders are the headers GetObject/HeadObject set for an object,
// removed from an error response.
var objectHeaders = []string{
	"ETag", "Last-Modified", "Accept-Ranges", "Content-Range", "x-amz-version-id",
	"x-amz-checksum-sha256", "x-amz-checksum-type", "x-amz-mp-parts-count", "x-amz-meta-mtime",
	"x-amz-storage-class", "x-amz-archive-status", "x-amz-restore",
	"Content-Language", "Expires", "Cache-Control", "Content-Disposition", "Content-Encoding",
}

// writeError writes an S3 error response. HEAD responses carry no body.
// RequestId in the body equals the x-amz-request-id header.
func (s *server) writeError(req *request, e *apiError) {
	if e.Cause != nil && req.cause == nil {
		req.cause = e.Cause
	}
	if req.w.wroteHeader {
		return
	}
	h := req.w.Header()
	// An error has no object: drop the object headers a handler may have
	// set before it failed (a client validating x-amz-checksum-* or
	// decoding Content-Encoding would apply them to the error document).
	for _, k := range objectHeaders {
		h.Del(k)
	}
	for k, vs := range e.Header {
		h[k] = vs
	}
	status := e.status()
	body := errorResponse{
		Code:       string(e.Code),
		Message:    e.message(),
		Key:        e.Key,
		BucketName: e.Bucket,
		Resource:   req.r.URL.Path,
		RequestID:  req.id,
		HostID:     req.hostID,
	}
	if e.Range != nil {
		size := e.Range.size
		body.RangeRequested, body.ActualObjectSize = e.Range.requested, &size
	}
	body.StorageClass, body.AccessTier = e.StorageClass, e.AccessTier
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	if err := xml.NewEncoder(&buf).Encode(body); err != nil {
		buf.Reset()
	}
	h.Set("Content-Type", "application/xml")
	if req.method == http.MethodHead {
		h.Del("Content-Length")
		req.w.WriteHeader(status)
		return
	}
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	req.w.WriteHeader(status)
	_, _ = req.w.Write(buf.Bytes())
}

// retryAfterOpening is the Retry-After (seconds) of a 503 for a bucket
// whose archive is still opening.
const retryAfterOpening = "2"

// bucketUnavailable answers a request for a served bucket whose archive is
// not open: still opening after the catalog's wait (503 SlowDown with
// Retry-After, which every SDK retries), or failed to open (500, or 503
// SlowDown when the error says it is Transient: the store unavailable, the
// open's deadline, the index memory in use, each tried again at the next
// rescan; the log has the open error, the client only the error's
// PublicMessage when it has one (catalog.OpenFailure: the bucket and the
// kind of failure, never the store's text), else a generic message).
func (s *server) bucketUnavailable(req *request, err error) {
	switch {
	case req.r.Context().Err() != nil:
		req.cause = err
		panic(http.ErrAbortHandler) // the client went away while waiting
	case errors.Is(err, archiveview.ErrOpening):
		s.writeError(req, &apiError{Code: errSlowDown, Bucket: req.bucket, Key: req.key, Cause: err,
			Message: "The archive served as this bucket is still being opened; retry shortly.",
			Header:  http.Header{"Retry-After": []string{retryAfterOpening}}})
	default:
		// The failure is logged at error by the scan that met it (once a
		// scan); this request's access line (a warning) carries it.
		msg := "The archive served as this bucket could not be opened. The server's log has the details."
		var pub interface{ PublicMessage() string }
		if errors.As(err, &pub) {
			msg = pub.PublicMessage()
		}
		code := errInternalError
		var tr interface{ Transient() bool }
		if errors.As(err, &tr) && tr.Transient() {
			code = errSlowDown // the store's or this server's passing state: retry
		}
		s.writeError(req, &apiError{Code: code, Bucket: req.bucket, Key: req.key, Cause: err, Message: msg})
	}
}
