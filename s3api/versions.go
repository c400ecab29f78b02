package s3api

import (
	"encoding/xml"
	"errors"
	"net/http"
	"strconv"

	"github.com/wharf-s3/wharf/archiveview"
)

// listObjectVersions answers GET /bucket?versions: every upload of the
// archive's chain that mentions a key is a version of it (VersionId = the
// upload id), a deleted_paths entry is a delete marker. Keys come in byte
// order, each key's versions newest first, Version and DeleteMarker
// elements interleaved in that order as on AWS. Paging follows AWS:
// key-marker alone skips every version of that key; with
// version-id-marker it continues after that version; max-keys counts
// versions, delete markers and common prefixes.
func (s *Server) listObjectVersions(req *request, a *archiveview.Archive) {
	q := req.query
	lq, apiErr := parseListQuery(q, false)
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
	vs, err := a.Versions(ctx)
	if err != nil {
		s.readFailed(req, a, ctx, err)
		return
	}
	res, err := vs.ListVersions(archiveview.VersionListParams{
		Prefix:          lq.prefix,
		Delimiter:       lq.delimiter,
		KeyMarker:       keyMarker,
		VersionIDMarker: vidMarker,
		MaxKeys:         lq.maxKeys,
	})
	if errors.Is(err, archiveview.ErrUnknownVersion) {
		s.writeError(req, &apiError{Code: errInvalidArgument, Bucket: req.bucket,
			Message: "Invalid version id specified", Cause: err})
		return
	}
	if err != nil {
		s.readFailed(req, a, ctx, err)
		return
	}
	enc := func(v string) string { return v }
	if lq.encodeURL {
		enc = encodeURLKey
	}

	var b xmlWriter
	b.Grow(256 + 400*len(res.Entries))
	b.WriteString(xml.Header)
	b.WriteString(`<ListVersionsResult xmlns="` + xmlNS + `">`)
	b.elem("Name", req.bucket)
	b.elem("Prefix", enc(lq.prefix))
	b.elem("KeyMarker", enc(keyMarker))
	b.elem("VersionIdMarker", vidMarker)
	if res.Truncated {
		b.elem("NextKeyMarker", enc(res.NextKeyMarker))
		if res.NextVersionIDMarker != "" {
			b.elem("NextVersionIdMarker", res.NextVersionIDMarker)
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
	var ob xmlWriter
	ob.WriteString("<Owner>")
	ob.elem("ID", s.cfg.OwnerID)
	ob.elem("DisplayName", s.cfg.OwnerName)
	ob.WriteString("</Owner>")
	ownerXML := ob.String()
	for _, e := range res.Entries {
		if e.Prefix != "" {
			continue
		}
		v := e.Version
		if v.DeleteMarker {
			b.WriteString("<DeleteMarker>")
		} else {
			b.WriteString("<Version>")
		}
		b.elem("Key", enc(v.Key))
		b.elem("VersionId", v.VersionID)
		b.elem("IsLatest", strconv.FormatBool(v.IsLatest))
		b.elem("LastModified", xmlTime(v.ModTime))
		if v.DeleteMarker {
			b.WriteString(ownerXML)
			b.WriteString("</DeleteMarker>")
			continue
		}
		b.WriteString("<ETag>&#34;")
		b.text(v.ETag)
		b.WriteString("&#34;</ETag>")
		b.elem("Size", strconv.FormatInt(v.Size, 10))
		b.WriteString("<StorageClass>STANDARD</StorageClass>")
		b.WriteString(ownerXML)
		b.WriteString("</Version>")
	}
	for _, e := range res.Entries {
		if e.Prefix == "" {
			continue
		}
		b.WriteString("<CommonPrefixes>")
		b.elem("Prefix", enc(e.Prefix))
		b.WriteString("</CommonPrefixes>")
	}
	b.WriteString("</ListVersionsResult>")
	s.writeBody(req, http.StatusOK, "application/xml", b.Bytes())
}
