package s3api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// listObjectVersions answers GET /bucket?versions: every upload of the
// archive's chain that mentions a key is a version of it (VersionId = the
// upload id), a deleted_paths entry is a delete marker. Keys come in byte
// order, each key's versions newest first, Version and DeleteMarker
// elements interleaved in that order as on AWS. Paging follows AWS:
// key-marker alone skips every version of that key; with
// version-id-marker it continues after that version; max-keys counts
// versions, delete markers and common prefixes.
func (s *server) listObjectVersions(req *request, a *archiveview.Archive) {
	q := req.query
	lq, apiErr := parseListQuery(q, false)
	if apiErr == nil {
		lq.restoreStatus, apiErr = parseOptionalAttributes(amzHeader(req.r.Header, req.query, "x-amz-optional-object-attributes"))
	}
	if apiErr != nil {
		apiErr.Bucket = req.bucket
		s.writeError(req, apiErr)
		return
	}
	keyMarker, vidMarker := q.Get("key-marker"), q.Get("version-id-marker")
	if vidMarker != "" && keyMarker == "" {
		s.writeError(req, &apiError{Code: errInvalidArgument, Bucket: req.bucket,
			Message: "A version-id marker cannot be specified without a key marker."})
		return
	}
	ctx := req.r.Context()
	// max-keys=0 is an empty page, not truncated (as on AWS), whatever the
	// history holds: it is answered without one being built. With a
	// version-id marker the marker is still checked against the history.
	var res archiveview.VersionListResult
	var err error
	if lq.maxKeys > 0 || vidMarker != "" {
		var vs archiveview.History
		if vs, err = s.history(ctx, req, a); err != nil {
			s.readFailed(req, a, ctx, err)
			return
		}
		res, err = vs.ListVersions(archiveview.VersionListParams{
			Prefix:          lq.prefix,
			Delimiter:       lq.delimiter,
			KeyMarker:       keyMarker,
			VersionIDMarker: vidMarker,
			MaxKeys:         lq.maxKeys,
			MaxNameBytes:    maxPageNameBytes,
		})
	}
	if errors.Is(err, archiveview.ErrUnknownVersion) {
		s.writeError(req, &apiError{Code: errInvalidArgument, Bucket: req.bucket,
			Message: "Invalid version id specified", Cause: err})
		return
	}
	if err != nil {
		s.readFailed(req, a, ctx, err)
		return
	}
	w := s.newListXML("ListVersionsResult", req.bucket, lq, len(res.Entries), true)
	w.encElem("KeyMarker", keyMarker)
	w.elem("VersionIdMarker", vidMarker)
	if res.Truncated {
		w.encElem("NextKeyMarker", res.NextKeyMarker)
		if res.NextVersionIDMarker != "" {
			w.elem("NextVersionIdMarker", res.NextVersionIDMarker)
		}
	}
	w.common(lq, res.Truncated)
	if lq.restoreStatus {
		prepareStorage(s, req, a, res.Entries, func(e archiveview.VersionEntry) (archiveview.File, bool) {
			return e.Version.File, e.Prefix == "" && !e.Version.DeleteMarker && e.Version.Archive == nil && e.Version.Class == ""
		})
	}
	for _, e := range res.Entries {
		if e.Prefix != "" {
			continue
		}
		v := e.Version
		var (
			class   string
			restore backend.RestoreStatus
		)
		switch {
		case v.DeleteMarker:
		case v.Class != "": // a dataset's older version, not open: its class when the history was built
			class = v.Class
		default:
			va := a
			if v.Archive != nil {
				va = v.Archive
			}
			if class, restore, err = s.entryStorage(req, va, v.File, lq.restoreStatus); err != nil {
				s.readFailed(req, a, ctx, err)
				return
			}
		}
		if v.DeleteMarker {
			w.WriteString("<DeleteMarker>")
		} else {
			w.WriteString("<Version>")
		}
		w.key(v.Key)
		w.elem("VersionId", v.VersionID)
		w.elem("IsLatest", strconv.FormatBool(v.IsLatest))
		w.lastModified(v.ModTime)
		if v.DeleteMarker {
			w.ownerElem()
			w.WriteString("</DeleteMarker>")
			continue
		}
		w.etag(v.ETag)
		w.size(v.Size)
		w.storageClass(class)
		w.ownerElem()
		w.restoreStatus(restore)
		w.WriteString("</Version>")
	}
	for _, e := range res.Entries {
		if e.Prefix != "" {
			w.commonPrefix(e.Prefix)
		}
	}
	s.writeBody(req, http.StatusOK, "application/xml", w.close())
}

// history is the version history of req's bucket (BucketHistory, built
// on first use).
func (s *server) history(ctx context.Context, req *request, a *archiveview.Archive) (archiveview.History, error) {
	return BucketHistory(ctx, s.cfg.History, req.bucket, a, true)
}

// lookupVersion is version vid of req's key. An id whose form no version
// of the bucket can have (Config.VersionIDForm: an error wrapping
// archiveview.ErrBadVersionID) is refused before the history is looked up
// or built.
func (s *server) lookupVersion(ctx context.Context, req *request, a *archiveview.Archive, vid string) (archiveview.Version, bool, error) {
	if s.cfg.VersionIDForm != nil {
		if err := s.cfg.VersionIDForm(req.bucket, vid); err != nil {
			return archiveview.Version{}, false, err
		}
	}
	vs, err := s.history(ctx, req, a)
	if err != nil {
		return archiveview.Version{}, false, err
	}
	return vs.Lookup(ctx, req.key, vid)
}

// BucketHistory is the version history of bucket, which serves a: a
// published dataset's (hook, built when build is set; nil while it is not
// built and build is not set), else a's upload chain. s3api and the
// console both answer versions through it.
func BucketHistory(ctx context.Context, hook HistoryFunc, bucket string, a *archiveview.Archive, build bool) (archiveview.History, error) {
	if hook != nil {
		h, dataset, err := hook(ctx, bucket, a, build)
		if dataset {
			return h, err
		}
	}
	vs, err := a.Versions(ctx)
	if err != nil {
		return nil, err
	}
	return vs, nil
}
