package backend

// Archive storage classes and restores: what wharf needs to know about an
// object that S3 keeps in Glacier Flexible Retrieval, Glacier Deep Archive
// or an Intelligent-Tiering archive access tier, where a GET answers
// 403 InvalidObjectState until a RestoreObject has run and finished.
//
// A Store reports what it knows in ObjectInfo (StorageClass, AccessTier,
// Restore); a read the store refuses because the object is archived fails
// with an *ArchivedError (errors.Is(err, ErrArchived)), never with a generic
// failure. Restoring is an optional capability, Restorer, implemented by
// S3Store; FileStore has no storage classes and does not restore.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Storage classes wharf treats specially (S3's names). Any other class
// (STANDARD_IA, ONEZONE_IA, REDUCED_REDUNDANCY, EXPRESS_ONEZONE, ...) is
// readable without a restore.
const (
	ClassStandard           = "STANDARD"
	ClassIntelligentTiering = "INTELLIGENT_TIERING"
	ClassGlacierIR          = "GLACIER_IR"
	ClassGlacier            = "GLACIER"
	ClassDeepArchive        = "DEEP_ARCHIVE"
)

// Intelligent-Tiering archive access tiers (x-amz-archive-status on HEAD,
// AccessTier in an InvalidObjectState error). An INTELLIGENT_TIERING object
// in one of them needs a restore; in any other tier it is readable.
const (
	TierArchiveAccess     = "ARCHIVE_ACCESS"
	TierDeepArchiveAccess = "DEEP_ARCHIVE_ACCESS"
)

// Retrieval tiers of a restore (GlacierJobParameters.Tier).
const (
	RetrievalStandard  = "Standard"
	RetrievalBulk      = "Bulk"
	RetrievalExpedited = "Expedited"
)

// Sentinels of archived objects and restores.
var (
	// ErrArchived: the object is archived and cannot be read until a
	// restore has completed (S3's 403 InvalidObjectState on GET). The error
	// in the chain is an *ArchivedError naming the class and tier.
	ErrArchived = errors.New("object is archived and must be restored before it can be read")
	// ErrNotArchived: a restore was asked for an object that needs none
	// (S3's 403 InvalidObjectState or ObjectAlreadyInActiveTierError on
	// RestoreObject).
	ErrNotArchived = errors.New("object is not archived: restore is not allowed for its storage class")
	// ErrInvalidRestore: a restore request S3 would refuse (Days missing or
	// out of range, an unknown tier, Expedited for Deep Archive, Days for an
	// Intelligent-Tiering archive tier).
	ErrInvalidRestore = errors.New("invalid restore request")
	// ErrExpeditedUnavailable: the store has no Expedited retrieval
	// capacity now (S3's 503 GlacierExpeditedRetrievalNotAvailable); a
	// Standard or Bulk restore is not affected. It comes with
	// ErrUnavailable.
	ErrExpeditedUnavailable = errors.New("expedited retrieval capacity is not available now; use the Standard or Bulk tier, or try again later")
)

// InvalidRestoreError is a restore request refused as malformed, by
// CheckRestore or by the store (S3 InvalidArgument, MalformedXML,
// InvalidRequest). Reason says why in words a client can be shown (S3's
// code and message when the store refused); it holds neither the object's
// name nor the sentinel's text. It unwraps to ErrInvalidRestore.
type InvalidRestoreError struct {
	Reason string
}

func (e *InvalidRestoreError) Error() string { return ErrInvalidRestore.Error() + ": " + e.Reason }

func (e *InvalidRestoreError) Unwrap() error { return ErrInvalidRestore }

func invalidRestore(format string, args ...any) error {
	return &InvalidRestoreError{Reason: fmt.Sprintf(format, args...)}
}

// ArchivedError is the error of a read refused because the object is
// archived. It unwraps to ErrArchived.
type ArchivedError struct {
	StorageClass string        // e.g. GLACIER, DEEP_ARCHIVE, INTELLIGENT_TIERING
	AccessTier   string        // ARCHIVE_ACCESS or DEEP_ARCHIVE_ACCESS for Intelligent-Tiering, else ""
	Restore      RestoreStatus // what is known of its restore (zero: none known)
}

