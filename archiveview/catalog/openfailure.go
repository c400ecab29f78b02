package catalog

// What a client is told about a bucket whose archive could not be opened.
//
// An open error carries the store's own text (an AWS AccessDenied names the
// account, the role, the bucket and the key), the manifest's URL and, for a
// refused manifest, keys from inside it. None of that is for an anonymous
// client. The catalog therefore hands s3api an *OpenFailure: its Error is
// the whole open error (for the log, as /-/archives and the server's log
// show it), and its PublicMessage names only the bucket the client asked
// for and what kind of failure it was, in wharf's own words. The manifest
// key is left out as well: it names the backing bucket and its layout,
// which a client of the virtual bucket has no business knowing.

import (
	"errors"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog/dataset"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// OpenFailure is the error Bucket returns for a bucket whose archive could
// not be opened. Error is the open error's full text; PublicMessage is
// what may be sent to any client.
type OpenFailure struct {
	Bucket string // the served bucket name
	Err    error  // the open error
}

func (f *OpenFailure) Error() string { return f.Err.Error() }
func (f *OpenFailure) Unwrap() error { return f.Err }

// openFailureKinds is the one table of failure kinds a client is told, in
// order (the first that matches; a broken chain is also "not found"), and
// whether the kind is transient: a passing condition of the store or of
// this server, not of the archive (s3api answers it 503 SlowDown, where
// every other failure is 500 InternalError).
//
// A kept kind is of the manifests' own bytes (and this server's fixed
// limits): opening the same objects again fails the same way, so a rescan
// that lists the upload's manifest with the same key and ETag keeps the
// failure instead of reading it again (keptFailure). Every other kind is
// tried again at the next rescan (a store's answer, a missing parent, a
// pointer may change without the manifest changing).
var openFailureKinds = []failureKind{
	{ErrOpenTimeout, "its open timed out (it is tried again at the next rescan)", true, false},
	{ErrIndexMemory, "the server's index memory is in use (it is tried again at the next rescan)", true, false},
	{ErrNoUpload, "its alias has no finished upload that can be served", false, false},
	{dataset.ErrBadPointer, "its dataset's CURRENT pointer is not valid (it is read again at the next rescan)", false, false},
	{archiveview.ErrBrokenChain, "its chain of manifests is broken", false, false},
	{manifest.ErrEncrypted, "its manifest is encrypted", false, true},
	{manifest.ErrTooLarge, "its manifest exceeds a limit of this server", false, true},
	{manifest.ErrVersion, "its manifest has an unsupported version", false, true},
	{manifest.ErrInvalid, "its manifest is not valid", false, true},
	{archiveview.ErrInvalidTree, "its manifest describes files this server refuses to serve", false, true},
	{backend.ErrNotFound, "an object it needs was not found in the store", false, false},
	{backend.ErrAccessDenied, "the store denied this server access", false, false},
	{backend.ErrUnavailable, "the store was unavailable (it is tried again at the next rescan)", true, false},
	{backend.ErrChanged, "its manifest changed while it was read", false, false},
}

// failureKind is one row of openFailureKinds.
type failureKind struct {
	kind      error
	says      string
	transient bool
	kept      bool
}

// kindOf is the first row of openFailureKinds that err matches (the zero
// row for none): the one lookup of the table.
func kindOf(err error) failureKind {
	for _, k := range openFailureKinds {
		if errors.Is(err, k.kind) {
			return k
		}
	}
	return failureKind{}
}

// keptFailure reports whether err, an open's failure, is of a kept kind
// (openFailureKinds): the first kind it matches is one of the manifests'
// own bytes.
func keptFailure(err error) bool { return kindOf(err).kept }

// retryText is what /-/archives says of when a failed open is tried again.
func retryText(err error) string {
	if keptFailure(err) {
		return "when its manifest changes (the same key and ETag is not read again)"
	}
	return "at the next rescan"
}

// Transient reports whether the failure is of a transient kind
// (openFailureKinds): the store unavailable or throttling, the open's
// deadline, the index memory in use. The archive may open at the next
// rescan, so a client is told to retry (503), not that the server failed.
func (f *OpenFailure) Transient() bool {
	_, transient := f.kind()
	return transient
}

// kind is the first of openFailureKinds the failure matches: what the
// client is told of it and whether it is transient ("", false for none).
func (f *OpenFailure) kind() (says string, transient bool) {
	k := kindOf(f.Err)
	return k.says, k.transient
}

// PublicMessage is the failure in wharf's words: the bucket and the kind
// of failure, never the store's text, the manifest's key or keys from
// inside it.
func (f *OpenFailure) PublicMessage() string {
	msg := "The archive served as bucket " + f.Bucket + " could not be opened"
	if says, _ := f.kind(); says != "" {
		msg += ": " + says
	}
	return msg + ". The server's log has the details."
}
