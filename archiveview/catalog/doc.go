// Package catalog maps S3 bucket names to archives: the configured ones
// (Source), the uploads found under discovery roots (Discover, named by
// BucketName and NameUploads), and "@latest" aliases (Latest). A Manager
// keeps the mapping current (Scan at start, on a trigger and on an
// interval), serves it through a Dynamic catalog (one atomic load per
// request, swapped whole), retires replaced archives after a grace period,
// and reports what it found (Page). Static and Dynamic implement
// s3api.Catalog; Collector exports per-bucket gauges.
//
// Every open has a deadline (Config.OpenTimeout) and fails only its own
// bucket; a rescan never waits for an open it did not start. Discovered
// and aliased uploads share an index memory budget (Config.IndexMemory,
// budget.go) and a file cap (Config.MaxFilesPerUpload). A bucket whose
// archive failed to open answers an *OpenFailure, whose PublicMessage is
// all a client may be told (never the store's text).
//
// Listing the store happens only here, never on the read path.
package catalog