func (e *ArchivedError) Error() string {
	what := e.StorageClass
	if what == "" {
		what = "an archive class"
	}
	if e.AccessTier != "" {
		what += " (" + e.AccessTier + ")"
	}
	switch {
	case e.Restore.Ongoing:
		return fmt.Sprintf("object is archived in %s; a restore is in progress", what)
	case e.Restore.Requested:
		return fmt.Sprintf("object is archived in %s; its restored copy expired", what)
	}
	return fmt.Sprintf("object is archived in %s and must be restored before it can be read", what)
}

func (e *ArchivedError) Unwrap() error { return ErrArchived }

// NeedsRestore reports whether an object of storage class class (and, for
// INTELLIGENT_TIERING, access tier tier) must be restored before a GET can
// read it: GLACIER, DEEP_ARCHIVE, and INTELLIGENT_TIERING in an archive
// access tier. GLACIER_IR and every other class are read directly.
func NeedsRestore(class, tier string) bool {
	switch class {
	case ClassGlacier, ClassDeepArchive:
		return true
	case ClassIntelligentTiering:
		return tier == TierArchiveAccess || tier == TierDeepArchiveAccess
	}
	return false
}

// Coldness ranks a class (and Intelligent-Tiering access tier) from the
// cheapest to read (0: STANDARD or unknown "") to the hardest to get back
// (DEEP_ARCHIVE), so that a file held by several objects reports the
// coldest of their classes: STANDARD < other readable classes <
// INTELLIGENT_TIERING < STANDARD_IA, ONEZONE_IA < GLACIER_IR <
// INTELLIGENT_TIERING in ARCHIVE_ACCESS < GLACIER <
// INTELLIGENT_TIERING in DEEP_ARCHIVE_ACCESS < DEEP_ARCHIVE.
func Coldness(class, tier string) int {
	switch class {
	case "", ClassStandard:
		return 0
	case ClassIntelligentTiering:
		switch tier {
		case TierArchiveAccess:
			return 40
		case TierDeepArchiveAccess:
			return 60
		}
		return 10
	case "STANDARD_IA", "ONEZONE_IA":
		return 20
	case ClassGlacierIR:
		return 30
	case ClassGlacier:
		return 50
	case ClassDeepArchive:
		return 70
	}
	return 5 // REDUCED_REDUNDANCY, EXPRESS_ONEZONE, OUTPOSTS, SNOW, ...: readable
}

// RestoreStatus is an archived object's restore state as S3 reports it
// (the x-amz-restore header, or RestoreStatus in a listing).
type RestoreStatus struct {
	// Requested: a restore exists, running or finished (x-amz-restore is
	// present). The zero value is "no restore was ever asked for".
	Requested bool
	// Ongoing: the restore is still running.
	Ongoing bool
	// Expiry is when the restored copy goes away; zero while ongoing (and
	// for restores without an expiry, as in Intelligent-Tiering).
	Expiry time.Time
}

// Done reports whether a restored copy can be read at now: a finished
// restore whose expiry, if any, is still ahead.
func (r RestoreStatus) Done(now time.Time) bool {
	return r.Requested && !r.Ongoing && (r.Expiry.IsZero() || now.Before(r.Expiry))
}

