package s3api

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/backend"
)

// responseOverrides maps response-* query parameters to the header each
// overrides on GetObject/HeadObject.
var responseOverrides = [...][2]string{
	{"response-content-type", "Content-Type"},
	{"response-content-language", "Content-Language"},
	{"response-expires", "Expires"},
	{"response-cache-control", "Cache-Control"},
	{"response-content-disposition", "Content-Disposition"},
	{"response-content-encoding", "Content-Encoding"},
}

// contentType is the archive's type for f, else one guessed from the key's
// extension, else application/octet-stream. Listing, HEAD and GET agree.
func contentType(f archiveview.File) string {
	if f.ContentType != "" {
		return f.ContentType
	}
	if ext := path.Ext(f.Key); ext != "" {
		if t := mime.TypeByExtension(ext); t != "" {
			return t
		}
	}
	return "application/octet-stream"
}

// Cache-Control values (Config.FollowsUpdates).
const (
	// cacheFixed: a fixed archive's object, or a pinned version, never
	// changes under its key; a year is the longest RFC 9111 freshness
	// clients honour.
	cacheFixed = "max-age=31536000, immutable"
	// cacheFollowing: an alias moves to a newer upload at a rescan; a
	// browser keeps its copy but asks (If-None-Match, a 304 while it is
	// current) before every use.
	cacheFollowing = "no-cache"
)

// cacheControl is the Cache-Control of an object of bucket; pinned says
// the request named a ?versionId.
func (s *server) cacheControl(bucket string, pinned bool) string {
	if !pinned && s.cfg.FollowsUpdates != nil && s.cfg.FollowsUpdates(bucket) {
		return cacheFollowing
	}
	return cacheFixed
}

// mtimeHeader is t as seconds since 1970 with nine decimals, the
// x-amz-meta-mtime rclone reads as the file's time: "1709528767.123456789",
// and before 1970 "-4.750000000" for a quarter second after -5 s (Unix()
// and Nanosecond() side by side would say -5.25).
func mtimeHeader(t time.Time) string {
	sec, ns := t.Unix(), int64(t.Nanosecond())
	if sec >= 0 {
		return fmt.Sprintf("%d.%09d", sec, ns)
	}
	if ns > 0 {
		sec, ns = sec+1, 1e9-ns
	}
	return fmt.Sprintf("-%d.%09d", -sec, ns)
}

