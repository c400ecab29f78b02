package console

// The pages: buckets, browse, file, download and inline image bytes,
// restore.

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/s3api"
)

const (
	// pageSize is the entries (files and folders) of one browse page.
	pageSize = 200
	// previewBytes is how much of a file a preview reads.
	previewBytes = 64 << 10
	// maxShareSeconds is S3's limit on a presigned URL's expiry (7 days).
	maxShareSeconds = 7 * 24 * 3600
	// bucketWait bounds how long the buckets page waits for archives
	// still opening.
	bucketWait = 500 * time.Millisecond
)

// openBucket returns the archive of bucket when v may read it; it has
// answered the request when ok is false.
func (c *Console) openBucket(w http.ResponseWriter, r *http.Request, v visitor, bucket string) (*archiveview.Archive, bool) {
	if !v.id.CanRead(bucket) {
		c.fail(w, r, &v, http.StatusForbidden, "You may not read bucket "+bucket+".")
		return nil, false
	}
	a, found, err := c.cfg.Catalog.Bucket(r.Context(), bucket)
	switch {
	case !found:
		c.fail(w, r, &v, http.StatusNotFound, "No bucket "+bucket+".")
		return nil, false
	case errors.Is(err, archiveview.ErrOpening):
		w.Header().Set("Retry-After", "2")
		c.fail(w, r, &v, http.StatusServiceUnavailable, "Bucket "+bucket+" is still being opened; reload in a moment.")
		return nil, false
	case err != nil:
		c.fail(w, r, &v, http.StatusInternalServerError, c.openFailed(w, bucket, err))
		return nil, false
	}
	return a, true
}

// bucketRow is one line of the buckets page.
type bucketRow struct {
	Name, Kind, Served, State string
	Files                     int
	Bytes, Archived           int64
	Share                     string // the share archived in Glacier/Deep Archive, "" while unknown
}

// buckets serves the list of buckets v may read.
func (c *Console) buckets(w http.ResponseWriter, r *http.Request, v visitor) {
	var names []string
	c.cfg.Catalog.EachBucket(func(name string, _ time.Time) {
		if name != "" && v.id.CanRead(name) {
			names = append(names, name)
		}
	})
	rows := make([]bucketRow, 0, len(names))
	live := map[*archiveview.Archive]bool{}
	// One wait for the whole page: buckets still opening after it are
	// shown as opening, however many there are.
	ctx, cancel := context.WithTimeout(r.Context(), bucketWait)
	defer cancel()
	for _, name := range names {
		row := bucketRow{Name: name, Kind: "archive"}
		if c.cfg.Kind != nil {
			if k := c.cfg.Kind(name); k != "" {
				row.Kind = k
			}
		}
		a, _, err := c.cfg.Catalog.Bucket(ctx, name)
		switch {
		case errors.Is(err, archiveview.ErrOpening) || errors.Is(err, context.DeadlineExceeded):
			row.State = "opening"
		case err != nil:
			row.State = "failed: " + publicOpenError(name, err)
		default:
			live[a] = true
			info := a.Info()
			row.State, row.Files = "open", info.Files
			// The manifest's id: any length and any rune past the ASCII
			// controls (one rule for outside text: cut and escaped).
			row.Served = "upload " + backend.PrintableText(info.UploadID, maxShownUploadID)
			if len(info.Chain) > 1 {
				row.Served += fmt.Sprintf(", a chain of %d uploads", len(info.Chain))
			}
			if s, ok := c.shares.get(a, c.cfg.Now()); ok {
				row.Bytes, row.Archived = s.bytes, s.archived
				row.Share = "0%"
				if s.bytes > 0 {
					row.Share = fmt.Sprintf("%.1f%%", 100*float64(s.archived)/float64(s.bytes))
				}
			}
		}
		rows = append(rows, row)
	}
	c.shares.retain(live)
	c.render(w, r, http.StatusOK, "buckets", pageData{Title: "Buckets", V: v, Buckets: rows})
}

