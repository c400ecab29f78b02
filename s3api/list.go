package s3api

import (
	"encoding/xml"
	"net/http"
	"strconv"

	"github.com/wharf-s3/wharf/archiveview"
)

// maxKeysCap is both the default and the cap of max-keys, as on AWS.
const maxKeysCap = 1000

type listObject struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	Owner        *owner `xml:"Owner,omitempty"`
	StorageClass string `xml:"StorageClass"`
}

type commonPrefix struct {
	Prefix string `xml:"Prefix"`
}

// listBucketResultV1 is the ListObjects (v1) response.
type listBucketResultV1 struct {
	XMLName        xml.Name       `xml:"ListBucketResult"`
	Xmlns          string         `xml:"xmlns,attr"`
	Name           string         `xml:"Name"`
	Prefix         string         `xml:"Prefix"`
	Marker         string         `xml:"Marker"`
	NextMarker     string         `xml:"NextMarker,omitempty"`
	MaxKeys        int            `xml:"MaxKeys"`
	Delimiter      string         `xml:"Delimiter,omitempty"`
	IsTruncated    bool           `xml:"IsTruncated"`
	EncodingType   string         `xml:"EncodingType,omitempty"`
	Contents       []listObject   `xml:"Contents"`
	CommonPrefixes []commonPrefix `xml:"CommonPrefixes"`
}

// listBucketResultV2 is the ListObjectsV2 response.
type listBucketResultV2 struct {
	XMLName               xml.Name       `xml:"ListBucketResult"`
	Xmlns                 string         `xml:"xmlns,attr"`
	Name                  string         `xml:"Name"`
	Prefix                string         `xml:"Prefix"`
	StartAfter            string         `xml:"StartAfter,omitempty"`
	ContinuationToken     string         `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string         `xml:"NextContinuationToken,omitempty"`
	KeyCount              int            `xml:"KeyCount"`
	MaxKeys               int            `xml:"MaxKeys"`
	Delimiter             string         `xml:"Delimiter,omitempty"`
	IsTruncated           bool           `xml:"IsTruncated"`
	EncodingType          string         `xml:"EncodingType,omitempty"`
	Contents              []listObject   `xml:"Contents"`
	CommonPrefixes        []commonPrefix `xml:"CommonPrefixes"`
}

// listQuery is the parsed, validated query of a listing.
type listQuery struct {
	prefix, delimiter string
	maxKeys           int
	encodeURL         bool
	// v1
	marker string
	// v2
	token, startAfter string
	hasToken          bool
	fetchOwner        bool
	after             string // the effective exclusive start
}

// parseListQuery validates a listing query. Empty prefix= and delimiter= mean
// absent; max-keys defaults to and is capped at 1000, 0 is allowed, negative
// or non-numeric values are 400 InvalidArgument; a continuation token wins
// over start-after; a bad token is 400 InvalidArgument.
func parseListQuery(q map[string][]string, v2 bool) (listQuery, *apiError) {
	get := func(k string) string {
		if vs := q[k]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
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
	if _, ok := q["continuation-token"]; ok {
		lq.token = get("continuation-token")
		lq.hasToken = true
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
func (s *Server) listObjects(req *request, a *archiveview.Archive, v2 bool) {
	q := req.r.URL.Query()
	lq, apiErr := parseListQuery(q, v2)
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
		})
	}
	enc := func(v string) string { return v }
	encType := ""
	if lq.encodeURL {
		enc = urlEncode
		encType = "url"
	}
	var o *owner
	if !v2 || lq.fetchOwner {
		o = s.owner()
	}
	contents := make([]listObject, 0, len(res.Entries))
	var prefixes []commonPrefix
	for _, e := range res.Entries {
		if e.Prefix != "" {
			prefixes = append(prefixes, commonPrefix{Prefix: enc(e.Prefix)})
			continue
		}
		f := e.File
		contents = append(contents, listObject{
			Key:          enc(f.Key),
			LastModified: xmlTime(f.ModTime),
			ETag:         quoteETag(f.ETag),
			Size:         f.Size,
			Owner:        o,
			StorageClass: "STANDARD",
		})
	}
	if !v2 {
		out := listBucketResultV1{
			Xmlns:          xmlNS,
			Name:           req.bucket,
			Prefix:         enc(lq.prefix),
			Marker:         enc(lq.marker),
			MaxKeys:        lq.maxKeys,
			Delimiter:      enc(lq.delimiter),
			IsTruncated:    res.Truncated,
			EncodingType:   encType,
			Contents:       contents,
			CommonPrefixes: prefixes,
		}
		if res.Truncated {
			// Always, even without a delimiter: rclone treats a truncated
			// page without NextMarker (and without Contents) as an error.
			out.NextMarker = enc(res.NextAfter)
		}
		s.writeXML(req, http.StatusOK, &out)
		return
	}
	out := listBucketResultV2{
		Xmlns:          xmlNS,
		Name:           req.bucket,
		Prefix:         enc(lq.prefix),
		StartAfter:     enc(lq.startAfter),
		KeyCount:       len(contents) + len(prefixes),
		MaxKeys:        lq.maxKeys,
		Delimiter:      enc(lq.delimiter),
		IsTruncated:    res.Truncated,
		EncodingType:   encType,
		Contents:       contents,
		CommonPrefixes: prefixes,
	}
	if lq.hasToken {
		out.ContinuationToken = lq.token
	}
	if res.Truncated {
		out.NextContinuationToken = encodeToken(res.NextAfter)
	}
	s.writeXML(req, http.StatusOK, &out)
}

// quoteETag returns the ETag in the quoted form S3 uses everywhere.
func quoteETag(etag string) string { return `"` + etag + `"` }
