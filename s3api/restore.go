package s3api

// Archived files: RestoreObject (POST /bucket/key?restore), the
// RestoreStatus optional attribute of listings, and the parsers they need.
//
// RestoreObject is wharf's only request with a body and its only one that
// costs money, so it runs only when Config.AllowRestore is set and the
// caller's key may restore in the bucket (auth.Identity.CanRestore); it is
// let past the write refusal only for ?restore on a key, and only to be
// authenticated like any request. The body is bounded, checked against
// every integrity header the client sent (x-amz-content-sha256,
// Content-MD5, x-amz-checksum-*), and parsed strictly. The file's backend
// objects that need a restore get one RestoreObject each
// (archiveview.Archive.RestoreObjects, over the file's storage worked out
// once); the answer is S3's: 202 when a restore
// started, 200 when every object is already restored, 409
// RestoreAlreadyInProgress, 403 InvalidObjectState for a file that is not
// archived; 503 GlacierExpeditedRetrievalNotAvailable when the store has no
// Expedited capacity. Every restore is logged with the key that asked and
// its objects (every one a RestoreObject was sent for; a few of the
// others, the rest counted), their sizes, also one that failed part way,
// and counted (wharf_restores_total, wharf_restore_bytes_total).

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// maxRestoreBody bounds the RestoreRequest document read (S3's documents
// are a few hundred bytes).
const maxRestoreBody = 64 << 10

// parseRestoreRequest parses a RestoreRequest body:
//
//	<RestoreRequest xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
//	  <Days>7</Days>
//	  <GlacierJobParameters><Tier>Bulk</Tier></GlacierJobParameters>
//	</RestoreRequest>
//
// Cases:
//
//   - an empty (or all-whitespace) body is a request with neither Days nor
//     Tier (an Intelligent-Tiering restore; for GLACIER and DEEP_ARCHIVE
//     the restore then fails for want of Days);
//   - the root element must be RestoreRequest, in S3's namespace or none;
//     anything after it but whitespace is MalformedXML;
//   - Days: at most once, decimal digits only, 1 to backend.MaxRestoreDays
//     (0 or more is InvalidArgument; a sign, spaces or non-digits are
//     MalformedXML);
//   - GlacierJobParameters: at most once, holding exactly one Tier, which
//     must be Standard, Bulk or Expedited (another value is
//     InvalidArgument); an empty GlacierJobParameters is MalformedXML;
//   - Description is accepted and ignored;
//   - Type, Tier (at the top level), SelectParameters and OutputLocation
//     describe S3 Select and output-location restores: NotImplemented;
//   - any other element, an element given twice, child elements inside
//     Days or Tier, attributes other than namespace declarations, and
//     non-whitespace text between elements are MalformedXML.
func parseRestoreRequest(body []byte) (backend.RestoreRequest, *apiError) {
	var rr backend.RestoreRequest
	malformed := func(why string) (backend.RestoreRequest, *apiError) {
		return backend.RestoreRequest{}, &apiError{Code: errMalformedXML, Cause: errors.New("RestoreRequest: " + why)}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return rr, nil
	}
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = true
	// path is the element stack below the document root.
	var (
		path       []string
		text       strings.Builder
		rootSeen   bool
		rootClosed bool
		seen       = map[string]bool{}
	)
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return malformed(err.Error())
		}
		switch t := tok.(type) {
		case xml.ProcInst, xml.Comment:
			continue
		case xml.Directive:
			return malformed("a directive")
		case xml.CharData:
			if len(path) == 0 || !isLeaf(path) {
				if len(bytes.TrimSpace(t)) != 0 {
					return malformed("text outside a value")
				}
				continue
			}
			text.Write(t)
		case xml.StartElement:
			for _, a := range t.Attr {
				if a.Name.Space != "xmlns" && !(a.Name.Space == "" && a.Name.Local == "xmlns") {
					return malformed("attribute " + a.Name.Local)
				}
			}
			if t.Name.Space != "" && t.Name.Space != xmlNS {
				return malformed("element " + t.Name.Local + " in namespace " + t.Name.Space)
			}
			name := t.Name.Local
			if !rootSeen {
				if name != "RestoreRequest" {
					return malformed("root element " + name)
				}
				rootSeen = true
				path = append(path, name)
				continue
			}
			if rootClosed {
				return malformed("content after the document")
			}
			if len(path) > 0 && isLeaf(path) {
				return malformed("element " + name + " inside " + path[len(path)-1])
			}
			full := strings.Join(append(path[1:], name), "/")
			switch full {
			case "Days", "GlacierJobParameters", "GlacierJobParameters/Tier", "Description":
			case "Type", "Tier", "SelectParameters", "OutputLocation":
				return backend.RestoreRequest{}, &apiError{Code: errNotImplemented,
					Message: "S3 Select and output-location restores are not supported; send Days and GlacierJobParameters only"}
			default:
				return malformed("unknown element " + full)
			}
			if seen[full] {
				return malformed(full + " given twice")
			}
			seen[full] = true
			path = append(path, name)
			text.Reset()
		case xml.EndElement:
			full := strings.Join(path[1:], "/")
			switch full {
			case "Days":
				v := text.String()
				if v == "" || len(v) > 9 || strings.TrimLeft(v, "0123456789") != "" {
					return malformed("Days is not a number")
				}
				n, _ := strconv.Atoi(v)
				if n < 1 || n > backend.MaxRestoreDays {
					return backend.RestoreRequest{}, &apiError{Code: errInvalidArgument,
						Message: fmt.Sprintf("Days must be between 1 and %d", backend.MaxRestoreDays)}
				}
				rr.Days = n
			case "GlacierJobParameters/Tier":
				v := text.String()
				if !backend.ValidRetrievalTier(v) {
					return backend.RestoreRequest{}, &apiError{Code: errInvalidArgument,
						Message: "Tier must be Standard, Bulk or Expedited"}
				}
				rr.Tier = v
			case "GlacierJobParameters":
				if !seen["GlacierJobParameters/Tier"] {
					return malformed("GlacierJobParameters without a Tier")
				}
			}
			path = path[:len(path)-1]
			if len(path) == 0 {
				rootClosed = true
			}
		}
	}
	if !rootSeen || !rootClosed {
		return malformed("no complete RestoreRequest element")
	}
	return rr, nil
}