// crumb is one breadcrumb link.
type crumb struct{ Name, URL string }

// entryRow is one line of a folder.
type entryRow struct {
	Name, URL, Class, MTime string
	Folder                  bool
	Size                    int64
}

// browse serves one page of a folder: ?prefix=FOLDER/&filter=TEXT&after=NAME.
func (c *Console) browse(w http.ResponseWriter, r *http.Request, v visitor, bucket string) {
	a, ok := c.openBucket(w, r, v, bucket)
	if !ok {
		return
	}
	q := r.URL.Query()
	prefix, filter, after := q.Get("prefix"), q.Get("filter"), q.Get("after")
	res := a.List(archiveview.ListParams{Prefix: prefix + filter, Delimiter: "/", After: after, MaxKeys: pageSize})
	rows := make([]entryRow, 0, len(res.Entries))
	for _, e := range res.Entries {
		if e.Prefix != "" {
			rows = append(rows, entryRow{Name: strings.TrimPrefix(e.Prefix, prefix), Folder: true, URL: browseURL(bucket, e.Prefix, "", "")})
			continue
		}
		f := e.File
		rows = append(rows, entryRow{Name: strings.TrimPrefix(f.Key, prefix), URL: fileURL(bucket, f.Key, ""),
			Size: f.Size, MTime: fmtTime(f.ModTime), Class: a.StorageClass(f)})
	}
	d := pageData{Title: bucket + "/" + prefix, V: v, Bucket: bucket, Prefix: prefix, Filter: filter,
		Crumbs: crumbs(bucket, prefix), Entries: rows, Files: a.Files()}
	if after != "" {
		d.FirstURL = browseURL(bucket, prefix, filter, "")
	}
	if res.Truncated {
		d.NextURL = browseURL(bucket, prefix, filter, res.NextAfter)
	}
	c.render(w, r, http.StatusOK, "browse", d)
}

// maxCrumbs bounds the folder links of a page's breadcrumbs: each is a
// link holding its whole prefix, so one per level would make a page
// quadratic in a prefix a visitor sends.
const maxCrumbs = 12

// crumbs are the links from the bucket down to prefix's folders: the
// bucket, then the deepest maxCrumbs levels; levels above those are one
// "…" link, to the highest level left out.
func crumbs(bucket, prefix string) []crumb {
	var ends []int // the end of each folder level in prefix
	for at := 0; at < len(prefix); {
		i := strings.IndexByte(prefix[at:], '/')
		if i < 0 {
			break
		}
		at += i + 1
		ends = append(ends, at)
	}
	out := []crumb{{Name: bucket, URL: browseURL(bucket, "", "", "")}}
	from := 0
	if len(ends) > maxCrumbs {
		from = len(ends) - maxCrumbs
		out = append(out, crumb{Name: "…", URL: browseURL(bucket, prefix[:ends[from-1]], "", "")})
	}
	for i := from; i < len(ends); i++ {
		start := 0
		if i > 0 {
			start = ends[i-1]
		}
		out = append(out, crumb{Name: prefix[start:ends[i]], URL: browseURL(bucket, prefix[:ends[i]], "", "")})
	}
	return out
}

