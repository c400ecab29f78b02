package s3api

import (
	"net/http"
	"strconv"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/auth"
)

// maxKeysCap is both the default and the cap of max-keys, as on AWS.
const maxKeysCap = 1000

// maxPageNameBytes ends a listing page (truncated, to be continued) once
// its keys and common prefixes total 1 MiB, so a page stays bounded in
// memory when an archive holds keys up to the manifest's 4096-byte limit
// (a 1000-key page of them, URL-encoded, was 12 MB). AWS allows a page of
// fewer than max-keys entries, and every client follows IsTruncated. Keys
// within AWS's own 1024-byte limit never shorten a page: 999 of them are
// under 1 MiB.
const maxPageNameBytes = 1 << 20

// listQuery is the parsed, validated query of a listing.
type listQuery struct {
	prefix, delimiter string
	maxKeys           int
	encodeURL         bool
	// v1
	marker string
	// v2
	token, startAfter string
	tokenGiven        bool // continuation-token= was sent, maybe empty
	fetchOwner        bool
	after             string // the effective exclusive start
	// restoreStatus: x-amz-optional-object-attributes asked for
	// RestoreStatus (restore.go).
	restoreStatus bool
}

// parseListQuery validates a listing query. Empty prefix=, delimiter= and
// continuation-token= mean absent; max-keys defaults to and is capped at
// 1000, 0 is allowed, negative or non-numeric values are 400
// InvalidArgument; a continuation token wins over start-after; a bad token
// is 400 InvalidArgument.
func parseListQuery(q auth.Query, v2 bool) (listQuery, *apiError) {
	get := q.Get
	lq := listQuery{
		prefix:    get("prefix"),
		delimiter: get("delimiter"),
		maxKeys:   maxKeysCap,
	}
	if mk := get("max-keys"); mk != "" {
		n, err := strconv.Atoi(mk)
		if err != nil || n < 0 {
			return lq, &apiError{Code: errInvalidArgument, Message: "Provided max-keys not an integer or within integer range"}
		}
		if n < maxKeysCap {
			lq.maxKeys = n
		}
	}
	switch et := get("encoding-type"); et {
	case "":
	case "url", "URL", "Url":
		lq.encodeURL = true
	default:
		return lq, &apiError{Code: errInvalidArgument, Message: "Invalid Encoding Method specified in Request"}
	}
	if !v2 {
		lq.marker = get("marker")
		lq.after = lq.marker
		return lq, nil
	}
	lq.startAfter = get("start-after")
	lq.after = lq.startAfter
	// An empty continuation-token= is absent for paging, as on S3 (some
	// clients send the parameter on the first page), and echoed empty.
	lq.tokenGiven = q.Has("continuation-token")
	if tok := get("continuation-token"); tok != "" {
		lq.token = tok
		after, err := decodeToken(lq.token)
		if err != nil {
			return lq, &apiError{Code: errInvalidArgument, Message: "The continuation token provided is incorrect"}
		}
		lq.after = after
	}
	switch get("fetch-owner") {
	case "true", "TRUE", "True":
		lq.fetchOwner = true
	}
	return lq, nil
}

// listObjects answers ListObjects (v1) and ListObjectsV2 in O(log n + page)
// through archiveview.List.
func (s *server) listObjects(req *request, a *archiveview.Archive, v2 bool) {
	lq, apiErr := parseListQuery(req.query, v2)
	if apiErr == nil {
		lq.restoreStatus, apiErr = parseOptionalAttributes(amzHeader(req.r.Header, req.query, "x-amz-optional-object-attributes"))
	}
	if apiErr != nil {
		apiErr.Bucket = req.bucket
		s.writeError(req, apiErr)
		return
	}
	var res archiveview.ListResult
	if lq.maxKeys > 0 {
		res = a.List(archiveview.ListParams{
			Prefix:    lq.prefix,
			Delimiter: lq.delimiter,
			After:     lq.after,
			MaxKeys:   lq.maxKeys,

			MaxNameBytes: maxPageNameBytes,
		})
	}
	withOwner := !v2 || lq.fetchOwner
	w := s.newListXML("ListBucketResult", req.bucket, lq, len(res.Entries), withOwner)
	if v2 {
		if lq.startAfter != "" {
			w.encElem("StartAfter", lq.startAfter)
		}
		if lq.tokenGiven {
			w.elem("ContinuationToken", lq.token)
		}
		if res.Truncated {
			w.elem("NextContinuationToken", encodeToken(res.NextAfter))
		}
		w.elem("KeyCount", strconv.Itoa(len(res.Entries)))
	} else {
		w.encElem("Marker", lq.marker)
		if res.Truncated {
			// Always, even without a delimiter: rclone treats a truncated
			// page without NextMarker (and without Contents) as an error.
			w.encElem("NextMarker", res.NextAfter)
		}
	}
	w.common(lq, res.Truncated)
	if lq.restoreStatus {
		prepareStorage(s, req, a, res.Entries, func(e archiveview.ListEntry) (archiveview.File, bool) { return e.File, e.Prefix == "" })
	}
	for _, e := range res.Entries {
		if e.Prefix != "" {
			continue
		}
		f := e.File
		class, restore, err := s.entryStorage(req, a, f, lq.restoreStatus)
		if err != nil {
			s.readFailed(req, a, req.r.Context(), err)
			return
		}
		w.WriteString("<Contents>")
		w.key(f.Key)
		w.lastModified(f.ModTime)
		w.etag(f.ETag)
		w.size(f.Size)
		w.ownerElem()
		w.storageClass(class)
		w.restoreStatus(restore)
		w.WriteString("</Contents>")
	}
	for _, e := range res.Entries {
		if e.Prefix != "" {
			w.commonPrefix(e.Prefix)
		}
	}
	s.writeBody(req, http.StatusOK, "application/xml", w.close())
}

// encodeURLKey is encoding-type=url: keys, prefixes, markers and the
// delimiter encoded as S3 does, which is auth.URIEncode keeping '/'.
func encodeURLKey(s string) string { return auth.URIEncode(s, true) }

// quoteETag returns the ETag in the quoted form S3 uses everywhere.
func quoteETag(etag string) string { return `"` + etag + `"` }