// isLeaf reports whether the innermost element of path holds text.
func isLeaf(path []string) bool {
	full := strings.Join(path[1:], "/")
	return full == "Days" || full == "GlacierJobParameters/Tier" || full == "Description"
}

// crc64NVME is the CRC-64/NVME table (x-amz-checksum-crc64nvme): the
// reflected form of the polynomial 0xad93d23594c93659.
var crc64NVME = crc64.MakeTable(0x9a6c9329ac4bc9b5)

// bodySHA256 is the lower-case hex SHA-256 of body.
func bodySHA256(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// checkPayload verifies body against the integrity headers the client sent:
// x-amz-content-sha256 when it is a digest (the signature covered that
// header, so this makes the body signed), Content-MD5, and any
// x-amz-checksum-{crc32,crc32c,crc64nvme,sha1,sha256}. A mismatch is the
// error S3 answers; a checksum algorithm wharf does not know is refused.
func checkPayload(h http.Header, body []byte) *apiError {
	if v := h.Get("X-Amz-Content-Sha256"); len(v) == 64 {
		if bodySHA256(body) != v {
			return &apiError{Code: errXAmzContentSHA256Mismatch}
		}
	}
	if vs := h.Values("Content-Md5"); len(vs) > 0 {
		want, err := base64.StdEncoding.DecodeString(vs[0])
		if len(vs) > 1 || err != nil || len(want) != md5.Size {
			return &apiError{Code: errInvalidDigest}
		}
		if sum := md5.Sum(body); !bytes.Equal(sum[:], want) {
			return &apiError{Code: errBadDigest}
		}
	}
	for name := range h {
		alg, ok := strings.CutPrefix(strings.ToLower(name), "x-amz-checksum-")
		if !ok || alg == "type" || alg == "mode" || alg == "algorithm" {
			continue
		}
		var hh hash.Hash
		switch alg {
		case "crc32":
			hh = crc32.NewIEEE()
		case "crc32c":
			hh = crc32.New(crc32.MakeTable(crc32.Castagnoli))
		case "crc64nvme":
			hh = crc64.New(crc64NVME)
		case "sha1":
			hh = sha1.New()
		case "sha256":
			hh = sha256.New()
		default:
			return &apiError{Code: errInvalidRequest, Message: "Unsupported checksum algorithm: " + alg}
		}
		hh.Write(body)
		got := hh.Sum(nil)
		if b64 := base64.StdEncoding.EncodeToString(got); b64 != h.Get(name) {
			return &apiError{Code: errBadDigest, Message: fmt.Sprintf("The %s you specified did not match the calculated checksum.", strings.ToUpper(alg))}
		}
	}
	return nil
}

// parseOptionalAttributes reads x-amz-optional-object-attributes (a
// comma-separated list, possibly repeated): RestoreStatus is the one
// attribute S3 defines; any other name is 400 InvalidArgument; empty
// entries are ignored.
func parseOptionalAttributes(h http.Header) (restoreStatus bool, e *apiError) {
	for _, v := range h.Values("X-Amz-Optional-Object-Attributes") {
		for a := range strings.SplitSeq(v, ",") {
			switch a = strings.TrimSpace(a); a {
			case "":
			case "RestoreStatus":
				restoreStatus = true
			default:
				return false, &apiError{Code: errInvalidArgument, Message: "Invalid attribute name specified."}
			}
		}
	}
	return restoreStatus, nil
}

// restoreStatus writes a listing entry's RestoreStatus element for a file
// with a restore (none otherwise), as S3 does for an archived object.
func (w *listXML) restoreStatus(r backend.RestoreStatus) {
	if !r.Requested {
		return
	}
	w.WriteString("<RestoreStatus>")
	w.elem("IsRestoreInProgress", strconv.FormatBool(r.Ongoing))
	if !r.Ongoing && !r.Expiry.IsZero() {
		w.elem("RestoreExpiryDate", xmlTime(r.Expiry))
	}
	w.WriteString("</RestoreStatus>")
}

// entryStorage is what one listing entry shows of a file's storage: its
// class without any request, and, when RestoreStatus was asked for and
// the file is archived, its restore state as known after prepareStorage
// (no HEAD of its own: a page costs at most archiveview.MaxFreshHeads).
func (s *server) entryStorage(req *request, a *archiveview.Archive, f archiveview.File, withRestore bool) (string, backend.RestoreStatus, error) {
	class := a.StorageClass(f)
	if !withRestore || !backend.NeedsRestore(class, "") && class != backend.ClassIntelligentTiering {
		return class, backend.RestoreStatus{}, nil
	}
	st, err := a.FileStorageAtMost(req.r.Context(), f, 0)
	if err != nil {
		return class, backend.RestoreStatus{}, err
	}
	return st.Class, st.Restore, nil
}

// prepareStorage refreshes the restore states a listing page with
// RestoreStatus needs, in parallel, before its entries are written: at
// most archiveview.MaxFreshHeads HEADs per page, out of the client's
// allowance (restoreheads.go), so that a reading key paging such a
// listing over an archive of N archived chunks does not cost N HEADs per
// --restore-status-ttl. Entries past the cap show the state known already
// (the last listing or HEAD of their chunks), as S3 answers a listing
// from its own state; the next pages and listings refresh the rest.
func prepareStorage[E any](s *server, req *request, a *archiveview.Archive, entries []E, file func(E) (archiveview.File, bool)) {
	files := make([]archiveview.File, 0, len(entries))
	for _, e := range entries {
		if f, ok := file(e); ok {
			files = append(files, f)
		}
	}
	heads := s.freshHeads(req)
	s.headsSpent(req, heads, a.PrepareStorageAtMost(req.r.Context(), files, heads))
}

// restoreObject answers RestoreObject.
func (s *server) restoreObject(req *request, a *archiveview.Archive) {
	fail := func(e *apiError) {
		e.Bucket, e.Key = req.bucket, req.key
		s.writeError(req, e)
	}
	if !s.cfg.AllowRestore || !req.identity.CanRestore(req.bucket) {
		fail(&apiError{Code: errAccessDenied, Cause: errors.New("restore not allowed for this key and bucket")})
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.r.Body, maxRestoreBody+1))
	if err != nil {
		fail(&apiError{Code: errIncompleteBody, Cause: err})
		return
	}
	if len(body) > maxRestoreBody {
		fail(&apiError{Code: errMalformedXML, Cause: fmt.Errorf("RestoreRequest larger than %d bytes", maxRestoreBody)})
		return
	}
	if e := checkPayload(req.r.Header, body); e != nil {
		fail(e)
		return
	}
	// The body hash the signature covers, also when a presigned URL
	// carries it in its query rather than in a header.
	if p := req.identity.PayloadHash(); len(p) == 2*sha256.Size && bodySHA256(body) != p {
		fail(&apiError{Code: errXAmzContentSHA256Mismatch})
		return
	}
	rr, e := parseRestoreRequest(body)
	if e != nil {
		fail(e)
		return
	}
	a, f, versionID, ok := s.objectVersion(req, a)
	if !ok {
		return
	}
	ctx := req.r.Context()
	// The file's storage, worked out once: the budget's charge and the
	// restore both read it (each object's decision is taken again under
	// its own turn, chunkio.Classes.Restore).
	st, err := a.FileStorage(ctx, f)
	if err != nil {
		s.readFailed(req, a, ctx, err)
		return
	}
	// --max-restore-bytes-per-key: charged before anything is sent, for
	// the archived objects without a restore that fit in the key's budget
	// (in the file's order: the others wait for a later request),
	// refunded for those not sent.
	objs, charged, left := st.Objects, int64(0), 0
	if s.restoreBudget.perHour > 0 {
		var (
			ok   bool
			wait time.Duration
		)
		if objs, charged, left, ok, wait = s.restoreBudget.takeFor(req.identity.AccessKey, st, s.now(), rr); !ok {
			fail(&apiError{Code: errSlowDown,
				Message: "Please reduce your request rate: this access key has used its restore budget for the hour.",
				Cause: fmt.Errorf("restore budget: key %s has used its --max-restore-bytes-per-key %d for the hour; %d bytes more asked: %w",
					req.identity.AccessKey, s.restoreBudget.perHour, restoreNeed(st, s.now(), rr), errClientThrottled),
				Header: http.Header{"Retry-After": []string{retryAfterSeconds(wait)}}})
			return
		}
	}
	rep, err := a.RestoreObjects(ctx, objs, rr)
	if err != nil {
		err = fmt.Errorf("archive %s: key %s: %w", a.Name(), f.Key, err)
	}
	if charged > 0 {
		s.restoreBudget.give(req.identity.AccessKey, charged-restoreSentCharge(rep), s.now())
	}
	switch {
	case errors.Is(err, backend.ErrNotArchived):
		fail(&apiError{Code: errInvalidObjectState, Message: "Restore is not allowed for the object's current storage class", Cause: err})
		return
	case errors.Is(err, backend.ErrInvalidRestore):
		msg := "The restore request is not valid for this object"
		if ire := (*backend.InvalidRestoreError)(nil); errors.As(err, &ire) {
			msg = ire.Reason
		}
		fail(&apiError{Code: errInvalidArgument, Message: msg, Cause: err})
		return
	case err != nil:
		if len(rep.Objects) > 0 {
			// Restores that started before the failure cost money:
			// logged and counted like any.
			s.logRestore(req, f, versionID, rr, rep, left, err)
		}
		if errors.Is(err, backend.ErrExpeditedUnavailable) && ctx.Err() == nil {
			// S3's own answer: the client should use another tier.
			fail(&apiError{Code: errExpeditedUnavailable, Cause: err})
			return
		}
		s.readFailed(req, a, ctx, err)
		return
	}
	s.logRestore(req, f, versionID, rr, rep, left, nil)
	switch rep.Result {
	case backend.RestoreStarted:
		s.writeBody(req, http.StatusAccepted, "application/xml", nil)
	case backend.RestoreInProgress:
		fail(&apiError{Code: errRestoreAlreadyInProgress})
	default:
		s.writeBody(req, http.StatusOK, "application/xml", nil)
	}
}