func browseURL(bucket, prefix, filter, after string) string {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if filter != "" {
		q.Set("filter", filter)
	}
	if after != "" {
		q.Set("after", after)
	}
	u := Prefix + "b/" + url.PathEscape(bucket)
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

func objURL(route, bucket, key, version string) string {
	q := url.Values{"key": {key}}
	if version != "" {
		q.Set("version", version)
	}
	return Prefix + route + "/" + url.PathEscape(bucket) + "?" + q.Encode()
}

func fileURL(bucket, key, version string) string { return objURL("f", bucket, key, version) }

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// lookup finds the file (or the version ?version= names) of a file
// request, and the archive to read it from (an older published version's
// for a dataset's older version); it has answered when ok is false.
func (c *Console) lookup(w http.ResponseWriter, r *http.Request, v visitor, a *archiveview.Archive, bucket string) (*archiveview.Archive, archiveview.File, bool) {
	q := r.URL.Query()
	key, version := q.Get("key"), q.Get("version")
	if r.Method == http.MethodPost {
		key, version = r.PostFormValue("key"), r.PostFormValue("version")
	}
	if key == "" {
		c.fail(w, r, &v, http.StatusBadRequest, "No key given.")
		return nil, archiveview.File{}, false
	}
	if version == "" {
		if f, found := a.Stat(key); found {
			return a, f, true
		}
		c.fail(w, r, &v, http.StatusNotFound, "No file "+key+" in "+bucket+".")
		return nil, archiveview.File{}, false
	}
	if c.cfg.VersionIDForm != nil {
		if err := c.cfg.VersionIDForm(bucket, version); err != nil {
			c.fail(w, r, &v, http.StatusBadRequest, "No version of "+bucket+" has that form: "+err.Error())
			return nil, archiveview.File{}, false
		}
	}
	h, err := s3api.BucketHistory(r.Context(), c.cfg.History, bucket, a, true)
	if err != nil && errors.Is(err, backend.ErrUnavailable) {
		c.fail(w, r, &v, http.StatusServiceUnavailable, c.hidden(w, bucket, key, err, "The version history of "+bucket+" cannot be read now; try again in a moment."))
		return nil, archiveview.File{}, false
	}
	if err != nil {
		c.fail(w, r, &v, http.StatusInternalServerError, c.hidden(w, bucket, key, err, "The version history of "+bucket+" could not be read."))
		return nil, archiveview.File{}, false
	}
	ver, found, err := h.Lookup(r.Context(), key, version)
	if errors.Is(err, archiveview.ErrBadVersionID) {
		c.fail(w, r, &v, http.StatusBadRequest, "No version of "+bucket+" has that form: "+err.Error())
		return nil, archiveview.File{}, false
	}
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, backend.ErrUnavailable) {
			code = http.StatusServiceUnavailable
		}
		c.fail(w, r, &v, code, c.hidden(w, bucket, key, err, "Version "+version+" of "+key+" in "+bucket+" could not be read."))
		return nil, archiveview.File{}, false
	}
	if !found || ver.DeleteMarker {
		c.fail(w, r, &v, http.StatusNotFound, "No version "+version+" of "+key+" in "+bucket+".")
		return nil, archiveview.File{}, false
	}
	va := a
	if ver.Archive != nil {
		va = ver.Archive
	}
	f := ver.File
	f.VersionID = ver.VersionID
	return va, f, true
}

// maxShownUploadID bounds an upload id on the buckets page (as in the
// log and the metric label).
const maxShownUploadID = 128

// versionRow is one version on a file page.
type versionRow struct {
	ID, URL, MTime, ETag string
	Size                 int64
	Latest, Deleted      bool
	Current              bool
}

// fileInfo is what the file page shows.
type fileInfo struct {
	Key, Name, ETag, SHA256, MTime, Class, Tier string
	VersionID                                   string
	Asked                                       string // the ?version= the page was asked for
	Size                                        int64
	Verified                                    string
	Archived, Readable                          bool
	Restore                                     string
	RestoreOngoing                              bool
	ArchivedObjects                             int
	ArchivedBytes                               int64
	CanRestore                                  bool
	DownloadURL, RawURL, RestoreURL, FileURL    string
}

