package s3api

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/backend"
)

// errorCode is an S3 error code. Every code wharf can answer is defined once
// in errorTable with its HTTP status and default message.
type errorCode string

const (
	errAccessDenied       errorCode = "AccessDenied"
	errAccessForbidden    errorCode = "AccessForbidden"
	errBadRequest         errorCode = "BadRequest"
	errInternalError      errorCode = "InternalError"
	errInvalidArgument    errorCode = "InvalidArgument"
	errInvalidRange       errorCode = "InvalidRange"
	errInvalidPartNumber  errorCode = "InvalidPartNumber"
	errInvalidRequest     errorCode = "InvalidRequest"
	errMethodNotAllowed   errorCode = "MethodNotAllowed"
	errNoSuchBucket       errorCode = "NoSuchBucket"
	errNoSuchKey          errorCode = "NoSuchKey"
	errNoSuchVersion      errorCode = "NoSuchVersion"
	errNoSuchBucketPolicy errorCode = "NoSuchBucketPolicy"
	errNoSuchCORS         errorCode = "NoSuchCORSConfiguration"
	errNoSuchTagSet       errorCode = "NoSuchTagSet"
	errNoObjectLockConfig errorCode = "ObjectLockConfigurationNotFoundError"
	errNotImplemented     errorCode = "NotImplemented"
	errPreconditionFailed errorCode = "PreconditionFailed"
	errSlowDown           errorCode = "SlowDown"

	errInvalidObjectState        errorCode = "InvalidObjectState"
	errRestoreAlreadyInProgress  errorCode = "RestoreAlreadyInProgress"
	errExpeditedUnavailable      errorCode = "GlacierExpeditedRetrievalNotAvailable"
	errMalformedXML              errorCode = "MalformedXML"
	errBadDigest                 errorCode = "BadDigest"
	errInvalidDigest             errorCode = "InvalidDigest"
	errXAmzContentSHA256Mismatch errorCode = "XAmzContentSHA256Mismatch"
	errIncompleteBody            errorCode = "IncompleteBody"
	// errObjectChanged is wharf's own code: a stored object of an open
	// archive changed while it was read. The client's retry cannot help
	// until the archive is opened again, so it is a 4xx, not a 500.
	errObjectChanged errorCode = "ObjectChanged"
)

type errorInfo struct {
	status  int
	message string
}

