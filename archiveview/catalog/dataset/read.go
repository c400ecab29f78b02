package dataset

import (
	"context"
	"errors"
	"fmt"

	"github.com/wharf-s3/wharf/backend"
)

// Read is one read of a pointer.
type Read struct {
	Pointer     Pointer
	ETag        string // the pointer object's ETag (for the next conditional read)
	NotModified bool   // the pointer's ETag equals the one given: Pointer is zero
}

// ReadPointer reads dataset's pointer in bucket with one bounded request
// (at most MaxPointerBytes transferred), conditional on etag when it is
// not empty, and parses it. Errors name the pointer's key; a store
// failure wraps the store's error, a refused content ErrBadPointer (an
// object larger than MaxPointerBytes wraps both ErrBadPointer and
// backend.ErrTooBig).
func ReadPointer(ctx context.Context, store backend.Store, bucket, dataset, etag string) (Read, error) {
	key := PointerKey(dataset)
	data, info, notModified, err := backend.ReadSmall(ctx, store, bucket, key, MaxPointerBytes, etag)
	if err != nil {
		if errors.Is(err, backend.ErrTooBig) {
			return Read{}, fmt.Errorf("dataset pointer s3://%s/%s: %w: %w", bucket, key, ErrBadPointer, err)
		}
		return Read{}, fmt.Errorf("dataset pointer s3://%s/%s: %w", bucket, key, err)
	}
	if notModified {
		return Read{ETag: etag, NotModified: true}, nil
	}
	p, err := Parse(data, bucket, dataset)
	if err != nil {
		return Read{}, err
	}
	return Read{Pointer: p, ETag: info.ETag}, nil
}
