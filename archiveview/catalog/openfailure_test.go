package catalog

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog/dataset"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// TestOpenFailurePublicMessage: every kind of open failure is told to the
// client in wharf's words, naming the bucket; the store's text (an ARN, an
// account, the backing bucket and key) never is, and Error keeps it all.
func TestOpenFailurePublicMessage(t *testing.T) {
	const storeText = "User: arn:aws:sts::123456789012:assumed-role/r/i-1 is not authorized on arn:aws:s3:::private/uploads/u/manifest.json.gz"
	for _, tc := range []struct {
		kind error
		says string
	}{
		{backend.ErrAccessDenied, "the store denied this server access"},
		{backend.ErrNotFound, "an object it needs was not found"},
		{backend.ErrUnavailable, "the store was unavailable"},
		{manifest.ErrInvalid, "its manifest is not valid"},
		{manifest.ErrTooLarge, "exceeds a limit"},
		{archiveview.ErrBrokenChain, "chain of manifests is broken"},
		{ErrOpenTimeout, "its open timed out"},
		{ErrIndexMemory, "index memory is in use"},
		{dataset.ErrBadPointer, "its dataset's CURRENT pointer is not valid"},
		{errors.New("anything"), "could not be opened. The server's log"},
	} {
		err := &archiveview.OpenError{Archive: "b1", Manifest: "s3://private/uploads/u/manifest.json.gz",
			Err: &backend.Error{Op: "get", Bucket: "private", Key: "uploads/u/manifest.json.gz", Err: fmt.Errorf("%w: %s", tc.kind, storeText)}}
		f := &OpenFailure{Bucket: "b1", Err: err}
		msg := f.PublicMessage()
		if !strings.Contains(msg, "bucket b1 could not be opened") || !strings.Contains(msg, tc.says) {
			t.Errorf("%v: %q, want the bucket and %q", tc.kind, msg, tc.says)
		}
		for _, secret := range []string{"arn:", "123456789012", "private", "manifest.json"} {
			if strings.Contains(msg, secret) {
				t.Errorf("%v: the client is told %q: %s", tc.kind, secret, msg)
			}
		}
		transient := tc.kind == backend.ErrUnavailable || tc.kind == ErrOpenTimeout || tc.kind == ErrIndexMemory
		if f.Transient() != transient {
			t.Errorf("%v: Transient() %v, want %v", tc.kind, f.Transient(), transient)
		}
		if !strings.Contains(f.Error(), "arn:aws:sts::123456789012") || !errors.Is(f, tc.kind) {
			t.Errorf("%v: Error lost the cause: %v", tc.kind, f)
		}
	}
}
