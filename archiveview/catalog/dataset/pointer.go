// Package dataset reads the CURRENT pointer of a CargoShip published
// dataset (`cargoship publish DIR s3://BUCKET/DATASET`): immutable versions
// under DATASET/v/<version_id>/, each an ordinary upload, and one small
// JSON object DATASET/CURRENT (schema "cargoship.current/1") naming the
// current version.
//
// The pointer is bytes from a bucket wharf does not own, so it is hostile
// input. The contract:
//
//   - Read transfers at most MaxPointerBytes (64 KiB) ever: one ranged GET
//     (bytes=0-65535) that is conditional on the ETag last read
//     (If-None-Match: an unchanged pointer costs one 304 and no body). An
//     object larger than MaxPointerBytes is refused by its size, never
//     downloaded (backend.ReadSmall).
//   - Parse accepts exactly one JSON object and nothing else: schema must
//     equal "cargoship.current/1"; unknown fields, duplicate fields,
//     trailing data after the object, an empty object, a field of the wrong
//     JSON type, a missing or empty version_id, manifest_key or index_key,
//     an index_sha256 that is not 64 hexadecimal characters, a negative
//     file_count or total_bytes, and a created that is not RFC 3339 are
//     refused.
//   - version_id (and previous_version_id when present) must be a single
//     path segment of at most MaxVersionIDBytes printable ASCII bytes
//     ("." and ".." refused): it is a folder name under DATASET/v/.
//   - manifest_key must lie under DATASET/v/<version_id>/ (the version the
//     pointer names), with no empty, "." or ".." segment, and name a
//     finished upload's manifest there:
//     DATASET/v/<version_id>/uploads/<upload>/manifest.json.gz or
//     manifest.json, the one form discovery, a pinned version and the
//     version history read (never a resume checkpoint
//     manifest.partial.json.gz, an encrypted manifest or the index);
//     anything else is refused. The index_key is required but not used
//     by wharf.
//   - Every error names the pointer's key (s3://BUCKET/DATASET/CURRENT)
//     and the reason, and wraps ErrBadPointer (or the store's error for a
//     read that failed).
//
// The package never lists the bucket: a missing or dangling pointer is an
// error, never a reason to guess. file_count and total_bytes are
// informative: the manifest decides (the caller may warn on a mismatch).
package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// Schema is the only pointer schema accepted.
const Schema = "cargoship.current/1"

// MaxPointerBytes is the most of a pointer object ever transferred; a
// larger object is refused.
const MaxPointerBytes = 64 << 10

// MaxVersionIDBytes caps a version id (a folder name).
const MaxVersionIDBytes = 255

// PointerName is the pointer object's name inside a dataset.
const PointerName = "CURRENT"

// ErrBadPointer is wrapped by every refusal of a pointer's content.
var ErrBadPointer = errors.New("bad dataset pointer")

// Pointer is a parsed, validated CURRENT.
type Pointer struct {
	Schema            string `json:"schema"`
	VersionID         string `json:"version_id"`
	ManifestKey       string `json:"manifest_key"`
	IndexKey          string `json:"index_key"`
	IndexSHA256       string `json:"index_sha256"`
	Created           string `json:"created,omitempty"`
	FileCount         int64  `json:"file_count"`
	TotalBytes        int64  `json:"total_bytes"`
	PreviousVersionID string `json:"previous_version_id,omitempty"`
}

// PointerKey returns the key of dataset's pointer (dataset without a
// trailing slash; "" for a dataset at the bucket root).
func PointerKey(dataset string) string {
	if dataset == "" {
		return PointerName
	}
	return dataset + "/" + PointerName
}

// VersionPrefix returns the folder of version id in dataset, with a
// trailing slash.
func VersionPrefix(dataset, id string) string {
	if dataset == "" {
		return "v/" + id + "/"
	}
	return dataset + "/v/" + id + "/"
}

// Root returns the key prefix every object of dataset lies under (with a
// trailing slash; "" for a dataset at the bucket root).
func Root(dataset string) string {
	if dataset == "" {
		return ""
	}
	return dataset + "/"
}

// Parse validates data as the pointer of dataset (the dataset's key
// prefix without a trailing slash) in bucket; errors name
// s3://bucket/<pointer key> and wrap ErrBadPointer.
func Parse(data []byte, bucket, dataset string) (Pointer, error) {
	p, err := parse(data, dataset)
	if err != nil {
		return Pointer{}, fmt.Errorf("dataset pointer s3://%s/%s: %w: %s", bucket, PointerKey(dataset), ErrBadPointer, err)
	}
	return p, nil
}

// field is one known pointer field: where its value goes.
type field struct {
	str *string
	num *int64
}

