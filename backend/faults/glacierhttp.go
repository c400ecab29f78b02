package faults

// GlacierHTTP: the Glacier model in front of an S3 server's http.Handler
// (gofakes3 in tests), so that real clients and S3Store see archive classes
// and restores on the wire. Path-style addressing (/BUCKET/KEY) only.

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// HTTP returns an http.Handler that applies the model to the S3 server
// next:
//
//   - GET of an object that needs a restore and has no finished one: 403
//     InvalidObjectState with StorageClass and AccessTier in the XML body
//     (404 first if the object does not exist);
//   - GET and HEAD of an object: x-amz-storage-class (except STANDARD),
//     x-amz-archive-status and x-amz-restore added to a successful answer;
//   - listings (ListObjects, ListObjectsV2, ListObjectVersions): each
//     entry's StorageClass set from the model, and a RestoreStatus element
//     for objects with a restore when the request has
//     x-amz-optional-object-attributes: RestoreStatus;
//   - POST /BUCKET/KEY?restore with a RestoreRequest body: RestoreObject,
//     answered by the model (202, 200, 409 RestoreAlreadyInProgress, 403
//     InvalidObjectState, 400 InvalidArgument or MalformedXML, 404).
//
// Everything else goes to next unchanged.
func (g *Glacier) HTTP(next http.Handler) http.Handler {
	return &glacierHandler{g: g, next: next}
}

type glacierHandler struct {
	g    *Glacier
	next http.Handler
}

// listParams are the query parameters of a listing; a bucket GET with any
// other parameter (location, acl, uploads...) is not one.
var listParams = map[string]bool{
	"list-type": true, "prefix": true, "delimiter": true, "marker": true, "max-keys": true,
	"encoding-type": true, "continuation-token": true, "start-after": true, "fetch-owner": true,
	"versions": true, "key-marker": true, "version-id-marker": true,
}

// objectParams are the query parameters of a plain GetObject/HeadObject.
var objectParams = map[string]bool{
	"versionId": true, "partNumber": true, "response-content-type": true, "response-content-language": true,
	"response-expires": true, "response-cache-control": true, "response-content-disposition": true,
	"response-content-encoding": true, "x-id": true,
}

func onlyParams(q url.Values, allowed map[string]bool) bool {
	for k := range q {
		if !allowed[k] && !strings.HasPrefix(k, "X-Amz-") {
			return false
		}
	}
	return true
}

// ServeHTTP implements http.Handler.
func (h *glacierHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	switch {
	case bucket == "":
		h.next.ServeHTTP(w, r)
	case key == "" && r.Method == http.MethodGet && onlyParams(q, listParams):
		h.list(w, r, bucket, q)
	case key != "" && r.Method == http.MethodPost && q.Has("restore"):
		h.restore(w, r, bucket, key)
	case key != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) && onlyParams(q, objectParams):
		h.object(w, r, bucket, key)
	default:
		h.next.ServeHTTP(w, r)
	}
}

// exists asks next for a HEAD of the object and returns its status.
func (h *glacierHandler) exists(r *http.Request, bucket, key string) int {
	hr := r.Clone(r.Context())
	hr.Method = http.MethodHead
	hr.Body = http.NoBody
	hr.ContentLength = 0
	hr.Header = http.Header{}
	hr.URL = &url.URL{Path: "/" + bucket + "/" + key}
	hr.RequestURI = hr.URL.EscapedPath()
	rec := &captureWriter{header: http.Header{}}
	h.next.ServeHTTP(rec, hr)
	return rec.statusOr200()
}