// ParseRestoreHeader parses an x-amz-restore header value:
//
//	ongoing-request="true"
//	ongoing-request="false", expiry-date="Fri, 21 Dec 2012 00:00:00 GMT"
//
// The value is a list of name="value" pairs separated by commas, with
// optional spaces or tabs around each pair. Names are matched without
// regard to case; values are quoted and hold no '"'. Cases:
//
//   - "" (no header): no restore, the zero RestoreStatus, no error;
//   - ongoing-request is required and must be "true" or "false";
//   - expiry-date, when present, must be an HTTP date in GMT as S3 writes
//     it (RFC 1123, "Mon, 02 Jan 2006 15:04:05 GMT"); it is optional (an
//     Intelligent-Tiering restore has none) and kept also while ongoing;
//   - other names are ignored, so that a field S3 adds later does not
//     break reads; a name given twice, an empty name, a pair without '='
//     or without both quotes, text after the closing quote and an empty
//     pair (",,", a trailing ',') are errors wrapping ErrBadResponse.
//
// The result has Requested set whenever the header is non-empty.
func ParseRestoreHeader(v string) (RestoreStatus, error) {
	var st RestoreStatus
	if v == "" {
		return st, nil
	}
	bad := func(why string) (RestoreStatus, error) {
		return RestoreStatus{}, fmt.Errorf("%w: x-amz-restore %q: %s", ErrBadResponse, v, why)
	}
	seen := map[string]bool{}
	rest := v
	for {
		rest = strings.TrimLeft(rest, " \t")
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			return bad("a pair without '='")
		}
		name := strings.ToLower(strings.TrimRight(rest[:eq], " \t"))
		if name == "" || strings.ContainsAny(name, ",\" \t") {
			return bad("an empty or malformed name")
		}
		if seen[name] {
			return bad(name + " given twice")
		}
		seen[name] = true
		rest = strings.TrimLeft(rest[eq+1:], " \t")
		if !strings.HasPrefix(rest, `"`) {
			return bad(name + " is not quoted")
		}
		end := strings.IndexByte(rest[1:], '"')
		if end < 0 {
			return bad(name + " has no closing quote")
		}
		val := rest[1 : 1+end]
		rest = strings.TrimLeft(rest[2+end:], " \t")
		switch name {
		case "ongoing-request":
			switch val {
			case "true":
				st.Ongoing = true
			case "false":
				st.Ongoing = false
			default:
				return bad(`ongoing-request is neither "true" nor "false"`)
			}
		case "expiry-date":
			t, err := time.Parse(http.TimeFormat, val)
			if err != nil {
				return bad("expiry-date is not an HTTP date in GMT")
			}
			st.Expiry = t.UTC()
		}
		if rest == "" {
			break
		}
		if rest[0] != ',' {
			return bad("text after a value")
		}
		rest = rest[1:]
		if strings.TrimLeft(rest, " \t") == "" {
			return bad("a trailing ','")
		}
	}
	if !seen["ongoing-request"] {
		return bad("no ongoing-request")
	}
	st.Requested = true
	return st, nil
}

// FormatRestoreHeader is the x-amz-restore value for r, "" when no restore
// was requested: ongoing-request="true" while running, else
// ongoing-request="false" with the expiry-date when there is one.
func FormatRestoreHeader(r RestoreStatus) string {
	if !r.Requested {
		return ""
	}
	s := `ongoing-request="` + fmt.Sprint(r.Ongoing) + `"`
	if !r.Expiry.IsZero() {
		s += `, expiry-date="` + r.Expiry.UTC().Format(http.TimeFormat) + `"`
	}
	return s
}

// RestoreRequest is one restore to ask a Restorer for.
type RestoreRequest struct {
	// Days is how long the restored copy stays (>= 1) for GLACIER and
	// DEEP_ARCHIVE; 0 for an Intelligent-Tiering archive tier, whose
	// restore moves the object back to the frequent tier.
	Days int
	// Tier is the retrieval tier: Standard (the default when ""), Bulk or
	// Expedited.
	Tier string
}

// MaxRestoreDays is the largest Days wharf sends (S3 documents no upper
// bound; this keeps an accidental 10^9 out of a request).
const MaxRestoreDays = 36500

// ValidRetrievalTier reports whether t is a retrieval tier name S3 accepts.
func ValidRetrievalTier(t string) bool {
	return t == RetrievalStandard || t == RetrievalBulk || t == RetrievalExpedited
}

// CheckRestore applies S3's rules to a restore of an object of class (and
// Intelligent-Tiering access tier): the tier must be Standard, Bulk or
// Expedited ("" = Standard); GLACIER and DEEP_ARCHIVE need 1 <= Days <=
// MaxRestoreDays; an Intelligent-Tiering archive tier takes no Days;
// Expedited is not available for DEEP_ARCHIVE nor for DEEP_ARCHIVE_ACCESS.
// Errors wrap ErrInvalidRestore. An object that needs no restore is not
// checked here (the restore itself answers ErrNotArchived).
func CheckRestore(class, tier string, req RestoreRequest) error {
	if req.Tier != "" && !ValidRetrievalTier(req.Tier) {
		return invalidRestore("tier %q: want Standard, Bulk or Expedited", req.Tier)
	}
	if req.Days < 0 || req.Days > MaxRestoreDays {
		return invalidRestore("Days %d: want 1 to %d", req.Days, MaxRestoreDays)
	}
	switch {
	case class == ClassIntelligentTiering && NeedsRestore(class, tier):
		if req.Days != 0 {
			return invalidRestore("Days must not be given for an object in the Intelligent-Tiering %s tier (its restore moves it back to the frequent tier)", tier)
		}
	case NeedsRestore(class, tier):
		if req.Days < 1 {
			return invalidRestore("Days (1 to %d) is required to restore a %s object", MaxRestoreDays, class)
		}
	}
	if req.Tier == RetrievalExpedited && (class == ClassDeepArchive || tier == TierDeepArchiveAccess) {
		return invalidRestore("Expedited retrieval is not available for objects in %s", deepName(class, tier))
	}
	return nil
}

