package manifest

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// ResolveObjectKey turns a manifest s3_key (chunk or standalone object) into
// the object key to read from bucket, following CargoShip's deep_verify
// ResolveObjectKey rules, because writers over time recorded the same key
// in several forms:
//
//   - leading "/" is trimmed ("/uploads/x/..." from an empty prefix);
//   - a URL "scheme://host/key" loses "scheme://host/"; for "s3://b/key" the
//     host is the bucket, so the key is what follows it;
//   - "/" is trimmed around prefix;
//   - a key equal to prefix or starting with prefix+"/" is kept
//     (prefix-included form);
//   - else a key starting with bucket+"/" loses that (bucket-qualified form);
//   - else prefix+"/" is prepended when prefix is non-empty (the
//     prefix-relative form the current writer records).
//
// bucket must be the bucket the manifest was read from, not manifest.bucket
// (cargoship#335).
func ResolveObjectKey(bucket, prefix, s3key string) string {
	key := strings.TrimLeft(s3key, "/")
	if rest, ok := stripURL(key); ok {
		key = strings.TrimLeft(rest, "/")
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" && (key == prefix || strings.HasPrefix(key, prefix+"/")) {
		return key
	}
	if bucket != "" && strings.HasPrefix(key, bucket+"/") {
		return strings.TrimLeft(key[len(bucket)+1:], "/")
	}
	if prefix != "" {
		return prefix + "/" + key
	}
	return key
}

// CheckObjectKey refuses a resolved object key that must never be sent to
// a store: empty, or with a ".." segment (a file store would leave its
// root; an S3 store would be asked for a key no CargoShip writer makes).
// Errors wrap ErrUnsafePath.
func CheckObjectKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty object key", ErrUnsafePath)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == ".." {
			return fmt.Errorf("%w: object key %q has a \"..\" segment", ErrUnsafePath, clip(key))
		}
	}
	return nil
}

// CheckUploadID refuses an upload id (previous_manifest_id) that is not
// one safe key segment: empty, ".", "..", or containing a slash or backslash.
// Errors wrap ErrUnsafePath.
func CheckUploadID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\\") {
		return fmt.Errorf("%w: upload id %q is not one key segment", ErrUnsafePath, clip(id))
	}
	return nil
}

// stripURL removes "scheme://host/" from a URL-form key. The scheme must be
// a real one (RFC 3986: a letter, then letters, digits, "+", "-", "."), so a
// key that merely contains "://" later on is left alone.
func stripURL(key string) (string, bool) {
	i := strings.Index(key, "://")
	if i <= 0 {
		return key, false
	}
	for j := 0; j < i; j++ {
		c := key[j]
		isAlpha := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !isAlpha && (j == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return key, false
		}
	}
	rest := key[i+3:]
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		return rest[j+1:], true
	}
	return "", true // "s3://bucket" alone: no key
}

// ErrUnsafePath is wrapped by RelativeKey errors: the path cannot become a
// safe S3 key (parent segment, control character, invalid UTF-8, empty).
var ErrUnsafePath = errors.New("unsafe path")

// RelativeKey derives a file's virtual key from the manifest's source_path
// and the file's path, as CargoShip's RelativeToSource does, then sanitizes.
//
// Backslashes become "/" (Windows uploads, cargoship#563). The source is
// matched on a segment boundary with its trailing "/" ignored: p equal to
// the source (a single-file upload) yields its base name; p under the
// source yields the remainder; p not under the source is kept as is. The
// result then loses a leading volume name ("C:"), leading "/", and "." and
// empty segments.
//
// It is an error (wrapping ErrUnsafePath) when a ".." segment remains (a key
// never escapes the bucket), when the path holds NUL or any other control
// character (C0 or DEL), when it is not valid UTF-8 (it could not be served
// reliably as an S3 key), or when nothing is left. The result never starts
// with "/", never contains "//", "\\", or a "." or ".." segment.
func RelativeKey(sourcePath, p string) (string, error) {
	key, err := AppendRelativeKey(nil, sourcePath, p)
	if err != nil {
		return "", err
	}
	return string(key), nil
}