func (h *glacierHandler) object(w http.ResponseWriter, r *http.Request, bucket, key string) {
	st := h.g.State(bucket, key)
	if r.Method == http.MethodGet && !st.Readable {
		if code := h.exists(r, bucket, key); code != http.StatusOK {
			h.next.ServeHTTP(w, r) // the server's own 404 (or other) answer
			return
		}
		h.g.countRefusal()
		writeGlacierError(w, r, http.StatusForbidden, "InvalidObjectState",
			"The operation is not valid for the object's storage class", st.Class, st.Tier)
		return
	}
	hw := &headerWriter{ResponseWriter: w, st: st}
	h.next.ServeHTTP(hw, r)
	if !hw.wrote {
		hw.WriteHeader(http.StatusOK) // a HEAD answered without an explicit status
	}
}

// headerWriter adds the storage headers to a successful answer.
type headerWriter struct {
	http.ResponseWriter
	st    GlacierState
	wrote bool
}

func (hw *headerWriter) WriteHeader(code int) {
	if !hw.wrote {
		hw.wrote = true
		if code < 300 {
			h := hw.Header()
			h.Del("x-amz-storage-class")
			if hw.st.Class != backend.ClassStandard {
				h.Set("x-amz-storage-class", hw.st.Class)
			}
			if hw.st.Tier != "" {
				h.Set("x-amz-archive-status", hw.st.Tier)
			}
			if v := backend.FormatRestoreHeader(hw.st.Restore); v != "" {
				h.Set("x-amz-restore", v)
			}
		}
	}
	hw.ResponseWriter.WriteHeader(code)
}

func (hw *headerWriter) Write(p []byte) (int, error) {
	if !hw.wrote {
		hw.WriteHeader(http.StatusOK)
	}
	return hw.ResponseWriter.Write(p)
}

func (hw *headerWriter) Flush() {
	if fl, ok := hw.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// captureWriter keeps a whole response.
type captureWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}
func (c *captureWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(p)
}
func (c *captureWriter) statusOr200() int {
	if c.status == 0 {
		return http.StatusOK
	}
	return c.status
}

// list passes a listing through next and rewrites its entries' storage.
func (h *glacierHandler) list(w http.ResponseWriter, r *http.Request, bucket string, q url.Values) {
	rec := &captureWriter{header: http.Header{}}
	h.next.ServeHTTP(rec, r)
	body := rec.body.Bytes()
	if rec.statusOr200() == http.StatusOK {
		withRestore := false
		for _, v := range r.Header.Values("x-amz-optional-object-attributes") {
			for a := range strings.SplitSeq(v, ",") {
				if strings.TrimSpace(a) == "RestoreStatus" {
					withRestore = true
				}
			}
		}
		body = h.rewriteListing(body, bucket, q.Get("encoding-type") == "url", withRestore)
	}
	for k, vs := range rec.header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.statusOr200())
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// rewriteListing sets StorageClass (and RestoreStatus) in every <Contents>
// and <Version> entry of a listing document, found by text: the server's
// own XML is kept byte for byte otherwise.
func (h *glacierHandler) rewriteListing(doc []byte, bucket string, urlKeys, withRestore bool) []byte {
	var out bytes.Buffer
	s := string(doc)
	for {
		i, tag := nextEntry(s)
		if i < 0 {
			out.WriteString(s)
			return out.Bytes()
		}
		end := strings.Index(s[i:], "</"+tag+">")
		if end < 0 {
			out.WriteString(s)
			return out.Bytes()
		}
		end += i
		entry := s[i:end]
		out.WriteString(s[:i])
		out.WriteString(h.rewriteEntry(entry, bucket, urlKeys, withRestore))
		s = s[end:]
	}
}

// nextEntry finds the next <Contents> or <Version> element.
func nextEntry(s string) (int, string) {
	c := strings.Index(s, "<Contents>")
	v := strings.Index(s, "<Version>")
	switch {
	case c < 0 && v < 0:
		return -1, ""
	case v < 0 || (c >= 0 && c < v):
		return c, "Contents"
	}
	return v, "Version"
}