// getObject answers GetObject and HeadObject.
func (s *server) getObject(req *request, a *archiveview.Archive) {
	r := req.r
	q := req.query
	// As on S3: an unsigned caller cannot choose the response headers (with
	// --anonymous, an archived file an outsider wrote could otherwise be
	// served as text/html from wharf's origin).
	if req.identity.Anonymous() {
		for _, ov := range responseOverrides {
			if q.Has(ov[0]) {
				s.writeError(req, &apiError{Code: errInvalidRequest, Bucket: req.bucket, Key: req.key,
					Message: "Request specific response headers cannot be used for anonymous GET requests."})
				return
			}
		}
	}
	a, f, versionID, ok := s.objectVersion(req, a)
	if !ok {
		return
	}
	mod := f.ModTime.UTC().Truncate(time.Second)
	h := req.w.Header()
	if versionID != "" {
		h.Set("X-Amz-Version-Id", versionID)
	}
	h.Set("ETag", quoteETag(f.ETag))
	h.Set("Last-Modified", mod.Format(http.TimeFormat))
	h.Set("Cache-Control", s.cacheControl(req.bucket, req.query.Has("versionId")))
	h.Set("Accept-Ranges", "bytes")
	if !f.ModTime.IsZero() {
		h.Set("X-Amz-Meta-Mtime", mtimeHeader(f.ModTime))
	}
	// The storage of the objects holding the file's bytes (restore.go):
	// its coldest class, and the restore state when it is archived: at
	// most archiveview.MaxFreshHeads HEADs of stale chunks per request,
	// out of the client's allowance (restoreheads.go), the others as
	// known already.
	heads := s.freshHeads(req)
	st, sent, err := a.FileStorageCounted(r.Context(), f, heads)
	s.headsSpent(req, heads, sent)
	if err != nil {
		s.readFailed(req, a, r.Context(), err)
		return
	}
	h.Set("X-Amz-Storage-Class", st.Class)
	if st.Tier != "" {
		h.Set("X-Amz-Archive-Status", st.Tier)
	}
	if v := backend.FormatRestoreHeader(st.Restore); v != "" {
		h.Set("X-Amz-Restore", v)
	}

	// Conditionals come before Range (AWS precedence, §2.5).
	switch conditionsFrom(r.Header).evaluate(f.ETag, mod) {
	case condPreconditionFailed:
		s.writeError(req, &apiError{Code: errPreconditionFailed, Bucket: req.bucket, Key: req.key})
		return
	case condNotModified:
		h.Del("X-Amz-Meta-Mtime")
		h.Del("X-Amz-Storage-Class")
		h.Del("X-Amz-Archive-Status")
		h.Del("X-Amz-Restore")
		h.Del("Accept-Ranges")
		req.w.WriteHeader(http.StatusNotModified)
		return
	}

	size := f.Size
	status := http.StatusOK
	off, n := int64(0), size
	// A Range on several lines is a list of ranges: the whole object, 200.
	rangeHdr := singleLine(r.Header.Values("Range"))
	// If-Range (RFC 9110 §13.1.5): a Range is honoured only while the
	// validator still names this object; a stale one gets the whole
	// object, 200.
	if rangeHdr != "" && !ifRangeHolds(r.Header.Values("If-Range"), f.ETag, mod) {
		rangeHdr = ""
	}
	if q.Has("partNumber") {
		if rangeHdr != "" {
			s.writeError(req, &apiError{Code: errInvalidRequest, Bucket: req.bucket, Key: req.key,
				Message: "Cannot specify both Range header and partNumber query parameter"})
			return
		}
		num, err := strconv.Atoi(q.Get("partNumber"))
		if err != nil || num < 1 || num > 10000 {
			s.writeError(req, &apiError{Code: errInvalidArgument, Bucket: req.bucket, Key: req.key,
				Message: "Part number must be an integer between 1 and 10000, inclusive"})
			return
		}
		if num != 1 {
			s.writeError(req, &apiError{Code: errInvalidPartNumber, Bucket: req.bucket, Key: req.key})
			return
		}
		h.Set("X-Amz-Mp-Parts-Count", "1")
		if size > 0 {
			status = http.StatusPartialContent
			h.Set("Content-Range", fmt.Sprintf("bytes 0-%d/%d", size-1, size))
		}
	} else {
		br := parseRange(rangeHdr, size)
		switch br.kind {
		case rangeUnsatisfiable:
			s.writeError(req, &apiError{Code: errInvalidRange, Bucket: req.bucket, Key: req.key,
				Header: http.Header{"Content-Range": {fmt.Sprintf("bytes */%d", size)}},
				Range:  &rangeDetail{requested: rangeHdr, size: size}})
			return
		case rangeSatisfiable:
			status = http.StatusPartialContent
			off, n = br.start, br.length
			h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", br.start, br.end(), size))
		}
	}

	h.Set("Content-Type", contentType(f))
	// A full-object checksum only on a full-object 200: botocore validates
	// any x-amz-checksum-* header against the body it received.
	if status == http.StatusOK && f.SHA256 != "" && amzValue(r.Header, req.query, "x-amz-checksum-mode") == "ENABLED" {
		if sum, err := hex.DecodeString(f.SHA256); err == nil && len(sum) == 32 {
			h.Set("X-Amz-Checksum-Sha256", base64.StdEncoding.EncodeToString(sum))
			h.Set("X-Amz-Checksum-Type", "FULL_OBJECT")
		}
	}
	for _, ov := range responseOverrides {
		if v := q.Get(ov[0]); v != "" {
			h.Set(ov[1], v)
		}
	}
	h.Set("Content-Length", strconv.FormatInt(n, 10))

	if req.method == http.MethodHead && n > 0 {
		req.w.WriteHeader(status)
		return
	}
	// A HEAD of an empty object runs the GET's check of it too (no fetch:
	// the empty body against the file's sha256), so it never answers 200
	// for a file whose GET is refused (a manifest saying 0 bytes of a
	// non-empty file); net/http sends no body on a HEAD.
	s.streamBody(req, a, f, off, n, status)
}

