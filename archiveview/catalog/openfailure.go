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
// order (the first that matches; a broken chain is also "not found").
var openFailureKinds = []struct {
	kind error
	says string
}{
	{ErrOpenTimeout, "its open timed out (it is tried again at the next rescan)"},
	{ErrIndexMemory, "the server's index memory is in use (it is tried again at the next rescan)"},
	{ErrNoUpload, "its alias has no finished upload that can be served"},
	{dataset.ErrBadPointer, "its dataset's CURRENT pointer is not valid (it is read again at the next rescan)"},
	{archiveview.ErrBrokenChain, "its chain of manifests is broken"},
	{manifest.ErrEncrypted, "its manifest is encrypted"},
	{manifest.ErrTooLarge, "its manifest exceeds a limit of this server"},
	{manifest.ErrVersion, "its manifest has an unsupported version"},
	{manifest.ErrInvalid, "its manifest is not valid"},
	{archiveview.ErrInvalidTree, "its manifest describes files this server refuses to serve"},
	{backend.ErrNotFound, "an object it needs was not found in the store"},
	{backend.ErrAccessDenied, "the store denied this server access"},
	{backend.ErrUnavailable, "the store was unavailable"},
	{backend.ErrChanged, "its manifest changed while it was read"},
}

// PublicMessage is the failure in wharf's words: the bucket and the kind
// of failure, never the store's text, the manifest's key or keys from
// inside it.
func (f *OpenFailure) PublicMessage() string {
	msg := "The archive served as bucket " + f.Bucket + " could not be opened"
	for _, k := range openFailureKinds {
		if errors.Is(f.Err, k.kind) {
			msg += ": " + k.says
			break
		}
	}
	return msg + ". The server's log has the details."
}