// file serves the page of one file: ?key=KEY&version=ID&share=SECONDS.
func (c *Console) file(w http.ResponseWriter, r *http.Request, v visitor, bucket string) {
	a, ok := c.openBucket(w, r, v, bucket)
	if !ok {
		return
	}
	va, f, ok := c.lookup(w, r, v, a, bucket)
	if !ok {
		return
	}
	ctx := r.Context()
	version := r.URL.Query().Get("version")
	fi := fileInfo{Key: f.Key, Name: path.Base(f.Key), ETag: f.ETag, SHA256: f.SHA256, MTime: fmtTime(f.ModTime),
		VersionID: f.VersionID, Asked: version, Size: f.Size, Verified: verification(va, f),
		DownloadURL: objURL("dl", bucket, f.Key, version), RawURL: objURL("raw", bucket, f.Key, version),
		RestoreURL: Prefix + "restore/" + url.PathEscape(bucket), FileURL: fileURL(bucket, f.Key, version)}
	// The restore states' refresh comes out of the visitor's allowance,
	// the one its S3 requests share (s3api.FreshHeads).
	heads, spent := s3api.FreshHeads(c.cfg.API, s3api.ClientKey(v.id, r))
	st, sent, err := va.FileStorageCounted(ctx, f, heads)
	spent(sent)
	if err != nil {
		if transient(err) {
			w.Header().Set("Retry-After", "1")
			c.fail(w, r, &v, http.StatusServiceUnavailable, c.hidden(w, bucket, f.Key, err, "The storage of "+f.Key+" in "+bucket+" cannot be read now; try again in a moment."))
			return
		}
		c.fail(w, r, &v, http.StatusInternalServerError, c.hidden(w, bucket, f.Key, err, "The storage of "+f.Key+" in "+bucket+" could not be read."))
		return
	}
	fi.Class, fi.Tier, fi.Archived, fi.Readable = st.Class, st.Tier, st.Archived, st.Readable
	switch {
	case st.Restore.Ongoing:
		fi.Restore, fi.RestoreOngoing = "restore in progress", true
	case st.Restore.Requested && !st.Restore.Expiry.IsZero():
		fi.Restore = "restored until " + fmtTime(st.Restore.Expiry)
	case st.Restore.Requested:
		fi.Restore = "restored"
	case st.Archived:
		fi.Restore = "not restored"
	}
	for _, o := range st.Objects {
		if o.Archived() && !o.Readable(c.cfg.Now()) {
			fi.ArchivedObjects++
			fi.ArchivedBytes += o.Size
		}
	}
	fi.CanRestore = c.cfg.AllowRestore && c.cfg.API != nil && v.sess != nil && v.id.CanRestore(bucket) &&
		st.Archived && !st.Readable && !st.Restore.Ongoing

	d := pageData{Title: bucket + "/" + f.Key, V: v, Bucket: bucket, Crumbs: crumbs(bucket, f.Key), File: &fi,
		Flash: r.URL.Query().Get("restore")}
	d.Versions, d.VersionsErr = c.versions(ctx, w, a, bucket, f, version)
	if fi.Readable {
		d.Preview = c.preview(ctx, w, va, f, fi.RawURL)
	}
	d.Snippets = snippets(scheme(r)+"://"+r.Host, bucket, f.Key, version, v.sess == nil)
	if v.sess != nil {
		d.ShareChoices = shareChoices
		if s := r.URL.Query().Get("share"); s != "" {
			secs, err := strconv.Atoi(s)
			if err != nil || secs < 1 || secs > maxShareSeconds {
				d.ShareErr = fmt.Sprintf("A share link lasts 1 to %d seconds (7 days).", maxShareSeconds)
			} else if d.ShareURL, err = c.presign(ctx, r, v.sess, bucket, f.Key, version, secs); err != nil {
				d.ShareErr = "The share link could not be made: " + err.Error()
			} else {
				d.ShareExpiry = fmtTime(c.cfg.Now().Add(time.Duration(secs) * time.Second))
			}
		}
	}
	c.render(w, r, http.StatusOK, "file", d)
}

// verification says how the bytes of f are verified on a read.
func verification(a *archiveview.Archive, f archiveview.File) string {
	if f.SHA256 != "" {
		return "whole-file sha256: a full read is checked against it before its last byte is sent; each chunk and frame read is checked against its own sha256 where the upload recorded one"
	}
	info := a.Info()
	for _, k := range info.UnverifiableSample {
		if k == f.Key {
			return "not verified: no checksum in the manifest covers this file; its bytes are served as stored"
		}
	}
	if info.Unverifiable == 0 {
		return "frame and chunk checksums: every piece read is checked against the sha256 the upload recorded (no whole-file sha256)"
	}
	return "frame and chunk checksums where the upload recorded them; some files of this archive have none"
}