func deepName(class, tier string) string {
	if tier == TierDeepArchiveAccess {
		return "the Intelligent-Tiering Deep Archive Access tier"
	}
	return class
}

// RestoreResult is what S3 answered a RestoreObject.
type RestoreResult int

const (
	// RestoreStarted: 202 Accepted, a restore started.
	RestoreStarted RestoreResult = iota + 1
	// RestoreAlreadyRestored: 200 OK, a restored copy exists (S3 extends
	// its expiry to the new Days).
	RestoreAlreadyRestored
	// RestoreInProgress: 409 RestoreAlreadyInProgress, one is running.
	RestoreInProgress
)

func (r RestoreResult) String() string {
	switch r {
	case RestoreStarted:
		return "started"
	case RestoreAlreadyRestored:
		return "already-restored"
	case RestoreInProgress:
		return "in-progress"
	}
	return "unknown"
}

// Restorer is the optional capability of a Store whose objects can be
// archived: it asks the store to restore one object. It is separate from
// Store so that Store stays small; S3Store implements it, FileStore does
// not (it has no storage classes), and Instrument keeps it.
//
// Restore answers RestoreStarted (202), RestoreAlreadyRestored (200) or
// RestoreInProgress (409 RestoreAlreadyInProgress) with a nil error.
// Errors are *Error values with Op "restore": ErrNotArchived for an
// object that needs no restore, ErrInvalidRestore for a request the store
// refused as malformed, and the usual sentinels otherwise.
type Restorer interface {
	Restore(ctx context.Context, bucket, key string, req RestoreRequest) (RestoreResult, error)
}

// AsRestorer returns s's restore capability, if it has one. A wrapper
// whose type has a Restore method but restores only when the store it
// wraps does (faults.Faulty) says so with a CanRestore method, which
// AsRestorer asks.
func AsRestorer(s Store) (Restorer, bool) {
	r, ok := s.(Restorer)
	if c, declares := s.(interface{ CanRestore() bool }); ok && declares && !c.CanRestore() {
		return nil, false
	}
	return r, ok
}

// AsPutter returns s's write-once capability, if it has one; like
// AsRestorer it asks a wrapper's CanPut method.
func AsPutter(s Store) (Putter, bool) {
	p, ok := s.(Putter)
	if c, declares := s.(interface{ CanPut() bool }); ok && declares && !c.CanPut() {
		return nil, false
	}
	return p, ok
}

// PutThrough is a wrapper's PutIfAbsent: inner's when inner can write
// (AsPutter), else ErrNotImplemented naming the object. Instrument and the
// test wrappers of backend/faults pass writes through with it.
func PutThrough(ctx context.Context, inner Store, bucket, key string, body io.ReadSeeker, size int64) (bool, error) {
	p, ok := AsPutter(inner)
	if !ok {
		return false, &Error{Op: "put", Bucket: bucket, Key: key, Err: fmt.Errorf("%w: the store cannot write", ErrNotImplemented)}
	}
	return p.PutIfAbsent(ctx, bucket, key, body, size)
}

// PutIfMatchThrough is a wrapper's PutIfMatch: inner's when inner can
// replace objects conditionally (AsMatchPutter), else ErrNotImplemented
// naming the object.
func PutIfMatchThrough(ctx context.Context, inner Store, bucket, key, etag string, body io.ReadSeeker, size int64) (bool, error) {
	p, ok := AsMatchPutter(inner)
	if !ok {
		return false, &Error{Op: "put", Bucket: bucket, Key: key, Err: fmt.Errorf("%w: the store cannot replace objects conditionally", ErrNotImplemented)}
	}
	return p.PutIfMatch(ctx, bucket, key, etag, body, size)
}

// AsMatchPutter returns s's conditional-replace capability, if it has one;
// like AsPutter it asks a wrapper's CanPutIfMatch method, so a wrapper
// that passes PutIfMatch through (Instrument, faults.Faulty) answers as
// the store it wraps does, never more.
func AsMatchPutter(s Store) (MatchPutter, bool) {
	p, ok := s.(MatchPutter)
	if c, declares := s.(interface{ CanPutIfMatch() bool }); ok && declares && !c.CanPutIfMatch() {
		return nil, false
	}
	return p, ok
}
