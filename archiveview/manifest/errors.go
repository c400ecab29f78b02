package manifest

import (
	"errors"
)

// Sentinel errors. Every error returned by Load, Parse and Validate is an
// *Error naming the manifest key and wrapping exactly one of these, so
// callers branch with errors.Is. The one exception is a failure of the
// reader given to Load (network, context): that *Error wraps the reader's
// error itself, so errors.Is(err, context.Canceled) and the backend's
// not-found errors still work.
var (
	// ErrTooLarge: the stored object, the gunzipped JSON, or an entry count
	// exceeds its Limits cap.
	ErrTooLarge = errors.New("manifest exceeds limit")
	// ErrEncrypted: a KMS envelope-encrypted manifest, which wharf cannot read.
	ErrEncrypted = errors.New("encrypted manifest")
	// ErrVersion: a missing or unsupported major version (only 1.x and 2.x are read).
	ErrVersion = errors.New("unsupported manifest version")
	// ErrInvalid: malformed JSON or gzip, or a structural lie (overlapping
	// frames, negative sizes, split parts out of range, unsafe paths, ...).
	ErrInvalid = errors.New("invalid manifest")
)

// Error is a manifest error. Its message names the manifest key; it unwraps
// to its Kind (one of the sentinels) and to Cause when there is one.
type Error struct {
	Key  string // manifest object key
	Kind error  // ErrTooLarge, ErrEncrypted, ErrVersion or ErrInvalid; nil for a read (I/O) failure

	Msg   string // what is wrong, naming the offending entry
	Cause error  // underlying error (JSON syntax, gzip, I/O), may be nil

	// FilesLimit is, for an ErrTooLarge the decoder stopped at because an
	// array capped at Limits.MaxFiles (files, file_paths, deleted_paths,
	// metadata entries, ...) grew past it, that cap; else 0. A caller that
	// set a low MaxFiles on purpose (archiveview/catalog) retries with a
	// higher one when this is its cap, without reading Msg.
	FilesLimit int
}

func (e *Error) Error() string {
	s := "manifest " + e.Key + ": " + e.Msg
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the sentinel kind and the cause.
func (e *Error) Unwrap() []error {
	var out []error
	if e.Kind != nil {
		out = append(out, e.Kind)
	}
	if e.Cause != nil {
		out = append(out, e.Cause)
	}
	return out
}

func newErr(key string, kind error, cause error, msg string) *Error {
	return &Error{Key: key, Kind: kind, Msg: msg, Cause: cause}
}
