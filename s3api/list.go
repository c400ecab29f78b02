package s3api

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"strconv"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/auth"
)

// maxKeysCap is both the default and the cap of max-keys, as on AWS.
const maxKeysCap = 1000

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
	if q.Has("continuation-token") {
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
	lq, apiErr := parseListQuery(req.query, v2)
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
	if lq.encodeURL {
		enc = encodeURLKey
	}
	withOwner := !v2 || lq.fetchOwner
	nPrefixes := 0
	for _, e := range res.Entries {
		if e.Prefix != "" {
			nPrefixes++
		}
	}

	// The page is written by hand: encoding/xml's reflection was two thirds
	// of a 1000-key page's cost. Text goes through xml.EscapeText, the
	// escaping encoding/xml itself uses.
	var b xmlWriter
	b.Grow(256 + 320*len(res.Entries))
	b.WriteString(xml.Header)
	b.WriteString(`<ListBucketResult xmlns="` + xmlNS + `">`)
	b.elem("Name", req.bucket)
	b.elem("Prefix", enc(lq.prefix))
	if v2 {
		if lq.startAfter != "" {
			b.elem("StartAfter", enc(lq.startAfter))
		}
		if lq.hasToken {
			b.elem("ContinuationToken", lq.token)
		}
		if res.Truncated {
			b.elem("NextContinuationToken", encodeToken(res.NextAfter))
		}
		b.elem("KeyCount", strconv.Itoa(len(res.Entries)))
	} else {
		b.elem("Marker", enc(lq.marker))
		if res.Truncated {
			// Always, even without a delimiter: rclone treats a truncated
			// page without NextMarker (and without Contents) as an error.
			b.elem("NextMarker", enc(res.NextAfter))
		}
	}
	b.elem("MaxKeys", strconv.Itoa(lq.maxKeys))
	if lq.delimiter != "" {
		b.elem("Delimiter", enc(lq.delimiter))
	}
	b.elem("IsTruncated", strconv.FormatBool(res.Truncated))
	if lq.encodeURL {
		b.elem("EncodingType", "url")
	}
	var ownerXML string
	if withOwner {
		var ob xmlWriter
		ob.WriteString("<Owner>")
		ob.elem("ID", s.cfg.OwnerID)
		ob.elem("DisplayName", s.cfg.OwnerName)
		ob.WriteString("</Owner>")
		ownerXML = ob.String()
	}
	var lastMod time.Time
	var lastModStr string
	for _, e := range res.Entries {
		if e.Prefix != "" {
			continue
		}
		f := e.File
		if !f.ModTime.Equal(lastMod) || lastModStr == "" {
			lastMod, lastModStr = f.ModTime, xmlTime(f.ModTime)
		}
		b.WriteString("<Contents>")
		b.elem("Key", enc(f.Key))
		b.elem("LastModified", lastModStr)
		b.WriteString("<ETag>&#34;")
		b.text(f.ETag)
		b.WriteString("&#34;</ETag>")
		b.elem("Size", strconv.FormatInt(f.Size, 10))
		b.WriteString(ownerXML)
		b.WriteString("<StorageClass>STANDARD</StorageClass></Contents>")
	}
	if nPrefixes > 0 {
		for _, e := range res.Entries {
			if e.Prefix == "" {
				continue
			}
			b.WriteString("<CommonPrefixes>")
			b.elem("Prefix", enc(e.Prefix))
			b.WriteString("</CommonPrefixes>")
		}
	}
	b.WriteString("</ListBucketResult>")
	s.writeBody(req, http.StatusOK, "application/xml", b.Bytes())
}

// xmlWriter builds XML text by hand for the hot listing path.
type xmlWriter struct{ bytes.Buffer }

// elem writes <name>text</name> with text escaped as encoding/xml does.
func (w *xmlWriter) elem(name, text string) {
	w.WriteByte('<')
	w.WriteString(name)
	w.WriteByte('>')
	w.text(text)
	w.WriteString("</")
	w.WriteString(name)
	w.WriteByte('>')
}

// text writes character data escaped as encoding/xml does.
func (w *xmlWriter) text(s string) {
	if plainXMLText(s) {
		w.WriteString(s)
		return
	}
	_ = xml.EscapeText(&w.Buffer, []byte(s))
}

// plainXMLText reports whether s is printable ASCII needing no escaping.
func plainXMLText(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '&' || c == '<' || c == '>' || c == '"' || c == '\'' {
			return false
		}
	}
	return true
}

// encodeURLKey is encoding-type=url: keys, prefixes, markers and the
// delimiter encoded as S3 does, which is auth.URIEncode keeping '/'.
func encodeURLKey(s string) string { return auth.URIEncode(s, true) }

// quoteETag returns the ETag in the quoted form S3 uses everywhere.
func quoteETag(etag string) string { return `"` + etag + `"` }