// objectVersion finds the object a GET or HEAD asks for: with ?versionId
// that version of the key (404 NoSuchVersion if unknown, 400
// InvalidArgument if the history says no version id has that form; a
// delete marker is 405 MethodNotAllowed with x-amz-delete-marker, as on
// AWS), else the
// latest. It returns the version id to send in x-amz-version-id; it has
// written the error response when ok is false. Without ?versionId the
// version history is not needed (nor built): the latest version's id comes
// from the tree, and a key whose latest version is a delete marker gets the
// marker's headers on its 404, as AWS does. A published dataset's bucket
// (Config.History) takes its version ids from the dataset's history: with
// ?versionId the key as of that published version (read from that
// version's archive, returned as va), without it the latest version's id
// only when the history is built already (else no x-amz-version-id: a
// plain GET never opens older versions, and never sends an id it would
// later change).
func (s *server) objectVersion(req *request, a *archiveview.Archive) (va *archiveview.Archive, f archiveview.File, versionID string, ok bool) {
	ctx := req.r.Context()
	if req.query.Has("versionId") {
		vid := req.query.Get("versionId")
		if vid == "" {
			s.writeError(req, &apiError{Code: errInvalidArgument, Bucket: req.bucket, Key: req.key,
				Message: "Version id cannot be the empty string"})
			return a, f, "", false
		}
		v, found, err := s.lookupVersion(ctx, req, a, vid)
		switch {
		case errors.Is(err, archiveview.ErrBadVersionID): // as AWS answers an id of the wrong form
			s.writeError(req, &apiError{Code: errInvalidArgument, Bucket: req.bucket, Key: req.key,
				Message: "Invalid version id specified", Cause: err})
			return a, f, "", false
		case err != nil:
			s.readFailed(req, a, ctx, err)
			return a, f, "", false
		case !found:
			s.writeError(req, &apiError{Code: errNoSuchVersion, Bucket: req.bucket, Key: req.key})
			return a, f, "", false
		case v.DeleteMarker:
			s.writeError(req, &apiError{Code: errMethodNotAllowed, Bucket: req.bucket, Key: req.key,
				Header: http.Header{"X-Amz-Delete-Marker": {"true"}, "X-Amz-Version-Id": {v.VersionID}, "Allow": {"DELETE"}}})
			return a, f, "", false
		}
		if v.Archive != nil {
			a = v.Archive
		}
		return a, v.File, v.VersionID, true
	}
	// A dataset bucket: its history's ids, when it is built.
	var hist archiveview.History
	dataset := false
	if s.cfg.History != nil {
		var err error
		if hist, dataset, err = s.cfg.History(ctx, req.bucket, a, false); err != nil {
			s.readFailed(req, a, ctx, err)
			return a, f, "", false
		}
	}
	if dataset {
		var latest archiveview.Version
		found := false
		if hist != nil {
			var err error
			if latest, found, err = hist.Lookup(ctx, req.key, ""); err != nil {
				s.readFailed(req, a, ctx, err)
				return a, f, "", false
			}
		}
		f, inTree := a.Stat(req.key)
		if !inTree {
			e := &apiError{Code: errNoSuchKey, Bucket: req.bucket, Key: req.key}
			if found && latest.DeleteMarker {
				e.Header = http.Header{"X-Amz-Delete-Marker": {"true"}, "X-Amz-Version-Id": {latest.VersionID}}
			}
			s.writeError(req, e)
			return a, f, "", false
		}
		f.VersionID = ""
		if found && !latest.DeleteMarker {
			f.VersionID = latest.VersionID
		}
		return a, f, f.VersionID, true
	}
	// Without ?versionId the tree answers alone: each file knows the
	// upload that wrote it, and each deleted key the upload that deleted
	// it, so a plain GET or HEAD never builds the version history.
	f, found := a.Stat(req.key)
	if !found {
		e := &apiError{Code: errNoSuchKey, Bucket: req.bucket, Key: req.key}
		if vid, dm := a.DeleteMarker(req.key); dm {
			e.Header = http.Header{"X-Amz-Delete-Marker": {"true"}, "X-Amz-Version-Id": {vid}}
		}
		s.writeError(req, e)
		return a, f, "", false
	}
	return a, f, f.VersionID, true
}