// historyWait bounds how long a file page waits for a dataset's version
// history still being built.
const historyWait = 2 * time.Second

// versions lists f's versions, newest first: the history's entries (the
// uploads of a chain, or a dataset's published versions) for keys
// starting with f's key, up to the first other key. asked is the version
// the page shows ("" = the latest). A failure is noted on w's access line.
func (c *Console) versions(ctx context.Context, w http.ResponseWriter, a *archiveview.Archive, bucket string, f archiveview.File, asked string) ([]versionRow, string) {
	// A published dataset's history is built on first use, in the
	// background: the page waits for it a little, then says so.
	hctx, cancel := context.WithTimeout(ctx, historyWait)
	defer cancel()
	vs, err := s3api.BucketHistory(hctx, c.cfg.History, bucket, a, true)
	if err != nil {
		if ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, backend.ErrUnavailable)) {
			return nil, "The version history of " + bucket + " is being built; reload this page in a moment."
		}
		return nil, c.hidden(w, bucket, f.Key, err, "The version history of "+bucket+" could not be read.")
	}
	res, err := vs.ListVersions(archiveview.VersionListParams{Prefix: f.Key, MaxKeys: 1000})
	if err != nil {
		return nil, c.hidden(w, bucket, f.Key, err, "The versions of "+f.Key+" in "+bucket+" could not be listed.")
	}
	var out []versionRow
	for _, e := range res.Entries {
		ver := e.Version
		if e.Prefix != "" || ver.Key != f.Key {
			break
		}
		row := versionRow{ID: ver.VersionID, MTime: fmtTime(ver.ModTime), Latest: ver.IsLatest, Deleted: ver.DeleteMarker,
			Current: ver.VersionID == asked || asked == "" && ver.IsLatest}
		if !ver.DeleteMarker {
			row.URL, row.Size, row.ETag = fileURL(bucket, f.Key, ver.VersionID), ver.Size, ver.ETag
		}
		out = append(out, row)
	}
	return out, ""
}

