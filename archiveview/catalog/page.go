package catalog

// The /-/archives document: every served bucket (its source, its state,
// its archive's figures, a dataset bucket's pointer and history) and what
// the last scan found.

import "time"

// maxSkippedPage bounds the skipped objects /-/archives lists (an
// uploader's choice: any number of manifest-named objects in the wrong
// place).
const maxSkippedPage = 1000

// Page is the /-/archives document. Skipped lists at most the first 1000
// objects the last scan skipped; SkippedTotal counts them all.
type Page struct {
	Buckets      []BucketEntry `json:"buckets"`
	ScannedAt    *time.Time    `json:"scanned_at,omitempty"`
	ScanError    string        `json:"scan_error,omitempty"`
	Skipped      []Skipped     `json:"skipped"`
	SkippedTotal int           `json:"skipped_total"`
	Collisions   []Collision   `json:"collisions"`
}

// BucketEntry is one served bucket on the /-/archives page. State is
// "open", "opening" (its figures are zero until it opens) or "failed"
// (Error says why; the bucket answers that error).
type BucketEntry struct {
	Bucket string `json:"bucket"`
	Kind   Kind   `json:"kind"`
	Source string `json:"source"`
	State  string `json:"state"`
	Error  string `json:"error,omitempty"`
	// Retry, for a failed bucket, says when its open is tried again: "at
	// the next rescan", or, for a manifest that failed to parse, "when
	// its manifest changes" (the failure is kept while the listing shows
	// the same key and ETag: it is not read again).
	Retry             string   `json:"retry,omitempty"`
	Archive           string   `json:"archive"`
	UploadID          string   `json:"upload_id"`
	Version           string   `json:"version"`
	ManifestKey       string   `json:"manifest_key"`
	Chain             []string `json:"chain"`
	Files             int      `json:"files"`
	Chunks            int      `json:"chunks"`
	Frames            int      `json:"frames"`
	CompressedBytes   int64    `json:"compressed_bytes"`
	UncompressedBytes int64    `json:"uncompressed_bytes"`
	Shapes            []string `json:"shapes"`
	Warnings          []string `json:"warnings"`
	// Unverifiable counts files no checksum covers (served as stored).
	Unverifiable       int      `json:"unverifiable_files"`
	UnverifiableSample []string `json:"unverifiable_sample,omitempty"`
	// Dataset is set for a published dataset's bucket (--alias
	// …@current / @<version_id>, or discovered).
	Dataset *DatasetEntry `json:"dataset,omitempty"`
}

// DatasetEntry is a dataset bucket's part of the /-/archives page.
// VersionID is the version served ("" while the first one opens);
// Opening the version being opened to replace it. PointerReadAt is the
// last read of CURRENT (conditional or not; nil for a pinned version,
// whose pointer is never read). PointerError is the last pointer error
// (a refused or failed read, or a pointed version that did not open) and
// PointerErrorAt when it happened: an error older than PointerReadAt was
// followed by good reads. PointerErrors counts them since start.
type DatasetEntry struct {
	Dataset        string     `json:"dataset"`
	Pointer        string     `json:"pointer"`
	Follows        bool       `json:"follows_current"`
	VersionID      string     `json:"version_id"`
	Manifest       string     `json:"manifest,omitempty"`
	Opening        string     `json:"opening_version_id,omitempty"`
	PointerReadAt  *time.Time `json:"pointer_read_at,omitempty"`
	PointerError   string     `json:"pointer_error,omitempty"`
	PointerErrorAt *time.Time `json:"pointer_error_at,omitempty"`
	PointerErrors  int        `json:"pointer_errors"`
	// History is the version history of the version served, once a
	// versioned request built it (historymgr.go).
	History *HistoryEntry `json:"history,omitempty"`
}

// Page builds the /-/archives document from the current catalog and the
// last scan.
func (cm *Manager) Page() Page {
	rep := cm.report.Load()
	p := Page{Skipped: rep.Skipped, SkippedTotal: len(rep.Skipped), Collisions: rep.Collisions, ScanError: rep.Error}
	if len(p.Skipped) > maxSkippedPage {
		p.Skipped = p.Skipped[:maxSkippedPage:maxSkippedPage]
	}
	if !rep.Time.IsZero() {
		t := rep.Time.UTC()
		p.ScannedAt = &t
	}
	if p.Skipped == nil {
		p.Skipped = []Skipped{}
	}
	if p.Collisions == nil {
		p.Collisions = []Collision{}
	}
	cur := cm.catalog.cur.Load() // one snapshot: names and entries agree
	for _, name := range cur.names {
		e := cur.byName[name]
		src := rep.Sources[name]
		if src == "" {
			src = cm.staticSources[name]
		}
		kind, _ := cm.Kind(name)
		be := BucketEntry{Bucket: name, Kind: kind, Source: src, Archive: e.Name, Chain: []string{}, Shapes: []string{}, Warnings: []string{}}
		a, err, done := e.State()
		switch {
		case !done:
			be.State = "opening"
		case err != nil:
			be.State, be.Error, be.Retry = "failed", err.Error(), retryText(err)
		default:
			info := a.Info()
			be.State = "open"
			be.Archive, be.UploadID, be.Version, be.ManifestKey = info.Name, info.UploadID, info.Version, info.ManifestKey
			be.Chain, be.Files, be.Chunks, be.Frames = info.Chain, info.Files, info.Chunks, info.Frames
			be.CompressedBytes, be.UncompressedBytes = info.CompressedBytes, info.UncompressedBytes
			be.Shapes, be.Warnings = info.Shapes, info.Warnings
			be.Unverifiable, be.UnverifiableSample = info.Unverifiable, info.UnverifiableSample
		}
		be.Dataset = cm.datasetEntry(name)
		p.Buckets = append(p.Buckets, be)
	}
	if p.Buckets == nil {
		p.Buckets = []BucketEntry{}
	}
	return p
}