// AppendRelativeKey appends RelativeKey(sourcePath, p) to dst and returns
// the extended slice; on error dst is returned unchanged (as to its
// length). It allocates nothing when dst has room and p holds no
// backslash, so that a streaming reader can derive millions of keys
// straight into one arena.
func AppendRelativeKey(dst []byte, sourcePath, p string) ([]byte, error) {
	src := strings.TrimRight(strings.ReplaceAll(sourcePath, `\`, "/"), "/")
	q := p
	if strings.IndexByte(q, '\\') >= 0 {
		q = strings.ReplaceAll(q, `\`, "/")
	}
	switch {
	case src != "" && q == src:
		q = path.Base(q)
	case src != "" && len(q) > len(src) && q[len(src)] == '/' && q[:len(src)] == src:
		q = q[len(src)+1:]
	}
	out, err := appendSanitizedKey(dst, q)
	if err != nil {
		return dst, fmt.Errorf("path %q: %w", clip(p), err)
	}
	return out, nil
}

// appendSanitizedKey appends RelativeKey's cleaning of the "/"-separated
// path q to dst.
func appendSanitizedKey(dst []byte, q string) ([]byte, error) {
	if !utf8.ValidString(q) {
		return dst, fmt.Errorf("%w: invalid UTF-8", ErrUnsafePath)
	}
	for i := 0; i < len(q); i++ {
		if c := q[i]; c < 0x20 || c == 0x7f {
			return dst, fmt.Errorf("%w: control character 0x%02x at byte %d", ErrUnsafePath, c, i)
		}
	}
	// U+FFFE and U+FFFF are the two code points of valid UTF-8 beyond the
	// control characters that XML 1.0 cannot carry: a listing without
	// encoding-type=url would show such a key as U+FFFD, a key that does
	// not exist.
	if i := strings.IndexFunc(q, func(r rune) bool { return r == 0xFFFE || r == 0xFFFF }); i >= 0 {
		return dst, fmt.Errorf("%w: noncharacter U+%04X at byte %d (no XML listing can name it)", ErrUnsafePath, []rune(q[i:])[0], i)
	}
	start := len(dst)
	first := true
	for rest := q; ; {
		seg := rest
		j := strings.IndexByte(rest, '/')
		if j >= 0 {
			seg, rest = rest[:j], rest[j+1:]
		}
		switch {
		case seg == "" || seg == ".":
		case seg == "..":
			return dst[:start], fmt.Errorf("%w: \"..\" segment", ErrUnsafePath)
		case first && isVolume(seg):
		default:
			if !first {
				dst = append(dst, '/')
			}
			dst = append(dst, seg...)
			first = false
		}
		if j < 0 {
			break
		}
	}
	if len(dst) == start {
		return dst, fmt.Errorf("%w: empty key", ErrUnsafePath)
	}
	return dst, nil
}

// isVolume reports a Windows drive name such as "C:".
func isVolume(seg string) bool {
	return len(seg) == 2 && seg[1] == ':' && (seg[0] >= 'a' && seg[0] <= 'z' || seg[0] >= 'A' && seg[0] <= 'Z')
}

// Manifest object names inside an upload folder, in the order a reader
// tries them.
const (
	ManifestNameGzip           = "manifest.json.gz"
	ManifestNamePlain          = "manifest.json"
	ManifestNameEncryptedGzip  = "manifest.encrypted.json.gz"
	ManifestNameEncryptedPlain = "manifest.encrypted.json"
)

// ManifestKeyCandidates lists, in order, the keys where upload uploadID's
// manifest may live under prefix (the same prefix as a descendant's, for
// previous_manifest_id): "{prefix}/uploads/{id}/manifest.json.gz", then
// "manifest.json", with "/" trimmed around prefix and no leading "/" for an
// empty prefix. When CargoShip's own fmt.Sprintf("%s/uploads/%s/...") form
// differs (empty prefix gives "/uploads/...", a trailing-slash prefix gives
// "prefix//uploads/..."), those literal keys follow. Last come the
// manifest.encrypted.json[.gz] names, so a reader finding only an encrypted
// manifest reports ErrEncrypted (Load detects the name) instead of "missing".
func ManifestKeyCandidates(prefix, uploadID string) []string {
	names := []string{ManifestNameGzip, ManifestNamePlain}
	p := strings.Trim(prefix, "/")
	base := "uploads/" + uploadID + "/"
	if p != "" {
		base = p + "/" + base
	}
	literal := prefix + "/uploads/" + uploadID + "/"
	var out []string
	for _, n := range names {
		out = append(out, base+n)
	}
	if literal != base {
		for _, n := range names {
			out = append(out, literal+n)
		}
	}
	out = append(out, base+ManifestNameEncryptedGzip, base+ManifestNameEncryptedPlain)
	return out
}

// UploadDir splits a manifest key "{dir}/uploads/{id}/manifest.json[.gz]"
// into dir and the upload id, so that ManifestKeyCandidates(dir, id)
// contains manifestKey itself and a sibling upload's keys are
// ManifestKeyCandidates(dir, otherID). dir is the key's literal text before
// "/uploads/" ("" when the key starts with "uploads/" or "/uploads/").
// ok is false when the key does not have that shape (including
// manifest.partial.json.gz and encrypted names).
func UploadDir(manifestKey string) (dir, uploadID string, ok bool) {
	var rest string
	switch {
	case strings.HasSuffix(manifestKey, "/"+ManifestNameGzip):
		rest = strings.TrimSuffix(manifestKey, "/"+ManifestNameGzip)
	case strings.HasSuffix(manifestKey, "/"+ManifestNamePlain):
		rest = strings.TrimSuffix(manifestKey, "/"+ManifestNamePlain)
	default:
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", "", false
	}
	uploadID, rest = rest[i+1:], rest[:i]
	if uploadID == "" {
		return "", "", false
	}
	switch {
	case rest == "uploads":
		return "", uploadID, true
	case strings.HasSuffix(rest, "/uploads"):
		return strings.TrimSuffix(rest, "/uploads"), uploadID, true
	}
	return "", "", false
}

// KeyRoot is the prefix an archive's object keys must lie under: the part
// of the manifest key before "/uploads/" (UploadDir) with "/" trimmed
// around it, "uploads" for an upload at the top of its bucket
// (uploads/<id>/manifest.json.gz or /uploads/<id>/manifest.json.gz: its
// keys lie under uploads/, never anywhere in the bucket), else the
// manifest's directory. "" (a manifest file at the top of its bucket)
// confines nothing.
func KeyRoot(manifestKey string) string {
	if dir, _, ok := UploadDir(manifestKey); ok {
		// "/" trimmed as ResolveObjectKey trims it from the keys it
		// confines: CargoShip's "/uploads/<id>/..." (empty prefix) is
		// confined to uploads/ as "uploads/<id>/..." is, "p//uploads/..."
		// (a prefix with a trailing slash) and "/p/uploads/..." to p/.
		if dir = strings.Trim(dir, "/"); dir == "" {
			return "uploads"
		}
		return dir
	}
	if i := strings.LastIndexByte(manifestKey, '/'); i >= 0 {
		return manifestKey[:i]
	}
	return ""
}

// Confined is the one confinement rule of an archive's object keys (chunk
// and direct-upload keys), applied alike to a manifest's keys and to a
// loaded index's: key lies under root + "/" (root from KeyRoot; "" allows
// every key) or starts with one of the non-empty allow prefixes.
func Confined(root string, allow []string, key string) bool {
	if root == "" || strings.HasPrefix(key, root+"/") {
		return true
	}
	for _, p := range allow {
		if p != "" && strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// CheckVirtualKey refuses a virtual key that RelativeKey cannot produce:
// it must come out of RelativeKey unchanged (no "..", "." or empty
// segment, no leading "/", no backslash, volume name, control character or
// invalid UTF-8). A loaded index applies it to every file and tombstone
// key, so that it describes only keys a manifest could. Errors wrap
// ErrUnsafePath.
func CheckVirtualKey(key string) error {
	k, err := RelativeKey("", key)
	if err != nil {
		return fmt.Errorf("key %q: %w", clip(key), err)
	}
	if k != key {
		return fmt.Errorf("%w: key %q is not what a manifest path gives (%q)", ErrUnsafePath, clip(key), clip(k))
	}
	return nil
}
