// Package catalog maps S3 bucket names to archives: the configured ones
// (Source), the uploads found under discovery roots (Discover, named by
// BucketName and NameUploads), "@latest" aliases (Latest) and published
// datasets (DatasetRef). A Manager
// keeps the mapping current (Scan at start, on a trigger and on an
// interval), serves it through a Dynamic catalog (one atomic load per
// request, swapped whole), retires replaced archives after a grace period,
// and reports what it found (Page, page.go). Static and Dynamic implement
// s3api.Catalog; Collector exports per-bucket gauges.
//
// Every open has a deadline (Config.OpenTimeout) and fails only its own
// bucket; a rescan never waits for an open it did not start. Discovered
// and aliased uploads share an index memory budget (Config.IndexMemory,
// budget.go) and a file cap (Config.MaxFilesPerUpload). A bucket whose
// archive failed to open answers an *OpenFailure, whose PublicMessage is
// all a client may be told (never the store's text).
//
// Published datasets (cargoship publish, datasets.go): an alias
// s3://BUCKET/DATASET@current follows the dataset's CURRENT pointer
// (package dataset parses it as hostile input) with a conditional GET at
// every scan, swapping to a new version once it has opened and keeping the
// last good version when the pointer or the version is bad; @<version_id>
// pins one version; Discover finds datasets by their CURRENT. Every
// version may name objects under DATASET/v/ (Options.AllowKeyPrefixes).
//
// A dataset bucket's S3 object versions are its published versions
// (history.go, historymgr.go; Manager.History answers s3api): walked from
// CURRENT's previous_version_id and one listing of DATASET/v/, at most
// Config.DatasetHistory versions, ending cleanly at a pruned version;
// built on the first versioned request, never by a plain GET or HEAD.
//
// Listing the store happens only here, never on the read path (a dataset
// history's one listing of DATASET/v/ is made on the first versioned
// request for the version served, once).
package catalog
