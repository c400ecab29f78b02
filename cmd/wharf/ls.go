package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog"
)

const lsUsage = `usage: wharf ls [--store URL] [--s3-endpoint URL --s3-region R --s3-path-style --s3-access-key AK --s3-secret-key SK]
                [--recursive] [--versions [--dataset-history N]] [--json] [--human-readable] [--summarize] MANIFEST_URL [PREFIX]

Lists the archive's effective tree (what wharf serve shows) like "aws s3 ls",
reading only the manifests. MANIFEST_URL may name a published dataset:
s3://BUCKET/DATASET@current (the version CURRENT names) or
s3://BUCKET/DATASET@<version_id> (that version). For s3://B/D@current
--versions lists the dataset's published versions as wharf serve's
ListObjectVersions does (version ids are published version_ids; at most
--dataset-history versions, each older one opened once); for a pinned
version, every key has that one version; for a manifest URL, the
versions of its upload chain.

  - without --recursive, PREFIX is a key prefix and "/" the delimiter:
    directories print as "                           PRE name/" and files as
    "DATE TIME SIZE name", names relative to PREFIX's last "/";
  - with --recursive, every file under PREFIX, with its full key;
  - --versions prints every version of a chain's keys, newest first:
    "DATE TIME SIZE VERSION_ID L key", where L is "*" for the latest
    version and SIZE is "DELETED" for a delete marker;
  - times are the files' mtimes in the local time zone, as aws s3 ls does;
  - a name holding a rune that is not printable (a C1 control such as
    U+009B, a bidi override such as U+202E) prints Go-quoted
    ("evil\u202etxt.exe"), so a terminal never acts on it;
  - --json prints one JSON object per line (JSON Lines) instead, with the
    stable fields: key, size, last_modified (RFC 3339, UTC), etag,
    version_id, sha256 and content_type (omitted when unknown); with
    --versions also is_latest and delete_marker; a directory is
    {"prefix": "dir/"}; a rune that is not printable is written as a
    JSON escape ("evil\u202etxt.exe"), the same string to a decoder.

Like aws s3 ls, the exit status is 1 when nothing matched.`