// download streams f: as an attachment (application/octet-stream), or,
// for raw, inline image bytes of a PNG, JPEG, GIF or WebP recognised by
// their first bytes (anything else is refused). Both read through
// Archive.Open; the first buffer is read before any header is sent, so
// a failure to open is a clean error page; a failure later aborts the
// connection, never a clean short body.
func (c *Console) download(w http.ResponseWriter, r *http.Request, v visitor, bucket string, raw bool) {
	a, ok := c.openBucket(w, r, v, bucket)
	if !ok {
		return
	}
	va, f, ok := c.lookup(w, r, v, a, bucket)
	if !ok {
		return
	}
	who := s3api.ClientKey(v.id, r)
	if !c.streams.acquire(who, c.cfg.MaxStreams) {
		w.Header().Set("Retry-After", "2")
		c.fail(w, r, &v, http.StatusServiceUnavailable, fmt.Sprintf("You already have %d downloads running; wait for one to finish.", c.cfg.MaxStreams))
		return
	}
	defer c.streams.release(who)
	ctx := r.Context()
	rc, err := va.Open(ctx, f, 0, f.Size)
	if err != nil {
		c.readFailed(w, r, v, bucket, f, err)
		return
	}
	defer rc.Close()
	bp := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(bp)
	buf := *bp
	n, err := io.ReadFull(rc, buf[:min(int64(len(buf)), f.Size)])
	if err != nil {
		c.readFailed(w, r, v, bucket, f, err)
		return
	}
	h := w.Header()
	if raw {
		typ := imageType(buf[:n])
		if typ == "" {
			c.fail(w, r, &v, http.StatusUnsupportedMediaType, "Only PNG, JPEG, GIF and WebP images are shown inline; download the file instead.")
			return
		}
		h.Set("Content-Type", typ)
		h.Set("Content-Security-Policy", cspRaw)
		h.Set("Content-Disposition", disposition("inline", f.Key))
	} else {
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", disposition("attachment", f.Key))
	}
	h.Set("Content-Length", strconv.FormatInt(f.Size, 10))
	h.Set("ETag", `"`+f.ETag+`"`)
	if f.VersionID != "" {
		h.Set("x-amz-version-id", f.VersionID)
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := w.Write(buf[:n]); err != nil {
		panic(http.ErrAbortHandler)
	}
	rest := f.Size - int64(n)
	copied, err := io.CopyBuffer(w, rc, buf)
	if err == nil && copied != rest {
		err = fmt.Errorf("archive %s key %q: body gave %d of %d bytes: %w", va.Name(), f.Key, int64(n)+copied, f.Size, io.ErrUnexpectedEOF)
	}
	if err != nil {
		// The access line has it: a download the client left is info
		// there (abort_cause "client": its context ended or a write to it
		// failed, which NoteFailure knows), a failed read a warning.
		s3api.NoteFailure(w, fmt.Errorf("archive %s key %q: %w", va.Name(), f.Key, err), ctx.Err() == nil)
		panic(http.ErrAbortHandler)
	}
}

// readFailed answers a read error before any header was sent.
func (c *Console) readFailed(w http.ResponseWriter, r *http.Request, v visitor, bucket string, f archiveview.File, err error) {
	if r.Context().Err() != nil {
		panic(http.ErrAbortHandler)
	}
	if errors.Is(err, archiveview.ErrArchived) {
		c.fail(w, r, &v, http.StatusForbidden, f.Key+" is archived: it must be restored before it can be read.")
		return
	}
	if transient(err) {
		w.Header().Set("Retry-After", "1")
		msg := f.Key + " in " + bucket + " cannot be read now; try again in a moment."
		if errors.Is(err, chunkio.ErrBusy) {
			// Load shedding, not a failure (under overload every request
			// meets it): the access line carries it, no line of its own.
			s3api.NoteFailure(w, fmt.Errorf("archive %s key %q: %w", bucket, f.Key, err), false)
			c.fail(w, r, &v, http.StatusServiceUnavailable, msg)
			return
		}
		c.fail(w, r, &v, http.StatusServiceUnavailable, c.hidden(w, bucket, f.Key, err, msg))
		return
	}
	c.fail(w, r, &v, http.StatusInternalServerError, c.hidden(w, bucket, f.Key, err, f.Key+" in "+bucket+" could not be read."))
}

// transient reports whether err is a passing state, which S3 answers 503
// SlowDown: the read limits stayed full for their wait (chunkio.ErrBusy)
// or the store is unavailable.
func transient(err error) bool {
	return errors.Is(err, chunkio.ErrBusy) || errors.Is(err, backend.ErrUnavailable)
}

// openFailed is what a page may say of a bucket whose archive failed to
// open (publicOpenError); the whole error goes to the request's access
// line (s3api.NoteFailure), no line of its own: the scan that met the
// failure logged it, and a visitor polling the page must not add an
// error line per request.
func (c *Console) openFailed(w http.ResponseWriter, bucket string, err error) string {
	s3api.NoteFailure(w, err, false)
	return publicOpenError(bucket, err)
}

// publicOpenError is the failure's PublicMessage (catalog.OpenFailure:
// the bucket and the kind of failure, never the store's text or the
// manifest's key), as the S3 handler answers it, else a generic text.
// The buckets page shows it without logging (the catalog logged the
// open), so reloading it cannot flood the log.
func publicOpenError(bucket string, err error) string {
	var pub interface{ PublicMessage() string }
	if errors.As(err, &pub) {
		return pub.PublicMessage()
	}
	return "The archive served as bucket " + bucket + " could not be opened. The server's log has the details."
}

// hidden puts err (the store's text: backing bucket, object keys,
// paths) on the request's access line (s3api.NoteFailure, as a failed
// read: a warning even behind a page that still answers 200, a preview's
// or a history's failure) and returns msg, what a page may say of it: a
// visitor, maybe anonymous, learns what failed for which bucket and key,
// never the internals. A read refused busy (chunkio.ErrBusy, wharf
// shedding load) is no failed read. The access line is the request's
// only line: a line of its own beside it made an error line per request
// from any visitor polling a page whose reads fail.
func (c *Console) hidden(w http.ResponseWriter, bucket, key string, err error, msg string) string {
	s3api.NoteFailure(w, fmt.Errorf("console: bucket %s key %q: %w", bucket, key, err), !errors.Is(err, chunkio.ErrBusy))
	return msg + " The server's log has the details."
}

// disposition is a Content-Disposition naming the key's base name: an
// ASCII fallback and the UTF-8 name (RFC 6266, RFC 8187).
func disposition(kind, key string) string {
	// A bidi control in the saved name would show it reordered in a file
	// manager ("invoice\u202Efdp.exe" as "invoiceexe.pdf").
	name := strings.Map(func(r rune) rune {
		if isBidiControl(r) {
			return '_'
		}
		return r
	}, path.Base(key))
	var ascii strings.Builder
	for _, r := range name {
		if r < 0x20 || r > 0x7e || strings.ContainsRune("\"\\%;<>", r) {
			ascii.WriteByte('_')
		} else {
			ascii.WriteRune(r)
		}
	}
	return kind + `; filename="` + ascii.String() + `"; filename*=UTF-8''` + auth.URIEncode(name, false)
}

// restore sends RestoreObject for a file through the S3 handler, signed
// with the visitor's key, then shows the file page again.
func (c *Console) restore(w http.ResponseWriter, r *http.Request, v visitor, bucket string) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if v.sess == nil {
		c.needLogin(w, r)
		return
	}
	if !c.checkCSRF(r, v) {
		c.fail(w, r, &v, http.StatusForbidden, "The restore form expired or came from another page.")
		return
	}
	if !c.cfg.AllowRestore || c.cfg.API == nil || !v.id.CanRestore(bucket) {
		c.fail(w, r, &v, http.StatusForbidden, "You may not restore files in "+bucket+".")
		return
	}
	a, ok := c.openBucket(w, r, v, bucket)
	if !ok {
		return
	}
	_, f, ok := c.lookup(w, r, v, a, bucket)
	if !ok {
		return
	}
	days, err := strconv.Atoi(r.PostFormValue("days"))
	if err != nil || days < 1 || days > backend.MaxRestoreDays {
		c.fail(w, r, &v, http.StatusBadRequest, fmt.Sprintf("Days must be between 1 and %d.", backend.MaxRestoreDays))
		return
	}
	tier := r.PostFormValue("tier")
	if !backend.ValidRetrievalTier(tier) {
		c.fail(w, r, &v, http.StatusBadRequest, "Tier must be Standard, Bulk or Expedited.")
		return
	}
	body := fmt.Sprintf(`<RestoreRequest xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Days>%d</Days><GlacierJobParameters><Tier>%s</Tier></GlacierJobParameters></RestoreRequest>`, days, tier)
	status, resp, err := c.sendRestore(r, v.sess, bucket, f.Key, r.PostFormValue("version"), []byte(body))
	if err != nil {
		c.fail(w, r, &v, http.StatusInternalServerError, "The restore could not be sent: "+err.Error())
		return
	}
	var flash string
	switch status {
	case http.StatusAccepted:
		flash = "started"
	case http.StatusOK:
		flash = "done"
	case http.StatusConflict:
		flash = "running"
	default:
		c.fail(w, r, &v, status, fmt.Sprintf("RestoreObject answered %d: %s", status, s3Message(resp)))
		return
	}
	u := fileURL(bucket, f.Key, r.PostFormValue("version")) + "&restore=" + flash
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// sendRestore serves a signed POST ?restore through the S3 handler.
func (c *Console) sendRestore(r *http.Request, se *session, bucket, key, version string, body []byte) (int, []byte, error) {
	u := "http://" + r.Host + "/" + bucket + "/" + auth.URIEncode(key, true) + "?restore"
	if version != "" {
		u += "&versionId=" + auth.URIEncode(version, false) // the version the page showed
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.RemoteAddr = r.RemoteAddr
	sum := sha256Hex(body)
	req.Header.Set("X-Amz-Content-Sha256", sum)
	req.Header.Set("Content-Type", "application/xml")
	if err := c.sign(r.Context(), req, se.accessKey, se.secretKey, sum); err != nil {
		return 0, nil, err
	}
	rec := &recorder{h: http.Header{}}
	c.cfg.API.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rec.status, rec.body.Bytes(), nil
}

// s3Message is the Code and Message of an S3 error document, decoded
// (the page escapes them once; the document's own escaping, taken as
// text, showed its character references: "object&#39;s").
func s3Message(b []byte) string {
	var doc struct{ Code, Message string }
	if err := xml.Unmarshal(b, &doc); err != nil {
		return ""
	}
	return strings.TrimSpace(doc.Code + " " + doc.Message)
}

// recorder is the ResponseWriter of an internal request (bounded body).
type recorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.h }
func (w *recorder) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}
func (w *recorder) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.body.Len() < 64<<10 {
		w.body.Write(p[:min(len(p), 64<<10-w.body.Len())])
	}
	return len(p), nil
}