func parse(data []byte, dataset string) (Pointer, error) {
	if len(data) > MaxPointerBytes {
		return Pointer{}, fmt.Errorf("%d bytes, at most %d allowed", len(data), MaxPointerBytes)
	}
	var p Pointer
	fields := map[string]field{
		"schema": {str: &p.Schema}, "version_id": {str: &p.VersionID},
		"manifest_key": {str: &p.ManifestKey}, "index_key": {str: &p.IndexKey},
		"index_sha256": {str: &p.IndexSHA256}, "created": {str: &p.Created},
		"file_count": {num: &p.FileCount}, "total_bytes": {num: &p.TotalBytes},
		"previous_version_id": {str: &p.PreviousVersionID},
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return Pointer{}, errors.New("empty object (no JSON)")
		}
		return Pointer{}, fmt.Errorf("not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return Pointer{}, errors.New("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Pointer{}, fmt.Errorf("not JSON: %v", err)
		}
		name, _ := tok.(string) // a key is always a string inside an object
		f, known := fields[name]
		if !known {
			return Pointer{}, fmt.Errorf("unknown field %q", clip(name))
		}
		if seen[name] {
			return Pointer{}, fmt.Errorf("field %q given twice", name)
		}
		seen[name] = true
		tok, err = dec.Token()
		if err != nil {
			return Pointer{}, fmt.Errorf("not JSON: %v", err)
		}
		switch {
		case f.str != nil:
			s, ok := tok.(string)
			if !ok {
				return Pointer{}, fmt.Errorf("field %q: want a string", name)
			}
			*f.str = s
		default:
			n, ok := tok.(json.Number)
			if !ok {
				return Pointer{}, fmt.Errorf("field %q: want a number", name)
			}
			v, err := n.Int64()
			if err != nil {
				return Pointer{}, fmt.Errorf("field %q: want an integer, got %s", name, clip(n.String()))
			}
			*f.num = v
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return Pointer{}, fmt.Errorf("not JSON: %v", err)
	}
	if len(seen) == 0 {
		return Pointer{}, errors.New("empty object")
	}
	if rest := data[dec.InputOffset():]; len(bytes.TrimLeft(rest, " \t\r\n")) > 0 {
		return Pointer{}, errors.New("trailing data after the JSON object")
	}
	return p, p.validate(dataset)
}

// validate applies the field rules of the package doc.
func (p Pointer) validate(dataset string) error {
	if p.Schema != Schema {
		return fmt.Errorf("schema %q, want %q", clip(p.Schema), Schema)
	}
	for _, r := range []struct{ name, v string }{
		{"version_id", p.VersionID}, {"manifest_key", p.ManifestKey}, {"index_key", p.IndexKey}, {"index_sha256", p.IndexSHA256},
	} {
		if r.v == "" {
			return fmt.Errorf("missing %s", r.name)
		}
	}
	if err := ValidVersionID(p.VersionID); err != nil {
		return fmt.Errorf("version_id: %w", err)
	}
	if p.PreviousVersionID != "" {
		if err := ValidVersionID(p.PreviousVersionID); err != nil {
			return fmt.Errorf("previous_version_id: %w", err)
		}
	}
	if len(p.IndexSHA256) != 64 || strings.Trim(strings.ToLower(p.IndexSHA256), "0123456789abcdef") != "" {
		return fmt.Errorf("index_sha256 %q is not 64 hexadecimal characters", clip(p.IndexSHA256))
	}
	if p.FileCount < 0 {
		return fmt.Errorf("negative file_count %d", p.FileCount)
	}
	if p.TotalBytes < 0 {
		return fmt.Errorf("negative total_bytes %d", p.TotalBytes)
	}
	if p.Created != "" {
		if _, err := time.Parse(time.RFC3339, p.Created); err != nil {
			return fmt.Errorf("created %q is not an RFC 3339 time", clip(p.Created))
		}
	}
	want := VersionPrefix(dataset, p.VersionID)
	rest, ok := strings.CutPrefix(p.ManifestKey, want)
	if !ok || rest == "" {
		return fmt.Errorf("manifest_key %q does not lie under %s (the version the pointer names)", clip(p.ManifestKey), want)
	}
	for _, seg := range strings.Split(rest, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("manifest_key %q has an empty, \".\" or \"..\" segment", clip(p.ManifestKey))
		}
	}
	if dir, _, ok := manifest.UploadDir(rest); !ok || dir != "" {
		return fmt.Errorf("manifest_key %q is not a finished upload's manifest (%suploads/<upload>/%s or %s)",
			clip(p.ManifestKey), want, manifest.ManifestNameGzip, manifest.ManifestNamePlain)
	}
	return nil
}

// ValidVersionID checks a version id: one path segment of at most
// MaxVersionIDBytes printable ASCII bytes, not "." or "..".
func ValidVersionID(id string) error {
	switch {
	case id == "":
		return errors.New("empty")
	case len(id) > MaxVersionIDBytes:
		return fmt.Errorf("%d bytes, at most %d", len(id), MaxVersionIDBytes)
	case id == "." || id == "..":
		return fmt.Errorf("%q is not a folder name", id)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '/' || c == '\\' {
			return fmt.Errorf("%q: byte %#x not allowed", clip(id), c)
		}
	}
	return nil
}

// clip shortens hostile text quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