// rewriteEntry rewrites one entry's text (without its closing tag).
func (h *glacierHandler) rewriteEntry(entry, bucket string, urlKeys, withRestore bool) string {
	ks := strings.Index(entry, "<Key>")
	ke := strings.Index(entry, "</Key>")
	if ks < 0 || ke < ks {
		return entry
	}
	var key string
	if err := xml.Unmarshal([]byte("<k>"+entry[ks+5:ke]+"</k>"), &key); err != nil {
		return entry
	}
	if urlKeys {
		if k, err := url.QueryUnescape(key); err == nil {
			key = k
		}
	}
	st := h.g.State(bucket, key)
	if a := strings.Index(entry, "<StorageClass>"); a >= 0 {
		if b := strings.Index(entry[a:], "</StorageClass>"); b >= 0 {
			entry = entry[:a] + entry[a+b+len("</StorageClass>"):]
		}
	}
	var b strings.Builder
	b.WriteString(entry)
	b.WriteString("<StorageClass>" + st.Class + "</StorageClass>")
	if withRestore && st.Restore.Requested {
		b.WriteString("<RestoreStatus><IsRestoreInProgress>" + strconv.FormatBool(st.Restore.Ongoing) + "</IsRestoreInProgress>")
		if !st.Restore.Expiry.IsZero() {
			b.WriteString("<RestoreExpiryDate>" + st.Restore.Expiry.UTC().Format("2006-01-02T15:04:05.000Z") + "</RestoreExpiryDate>")
		}
		b.WriteString("</RestoreStatus>")
	}
	return b.String()
}

// restoreBody is the RestoreRequest document the model reads.
type restoreBody struct {
	XMLName              xml.Name `xml:"RestoreRequest"`
	Days                 *int     `xml:"Days"`
	GlacierJobParameters *struct {
		Tier string `xml:"Tier"`
	} `xml:"GlacierJobParameters"`
}

// maxRestoreBody bounds the RestoreRequest body the model reads.
const maxRestoreBody = 64 << 10

func (h *glacierHandler) restore(w http.ResponseWriter, r *http.Request, bucket, key string) {
	if code := h.exists(r, bucket, key); code != http.StatusOK {
		writeGlacierError(w, r, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.", "", "")
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxRestoreBody+1))
	if err != nil || len(data) > maxRestoreBody {
		writeGlacierError(w, r, http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema", "", "")
		return
	}
	var rb restoreBody
	if len(bytes.TrimSpace(data)) > 0 {
		if err := xml.Unmarshal(data, &rb); err != nil {
			writeGlacierError(w, r, http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema", "", "")
			return
		}
	}
	req := backend.RestoreRequest{}
	if rb.Days != nil {
		req.Days = *rb.Days
		if req.Days < 1 {
			writeGlacierError(w, r, http.StatusBadRequest, "InvalidArgument", "Days must be a positive integer", "", "")
			return
		}
	}
	if rb.GlacierJobParameters != nil {
		req.Tier = rb.GlacierJobParameters.Tier
	}
	res, err := h.g.restore(bucket, key, req)
	st := h.g.State(bucket, key)
	switch {
	case errors.Is(err, backend.ErrNotArchived):
		writeGlacierError(w, r, http.StatusForbidden, "InvalidObjectState", "Restore is not allowed for the object's current storage class", st.Class, "")
	case err != nil:
		writeGlacierError(w, r, http.StatusBadRequest, "InvalidArgument", err.Error(), "", "")
	case res == backend.RestoreInProgress:
		writeGlacierError(w, r, http.StatusConflict, "RestoreAlreadyInProgress", "Object restore is already in progress", "", "")
	case res == backend.RestoreStarted:
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusAccepted)
	default:
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	}
}

// writeGlacierError writes an S3 error document with the InvalidObjectState
// fields (StorageClass, AccessTier) when given.
func writeGlacierError(w http.ResponseWriter, r *http.Request, status int, code, msg, class, tier string) {
	writeErrorDoc(w, r, status, "glacier-"+strconv.FormatInt(time.Now().UnixNano(), 36), code, msg, class, tier)
}