// errorTable is the single source of status codes and messages.
var errorTable = map[errorCode]errorInfo{
	errAccessDenied:       {http.StatusForbidden, "Access Denied"},
	errAccessForbidden:    {http.StatusForbidden, "CORSResponse: CORS is not enabled for this bucket."},
	errBadRequest:         {http.StatusBadRequest, "Bad Request"},
	errInternalError:      {http.StatusInternalServerError, "We encountered an internal error. Please try again."},
	errInvalidArgument:    {http.StatusBadRequest, "Invalid Argument"},
	errInvalidRange:       {http.StatusRequestedRangeNotSatisfiable, "The requested range is not satisfiable"},
	errInvalidPartNumber:  {http.StatusRequestedRangeNotSatisfiable, "The requested partnumber is not satisfiable"},
	errInvalidRequest:     {http.StatusBadRequest, "Invalid Request"},
	errMethodNotAllowed:   {http.StatusMethodNotAllowed, "The specified method is not allowed against this resource."},
	errNoSuchBucket:       {http.StatusNotFound, "The specified bucket does not exist"},
	errNoSuchKey:          {http.StatusNotFound, "The specified key does not exist."},
	errNoSuchVersion:      {http.StatusNotFound, "The specified version does not exist."},
	errNoSuchBucketPolicy: {http.StatusNotFound, "The bucket policy does not exist"},
	errNoSuchCORS:         {http.StatusNotFound, "The CORS configuration does not exist"},
	errNoSuchTagSet:       {http.StatusNotFound, "The TagSet does not exist"},
	errNoObjectLockConfig: {http.StatusNotFound, "Object Lock configuration does not exist for this bucket"},
	errNotImplemented:     {http.StatusNotImplemented, "A header or query you provided implies functionality that is not implemented."},
	errPreconditionFailed: {http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold"},
	errSlowDown:           {http.StatusServiceUnavailable, "Please reduce your request rate."},

	errInvalidObjectState:        {http.StatusForbidden, "The operation is not valid for the object's storage class"},
	errRestoreAlreadyInProgress:  {http.StatusConflict, "Object restore is already in progress"},
	errExpeditedUnavailable:      {http.StatusServiceUnavailable, "Glacier expedited retrievals are currently not available, please try again later"},
	errMalformedXML:              {http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema"},
	errBadDigest:                 {http.StatusBadRequest, "The Content-MD5 you specified did not match what we received."},
	errInvalidDigest:             {http.StatusBadRequest, "The Content-MD5 you specified is not valid."},
	errXAmzContentSHA256Mismatch: {http.StatusBadRequest, "The provided 'x-amz-content-sha256' header does not match what was computed."},
	errIncompleteBody:            {http.StatusBadRequest, "You did not provide the number of bytes specified by the Content-Length HTTP header"},
	errObjectChanged:             {http.StatusConflict, "A stored object of this archive changed while it was read (the upload was rewritten); retrying cannot help until the archive is opened again"},
}

// readErrors is the one table from the errors of the read and restore paths
// (archiveview, chunkio, backend sentinels, tried in order with errors.Is)
// to the S3 code a client gets; archived bytes (403 InvalidObjectState)
// are answered before it (archivedError). Anything not in the table is 500
// InternalError: the server's fault (a checksum, a corrupt frame, a missing
// chunk, a broken chain), never the client's.
var readErrors = []struct {
	kind    error
	code    errorCode
	message func(f backend.Failure, ok bool) string // nil: the table's message
}{
	{backend.ErrNotImplemented, errNotImplemented, notImplementedMessage},
	{chunkio.ErrNoRestorer, errNotImplemented, notImplementedMessage},
	{backend.ErrChanged, errObjectChanged, changedMessage},
	{backend.ErrUnavailable, errSlowDown, nil},
	{chunkio.ErrBusy, errSlowDown, nil}, // the read limits stayed full for their wait (Retry-After: object.go)
}

// readError maps an error of the read or restore path to the error the
// client gets (see readErrors); the message names the store's object when
// the error holds one.
func readError(err error) (errorCode, string) {
	f, ok := backend.Describe(err)
	for _, r := range readErrors {
		if errors.Is(err, r.kind) {
			if r.message == nil {
				return r.code, ""
			}
			return r.code, r.message(f, ok)
		}
	}
	return errInternalError, ""
}

// readErrorCode is readError's code.
func readErrorCode(err error) errorCode {
	code, _ := readError(err)
	return code
}

func notImplementedMessage(f backend.Failure, ok bool) string {
	msg := "The backing store cannot restore objects: it does not implement RestoreObject"
	if ok && f.Detail != "" {
		msg += " (it answered " + f.Detail + ")"
	}
	return msg
}

func changedMessage(f backend.Failure, ok bool) string {
	if !ok {
		return errorTable[errObjectChanged].message
	}
	return fmt.Sprintf("The stored object s3://%s/%s of this archive changed while it was read (the upload was rewritten); retrying cannot help until the archive is opened again", f.Bucket, f.Key)
}

// apiError is one error response to write.
type apiError struct {
	Code    errorCode
	Message string // "" = the table's default
	Status  int    // 0 = the table's status (set for auth errors)
	Bucket  string
	Key     string
	// Header carries extra response headers (Content-Range for InvalidRange).
	Header http.Header
	// Range is set for InvalidRange: the body then carries RangeRequested
	// and ActualObjectSize, as S3's does (smart_open reads the size there).
	Range *rangeDetail
	// StorageClass and AccessTier are set for InvalidObjectState on a read
	// of archived bytes: the body carries them, as S3's does (the SDKs
	// model both fields on the error).
	StorageClass, AccessTier string
	// Cause is logged, never sent to the client.
	Cause error
}

func (e *apiError) status() int {
	if e.Status != 0 {
		return e.Status
	}
	if info, ok := errorTable[e.Code]; ok {
		return info.status
	}
	return http.StatusInternalServerError
}

func (e *apiError) message() string {
	if e.Message != "" {
		return e.Message
	}
	if info, ok := errorTable[e.Code]; ok {
		return info.message
	}
	return string(e.Code)
}

// rangeDetail is what an InvalidRange body reports: the Range header as
// sent and the object's size.
type rangeDetail struct {
	requested string
	size      int64
}

// errorResponse is the XML body of every error.
type errorResponse struct {
	XMLName          xml.Name `xml:"Error"`
	Code             string   `xml:"Code"`
	Message          string   `xml:"Message"`
	RangeRequested   string   `xml:"RangeRequested,omitempty"`
	ActualObjectSize *int64   `xml:"ActualObjectSize,omitempty"` // nil = absent; 0 is written
	StorageClass     string   `xml:"StorageClass,omitempty"`
	AccessTier       string   `xml:"AccessTier,omitempty"`
	Key              string   `xml:"Key,omitempty"`
	BucketName       string   `xml:"BucketName,omitempty"`
	Resource         string   `xml:"Resource,omitempty"`
	RequestID        string   `xml:"RequestId"`
	HostID           string   `xml:"HostId"`
}