// streamBody sends n bytes of f from off. The first buffer is read before
// the headers go out, so a failure to open or to fetch the first frame is a
// clean 500/503 XML error naming the key. A failure after that aborts the
// connection (http.ErrAbortHandler): the client sees a broken body, never a
// clean short or wrong one.
func (s *server) streamBody(req *request, a *archiveview.Archive, f archiveview.File, off, n int64, status int) {
	ctx := req.r.Context()
	rc, err := a.Open(ctx, f, off, n)
	if err != nil {
		s.readFailed(req, a, ctx, err)
		return
	}
	defer rc.Close()

	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	buf := *bp

	if n == 0 {
		// An empty object is read too: its reader checks it (an empty
		// body against the file's sha256, which a manifest that says 0
		// bytes of a non-empty file does not match) and ends at once.
		k, err := rc.Read(buf[:1])
		if err == nil || k > 0 {
			err = fmt.Errorf("body of a 0-byte object gave bytes: %w", archiveview.ErrCorrupt)
		}
		if err != io.EOF {
			s.readFailed(req, a, ctx, err)
			return
		}
		req.w.WriteHeader(status)
		return
	}

	first := int64(len(buf))
	if n < first {
		first = n
	}
	got, err := io.ReadFull(rc, buf[:first])
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("body ended after %d of %d bytes: %w", got, n, io.ErrUnexpectedEOF) // readFailed names archive and key
		}
		s.readFailed(req, a, ctx, err)
		return
	}
	req.w.WriteHeader(status)
	if _, err := req.w.Write(buf[:got]); err != nil {
		req.cause = fmt.Errorf("write to client: %w", err)
		panic(http.ErrAbortHandler)
	}
	rest := n - int64(got)
	if rest == 0 {
		return
	}
	// No io.LimitReader: the archive reader returns exactly n bytes and its
	// io.WriterTo writes cached frame slices without a copy. The count is
	// still enforced: short is an error here, and a byte past the declared
	// Content-Length fails the write in net/http.
	copied, err := io.CopyBuffer(req.w, rc, buf)
	if err == nil && copied != rest {
		err = fmt.Errorf("archive %s key %q: body gave %d bytes where %d were declared: %w", a.Name(), f.Key, int64(got)+copied, n, io.ErrUnexpectedEOF)
	}
	if err != nil {
		req.cause = err
		if ctx.Err() == nil {
			req.abort = req.w.readAborted(abortRead)
		}
		panic(http.ErrAbortHandler)
	}
}

// readFailed answers a read error that happened before any header was sent.
func (s *server) readFailed(req *request, a *archiveview.Archive, ctx context.Context, err error) {
	err = fmt.Errorf("archive %s key %q: %w", a.Name(), req.key, err)
	if ctx.Err() != nil {
		// The client went away; nobody reads the answer.
		req.cause = err
		panic(http.ErrAbortHandler)
	}
	if e, ok := archivedError(err); ok {
		// Archived bytes: the client's to restore, not a server failure.
		e.Bucket, e.Key = req.bucket, req.key
		s.writeError(req, e)
		return
	}
	code, msg := readError(err) // errors.go: the one table
	e := &apiError{Code: code, Message: msg, Bucket: req.bucket, Key: req.key, Cause: err}
	if errors.Is(err, chunkio.ErrBusy) {
		// The read limits stayed full for their wait: load shedding, not a
		// failure (under overload every request meets it); retry soon.
		e.Header = http.Header{"Retry-After": []string{retryAfterBusy}}
	}
	// The access line (a warning: the status is 5xx) carries the error;
	// no line of its own, or any client polling a broken object would add
	// an error line per request.
	s.writeError(req, e)
}

// retryAfterBusy is the Retry-After (seconds) of a 503 for a read that
// waited its deadline for memory, a backend GET or a stream decoder
// (chunkio.ErrBusy).
const retryAfterBusy = "1"