// maxLoggedRestoreObjects bounds the objects a restore's log line lists
// besides those it sent a RestoreObject for (each of which is listed: it
// is billed); the rest are counted in objects_unlisted, so that asking
// again and again for a file over thousands of chunks that are restoring
// already does not log thousands of objects per request.
// The restore line's list of objects: those it sent a request for, up to
// maxLoggedSentObjects (a file over thousands of chunks would make a
// line of megabytes), and the others while the list holds fewer than
// maxLoggedRestoreObjects; the rest are counted in objects_unlisted.
const (
	maxLoggedRestoreObjects = 16
	maxLoggedSentObjects    = 256
)

// logRestore logs a RestoreObject with the objects it concerned (see
// above), their sizes and the requesting key, and counts the restores it
// started. The file's and the objects' keys are an uploader's text
// (backend.PrintableText). A
// restore that failed part way (err) is logged with the error, result
// "failed", and the object whose request failed as "failed". left is how
// many archived objects the restore budget left for a later request
// (objects_left_for_budget, when any: the 202 cannot say it).
func (s *server) logRestore(req *request, f archiveview.File, versionID string, rr backend.RestoreRequest, rep archiveview.RestoreReport, left int, failed error) {
	tier := rr.Tier
	if tier == "" {
		tier = backend.RetrievalStandard
	}
	type obj struct {
		Key    string `json:"key"`
		Size   int64  `json:"size"`
		Class  string `json:"class"`
		Sent   bool   `json:"sent"`
		Result string `json:"result"`
	}
	objs := make([]obj, 0, min(len(rep.Objects), maxLoggedRestoreObjects))
	var started, startedBytes int64
	unlisted := 0
	for _, o := range rep.Objects {
		// The stored size as the budget counts it (the store's, when
		// larger than the manifest's).
		size := max(o.Size, o.ObjectClass.Size)
		if o.Sent && o.Result == backend.RestoreStarted {
			started++
			startedBytes += size
		}
		if len(objs) >= maxLoggedRestoreObjects && (!o.Sent || len(objs) >= maxLoggedSentObjects) {
			unlisted++
			continue
		}
		result := o.Result.String()
		if o.Result == 0 {
			result = "failed"
		}
		objs = append(objs, obj{Key: backend.PrintableText(o.Key, MaxLoggedKey), Size: size, Class: o.Class, Sent: o.Sent, Result: result})
	}
	s.metrics.restored(tier, started, startedBytes)
	result := rep.Result.String()
	ev := s.cfg.Logger.Info()
	if failed != nil {
		result = "failed"
		ev = s.cfg.Logger.Warn().Err(failed)
	}
	ev = ev.Str("request_id", req.id).Str("bucket", req.bucket).Str("key", backend.PrintableText(f.Key, MaxLoggedKey)).
		Str("access_key", req.identity.AccessKey).Str("tier", tier).Int("days", rr.Days).
		Str("result", result).Int64("restores_started", started).Int64("bytes_started", startedBytes).
		Interface("objects", objs).Int("objects_unlisted", unlisted)
	if left > 0 {
		ev = ev.Int("objects_left_for_budget", left)
	}
	if versionID != "" {
		ev = ev.Str("version_id", versionID)
	}
	ev.Msg("restore")
}

// archivedError maps a read refused because its bytes are archived to S3's
// 403 InvalidObjectState, with the class and tier of the archived object.
func archivedError(err error) (*apiError, bool) {
	var ae *backend.ArchivedError
	if !errors.As(err, &ae) {
		return nil, false
	}
	e := &apiError{Code: errInvalidObjectState, Cause: err, StorageClass: ae.StorageClass}
	if ae.StorageClass == backend.ClassIntelligentTiering {
		e.AccessTier = ae.AccessTier
	}
	return e, true
}
