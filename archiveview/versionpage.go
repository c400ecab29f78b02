package archiveview

import (
	"fmt"
	"strings"
)

// VersionTable is what PageVersions pages: keys in byte order, each with
// its versions newest first. Versions (an upload chain) and a published
// dataset's history (package catalog) are both one, so that the one
// ListObjectVersions paging rule (markers, delimiter, truncation) lives
// here.
type VersionTable interface {
	// Len is the number of keys.
	Len() int
	// Key is key i (valid for the call; KeepPrefix keeps a part of it).
	Key(i int) string
	// Search is the first i whose key is >= s (Len() if none).
	Search(s string) int
	// SkipPrefix is the first j >= i whose key does not start with p.
	SkipPrefix(i int, p string) int
	// Count is the number of versions of key i.
	Count(i int) int
	// Find is the position of versionID among key i's versions, or -1.
	Find(i int, versionID string) int
	// Version is version j (0 = newest) of key i.
	Version(i, j int) (Version, error)
	// KeepPrefix returns a common prefix cut from a Key that may be kept
	// after the call (a copy where keys live in a mapped file).
	KeepPrefix(cp string) string
}

// PageVersions returns one page of t's versions as ListObjectVersions
// pages them: keys starting with p.Prefix, after p.KeyMarker (all its
// versions) or after version p.VersionIDMarker of p.KeyMarker; keys with
// p.Delimiter after the prefix rolled into one common prefix each; at most
// p.MaxKeys entries, with the markers to continue from when truncated. A
// VersionIDMarker that is not a version of KeyMarker is
// ErrUnknownVersion; what names the table in errors.
func PageVersions(t VersionTable, p VersionListParams, what string) (VersionListResult, error) {
	var res VersionListResult
	if p.MaxKeys <= 0 {
		return res, nil
	}
	n := t.Len()
	i := t.Search(p.Prefix)
	startVer := 0
	if p.KeyMarker != "" && p.KeyMarker >= p.Prefix {
		k := t.Search(p.KeyMarker)
		at := k < n && t.Key(k) == p.KeyMarker
		switch {
		case p.VersionIDMarker != "":
			j := -1
			if at {
				j = t.Find(k, p.VersionIDMarker)
			}
			if j < 0 {
				return res, fmt.Errorf("%s: version %q of key %q: %w", what, p.VersionIDMarker, p.KeyMarker, ErrUnknownVersion)
			}
			i, startVer = k, j+1
		case at:
			i = k + 1
		default:
			i = k
		}
	}
	names := 0 // bytes of the keys and prefixes in res.Entries
	full := func() bool {
		if len(res.Entries) < p.MaxKeys && (p.MaxNameBytes <= 0 || names < p.MaxNameBytes) {
			return false
		}
		res.Truncated = true
		last := res.Entries[len(res.Entries)-1]
		if last.Prefix != "" {
			res.NextKeyMarker = last.Prefix
		} else {
			res.NextKeyMarker, res.NextVersionIDMarker = last.Version.Key, last.Version.VersionID
		}
		return true
	}
	for ; i < n; i, startVer = i+1, 0 {
		k := t.Key(i)
		if !strings.HasPrefix(k, p.Prefix) {
			break
		}
		if p.Delimiter != "" {
			if d := strings.Index(k[len(p.Prefix):], p.Delimiter); d >= 0 {
				cp := k[:len(p.Prefix)+d+len(p.Delimiter)]
				next := t.SkipPrefix(i, cp)
				if cp > p.KeyMarker {
					if full() {
						return res, nil
					}
					res.Entries = append(res.Entries, VersionEntry{Prefix: t.KeepPrefix(cp)})
					names += len(cp)
				}
				i = next - 1
				continue
			}
		}
		for j, c := startVer, t.Count(i); j < c; j++ {
			v, err := t.Version(i, j)
			if err != nil {
				return res, fmt.Errorf("%s: key %q: %w", what, k, err)
			}
			if full() {
				return res, nil
			}
			res.Entries = append(res.Entries, VersionEntry{Version: v})
			names += len(v.Key)
		}
	}
	return res, nil
}