// shareSummary is a bucket's total file bytes and the bytes of files in
// an archive class (Glacier, Deep Archive, an Intelligent-Tiering archive
// tier), from one walk of its index.
type shareSummary struct {
	bytes, archived int64
	at              time.Time
}

// shareCache holds one summary per served archive, computed in the
// background (one walk at a time) and kept for shareTTL.
type shareCache struct {
	mu      sync.Mutex
	m       map[*archiveview.Archive]shareSummary
	running map[*archiveview.Archive]bool
	sem     chan struct{}
}

const shareTTL = 10 * time.Minute

func newShareCache() *shareCache {
	return &shareCache{m: map[*archiveview.Archive]shareSummary{}, running: map[*archiveview.Archive]bool{}, sem: make(chan struct{}, 1)}
}

// get returns a's summary if known, and starts computing it if not
// (or if stale).
func (s *shareCache) get(a *archiveview.Archive, now time.Time) (shareSummary, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum, ok := s.m[a]
	if (!ok || now.Sub(sum.at) > shareTTL) && !s.running[a] {
		s.running[a] = true
		go s.compute(a, now)
	}
	return sum, ok
}

func (s *shareCache) compute(a *archiveview.Archive, now time.Time) {
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	defer func() {
		// Not a handler: a listing of an index file truncated under the
		// server panics with ErrIndexFileChanged, which must fail this
		// summary only, never the process.
		if r := recover(); r != nil {
			if e, ok := r.(error); !ok || !errors.Is(e, archiveview.ErrIndexFileChanged) {
				panic(r)
			}
			s.mu.Lock()
			delete(s.running, a)
			s.mu.Unlock()
		}
	}()
	var sum shareSummary
	after := ""
	for {
		res := a.List(archiveview.ListParams{After: after, MaxKeys: 1000})
		for _, e := range res.Entries {
			sum.bytes += e.File.Size
			if c := a.StorageClass(e.File); backend.NeedsRestore(c, "") {
				sum.archived += e.File.Size
			}
		}
		if !res.Truncated {
			break
		}
		after = res.NextAfter
	}
	sum.at = now
	s.mu.Lock()
	s.m[a] = sum
	delete(s.running, a)
	s.mu.Unlock()
}

// retain forgets archives no longer served.
func (s *shareCache) retain(live map[*archiveview.Archive]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for a := range s.m {
		if !live[a] {
			delete(s.m, a)
		}
	}
}