// lsEntry is one --json line. Field names are part of the CLI contract
// (README, lsUsage): add fields, never rename them.
type lsEntry struct {
	Prefix       string `json:"prefix,omitempty"`
	Key          string `json:"key,omitempty"`
	Size         *int64 `json:"size,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	ETag         string `json:"etag,omitempty"`
	VersionID    string `json:"version_id,omitempty"`
	SHA256       string `json:"sha256,omitempty"`
	ContentType  string `json:"content_type,omitempty"`
	IsLatest     *bool  `json:"is_latest,omitempty"`
	DeleteMarker *bool  `json:"delete_marker,omitempty"`
}

func fileEntry(f archiveview.File) lsEntry {
	size := f.Size
	return lsEntry{
		Key: f.Key, Size: &size, LastModified: f.ModTime.UTC().Format(time.RFC3339Nano),
		ETag: f.ETag, VersionID: f.VersionID, SHA256: f.SHA256, ContentType: f.ContentType,
	}
}

// runLs lists an archive's tree.
func runLs(ctx context.Context, args []string) error {
	return lsCmd(ctx, args, os.Stdout)
}

func lsCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("ls", flag.ContinueOnError)
	sf := addStoreFlags(fs)
	recursive := fs.Bool("recursive", false, "list every file under PREFIX (no directories)")
	fs.BoolVar(recursive, "r", false, "same as --recursive")
	versions := fs.Bool("versions", false, "list every version of each key (an incremental chain's uploads; a dataset's published versions)")
	histLimit := fs.Int("dataset-history", catalog.DefaultDatasetHistory, "with --versions on a dataset name: the published versions listed at most")
	asJSON := fs.Bool("json", false, "one JSON object per line")
	human := fs.Bool("human-readable", false, "sizes in KiB, MiB, GiB")
	summarize := fs.Bool("summarize", false, "end with the number of files and their total size")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), lsUsage)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usageErr(err)
	}
	if len(pos) < 1 || len(pos) > 2 {
		fs.Usage()
		return usageErr(fmt.Errorf("want MANIFEST_URL [PREFIX], got %d arguments", len(pos)))
	}
	prefix := ""
	if len(pos) == 2 {
		prefix = pos[1]
	}
	if *histLimit < 1 || *histLimit > catalog.MaxDatasetHistory {
		return usageErr(fmt.Errorf("--dataset-history %d: want 1 to %d", *histLimit, catalog.MaxDatasetHistory))
	}
	t, err := sf.openTarget(ctx, pos[0])
	if err != nil {
		return err
	}
	a, err := t.open(ctx, archiveview.Options{})
	if err != nil {
		return err
	}
	defer a.Close()

	if !*asJSON {
		out = printableWriter{out} // version ids are upload ids, from the manifests
	}
	l := &lister{out: out, json: *asJSON, human: *human, recursive: *recursive, prefix: prefix}
	if i := strings.LastIndex(prefix, "/"); i >= 0 && !*recursive {
		l.strip = i + 1
	}
	delim := "/"
	if *recursive {
		delim = ""
	}
	if *versions {
		var (
			h   archiveview.History
			ids = a.Info().Chain
		)
		if t.dataset != nil {
			dh, herr := t.history(ctx, a, *histLimit)
			if herr != nil {
				return herr
			}
			defer dh.Close()
			h, ids = dh, nil
			for _, v := range dh.Versions() {
				ids = append(ids, v.ID)
			}
		} else if vs, verr := a.Versions(ctx); verr != nil {
			return verr
		} else {
			h = vs
		}
		err = l.versions(h, ids, delim)
	} else {
		err = l.files(a, delim)
	}
	if err != nil {
		return err
	}
	if *summarize && !*asJSON {
		fmt.Fprintf(out, "\nTotal Objects: %d\n   Total Size: %s\n", l.count, l.size(l.bytes))
	}
	if l.entries == 0 {
		hint := ""
		if strings.HasPrefix(prefix, "/") && strings.Trim(prefix, "/") != "" {
			hint = fmt.Sprintf(` (keys never begin with "/": %q?)`, strings.TrimLeft(prefix, "/"))
		}
		return fmt.Errorf("nothing matches prefix %q%s", prefix, hint)
	}
	return nil
}

type lister struct {
	out                    io.Writer
	json, human, recursive bool
	prefix                 string
	strip                  int   // bytes of each name not shown (non-recursive: up to PREFIX's last "/")
	entries, count, bytes  int64 // lines, files (or versions), their bytes
	idWidth                int
	enc                    *json.Encoder
}

func (l *lister) size(n int64) string {
	if l.human {
		return formatBytes(n)
	}
	return strconv.FormatInt(n, 10)
}

func (l *lister) emit(e lsEntry) error {
	if l.enc == nil {
		l.enc = json.NewEncoder(jsonSafeWriter{l.out})
		l.enc.SetEscapeHTML(false)
	}
	return l.enc.Encode(e)
}

func (l *lister) prefixLine(p string) error {
	l.entries++
	if l.json {
		return l.emit(lsEntry{Prefix: p})
	}
	_, err := fmt.Fprintf(l.out, "%30s %s\n", "PRE", shownName(p[l.strip:]))
	return err
}

func (l *lister) fileLine(f archiveview.File) error {
	l.entries++
	l.count++
	l.bytes += f.Size
	if l.json {
		return l.emit(fileEntry(f))
	}
	_, err := fmt.Fprintf(l.out, "%s %10s %s\n", f.ModTime.Local().Format("2006-01-02 15:04:05"), l.size(f.Size), shownName(f.Key[l.strip:]))
	return err
}

// eachEntry calls fn for every entry of the listing p (p.After and
// p.MaxKeys are eachEntry's), page by page, stopping at fn's first error.
func eachEntry(a *archiveview.Archive, p archiveview.ListParams, fn func(archiveview.ListEntry) error) error {
	p.After, p.MaxKeys = "", 1000
	for {
		page := a.List(p)
		for _, e := range page.Entries {
			if err := fn(e); err != nil {
				return err
			}
		}
		if !page.Truncated {
			return nil
		}
		p.After = page.NextAfter
	}
}

// files lists the tree.
func (l *lister) files(a *archiveview.Archive, delim string) error {
	return eachEntry(a, archiveview.ListParams{Prefix: l.prefix, Delimiter: delim}, func(e archiveview.ListEntry) error {
		if e.Prefix != "" {
			return l.prefixLine(e.Prefix)
		}
		return l.fileLine(e.File)
	})
}

// versions lists every version of every key of v (a single upload has
// one); ids are its version ids (for the column width).
func (l *lister) versions(v archiveview.History, ids []string, delim string) error {
	for _, id := range ids {
		l.idWidth = max(l.idWidth, len(id))
	}
	p := archiveview.VersionListParams{Prefix: l.prefix, Delimiter: delim, MaxKeys: 1000}
	for {
		page, err := v.ListVersions(p)
		if err != nil {
			return err
		}
		for _, e := range page.Entries {
			if e.Prefix != "" {
				err = l.prefixLine(e.Prefix)
			} else {
				err = l.versionLine(e.Version)
			}
			if err != nil {
				return err
			}
		}
		if !page.Truncated {
			return nil
		}
		p.KeyMarker, p.VersionIDMarker = page.NextKeyMarker, page.NextVersionIDMarker
	}
}

func (l *lister) versionLine(v archiveview.Version) error {
	l.entries++
	if !v.DeleteMarker {
		l.count++
		l.bytes += v.Size
	}
	if l.json {
		e := lsEntry{Key: v.Key, LastModified: v.ModTime.UTC().Format(time.RFC3339Nano), VersionID: v.VersionID}
		if !v.DeleteMarker {
			e = fileEntry(v.File)
			e.VersionID = v.VersionID
		}
		latest, marker := v.IsLatest, v.DeleteMarker
		e.IsLatest, e.DeleteMarker = &latest, &marker
		return l.emit(e)
	}
	size, mark := "DELETED", " "
	if !v.DeleteMarker {
		size = l.size(v.Size)
	}
	if v.IsLatest {
		mark = "*"
	}
	_, err := fmt.Fprintf(l.out, "%s %10s %-*s %s %s\n", v.ModTime.Local().Format("2006-01-02 15:04:05"), size, l.idWidth, v.VersionID, mark, shownName(v.Key[l.strip:]))
	return err
}

// shownName is name as a text line shows it: itself, or Go-quoted when it
// holds a rune that is not printable (C1 controls such as U+009B, CSI, and
// U+0085, a line break; format characters such as the bidi override
// U+202E; spaces other than " "), which a terminal would act on or which
// would make the name look like another. The manifest's key rules refuse
// only C0 controls and DEL.
func shownName(name string) string {
	for _, r := range name {
		if r != ' ' && !unicode.IsPrint(r) {
			return strconv.Quote(name)
		}
	}
	return name
}

// unprintable reports whether r is escaped by printable and by
// jsonSafeWriter: a rune that is not printable, but for the newline, tab
// and space.
func unprintable(r rune) bool { return r != '\n' && r != '\t' && r != ' ' && !unicode.IsPrint(r) }

// printable returns s with each rune that is not printable written as a
// Go escape ("\u009b"); newlines, tabs and spaces stay. Every line that
// may name a hostile key (an error, a problem, a failed file) is printed
// through it, so a C1 control or bidi override in a key cannot act on the
// terminal, and the key is still named exactly.
func printable(s string) string {
	if strings.IndexFunc(s, unprintable) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unprintable(r) {
			q := strconv.QuoteRune(r) // '\u009b'
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// jsonSafeWriter passes encoded JSON through with every rune that is not
// printable (but for the newline, tab and space the encoder writes
// between values) written as a JSON \u escape: encoding/json escapes C0
// controls only, and writes C1 controls, bidi controls and other format
// characters raw, which a terminal showing the JSON acts on. Outside its
// strings JSON is ASCII, so every such rune is inside a string, where the
// escape means the same rune: the JSON decodes to the same values. Each
// write must be whole runes (json.Encoder writes whole values).
type jsonSafeWriter struct{ w io.Writer }

func (j jsonSafeWriter) Write(b []byte) (int, error) {
	if bytes.IndexFunc(b, unprintable) < 0 {
		return j.w.Write(b)
	}
	whole := len(b)
	out := make([]byte, 0, len(b)+32)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n == 1, !unprintable(r):
			out = append(out, b[:n]...)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		b = b[n:]
	}
	if _, err := j.w.Write(out); err != nil {
		return 0, err
	}
	return whole, nil
}

// printableWriter passes each write through printable: for text reports
// whose writes are whole lines (never JSON, whose own escapes differ).
type printableWriter struct{ w io.Writer }

func (p printableWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, printable(string(b))); err != nil {
		return 0, err
	}
	return len(b), nil
}

// usageError marks a command-line mistake: the command exits with status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usageErr wraps err as a usage error (flag.ErrHelp stays itself: -h is
// not a mistake).
func usageErr(err error) error {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err}
}
