// Package catalog maps S3 bucket names to archives: the configured ones
// (Source), the uploads found under discovery roots (Discover, named by
// BucketName and NameUploads), and "@latest" aliases (Latest). A Manager
// keeps the mapping current (Scan at start, on a trigger and on an
// interval), serves it through a Dynamic catalog (one atomic load per
// request, swapped whole), retires replaced archives after a grace period,
// and reports what it found (Page). Static and Dynamic implement
// s3api.Catalog; Collector exports per-bucket gauges.
//
// Listing the store happens only here, never on the read path.
package catalog
