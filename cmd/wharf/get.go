package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/cmd/wharf/internal/progress"
	"golang.org/x/text/unicode/norm"
)

const getUsage = `usage: wharf get [--store URL] [--s3-endpoint URL --s3-region R --s3-path-style --s3-access-key AK --s3-secret-key SK]
                 [--parallel 4] [--cache-bytes 128MiB] [--overwrite] [--quiet] [--progress-interval 5s]
                 MANIFEST_URL KEY|PREFIX/ ... -o DIR|-

Extracts files from an archive without a server, through the same read core
as wharf serve: every byte verified (frame, part and file sha256), parallel
range reads of only the frames that hold the files. MANIFEST_URL may name a
published dataset: s3://BUCKET/DATASET@current or @<version_id>.

  - KEY selects one file; PREFIX/ (ending in "/") every file under it; a KEY
    that is no file but a directory selects the files under KEY/; "/" alone
    selects the whole archive.
  - Each file is written to DIR/KEY (its full key, so selections never
    collide), with its mtime, atomically: a temporary file in the target
    directory (.wharf-get-*.tmp), fsync, rename.
  - Resume: a file already present with the right size is skipped when
    its sha256 matches the manifest's; a manifest without a sha256 for it
    can only be checked by size and mtime (whole seconds), which is then
    the test. Run the same command again after a failure or Ctrl-C. The
    temporary files an earlier get left in a directory it writes to
    (killed by SIGKILL, or a crash) are removed, each named, when no live
    get holds them; they are never taken for a file.
  - On Windows a key is refused when a segment of it is no name Windows
    keeps as it is ("a:b", "x.", "NUL", "con.txt", "a?b").
  - A file already there with other content (another size, sha256 or,
    without a sha256, mtime; or a symlink or another non-regular file in
    its place) is never replaced silently: it is refused, named, unless
    --overwrite is given, and then each replaced file is named on stderr
    and counted (a symlink is replaced itself, never written through). A
    file that appears while its key is written is not replaced either.
  - On a file system that ignores case (macOS, Windows, found by trying),
    keys that differ only in case ("a.txt", "A.txt") would be one file:
    every one of them is refused, naming the others, and none written.
  - A key that is also a directory of other selected keys ("a" and
    "a/b": S3 allows both, a file system does not) is refused, named, and
    the files under it are written.
  - Nothing is ever written outside DIR, whatever the keys say (the keys
    are checked and every write goes through an os.Root of DIR, which also
    refuses symlinks leading out).
  - -o - streams exactly one file to stdout.

Progress goes to stderr. Exit status: 0 all done, 1 some files failed (each
named on stderr) or interrupted, 2 bad usage.`

// runGet extracts files from an archive.
func runGet(ctx context.Context, args []string) error {
	return getCmd(ctx, args, os.Stdout, os.Stderr)
}

func getCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sf := addStoreFlags(fs)
	pf := addProgressFlags(fs)
	pf.stderr = stderr
	out := fs.String("o", "", "target directory, or - for stdout (required)")
	parallel := fs.Int("parallel", 4, "files extracted at once (1-64)")
	cacheSize := fs.String("cache-bytes", "128MiB", "decoded frame cache budget")
	overwrite := fs.Bool("overwrite", false, "replace files already in DIR whose content differs from the archive's (default: refuse them)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), getUsage)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usageErr(err)
	}
	switch {
	case len(pos) < 2:
		fs.Usage()
		return usageErr(fmt.Errorf("want MANIFEST_URL and at least one KEY or PREFIX/, got %d arguments", len(pos)))
	case *out == "":
		fs.Usage()
		return usageErr(errors.New("-o DIR (or -o - for stdout) is required"))
	case *parallel < 1 || *parallel > 64:
		return usageErr(fmt.Errorf("--parallel %d: want 1 to 64", *parallel))
	}
	if err := pf.check(); err != nil {
		return usageErr(err)
	}
	cacheBytes, err := parseSize(*cacheSize)
	if err != nil || cacheBytes <= 0 {
		return usageErr(fmt.Errorf("--cache-bytes %q: want a size > 0", *cacheSize))
	}
	if *out != "-" {
		if strings.Contains(*out, "://") || looksLikeURL(*out) {
			return usageErr(fmt.Errorf("-o %q: a URL; want a local target directory (or - for stdout)", *out))
		}
		if fi, err := os.Stat(*out); err == nil && !fi.IsDir() {
			return usageErr(fmt.Errorf("-o %s: not a directory", *out))
		}
	}

	a, err := sf.openArchive(ctx, pos[0], archiveview.Options{Cache: chunkio.NewFrameCache(cacheBytes)})
	if err != nil {
		return err
	}
	defer a.Close()
	sel, missing, err := selectFiles(ctx, a, pos[1:])
	if err != nil {
		return err
	}
	if *out == "-" {
		if sel.files != 1 || len(missing) != 0 {
			for _, m := range missing {
				fmt.Fprintf(stderr, "wharf get: %s\n", printable(m))
			}
			return usageErr(fmt.Errorf("-o - streams exactly one file; the arguments select %d", sel.files))
		}
		var one archiveview.File
		_ = sel.each(ctx, func(f archiveview.File) error { one = f; return nil })
		return getToStdout(ctx, a, one, stdout, pf)
	}
	g := &getter{a: a, sel: sel, dir: *out, stderr: stderr, pf: pf, overwrite: *overwrite}
	return g.run(ctx, sel, missing, *parallel)
}

// slashHint is what a KEY or PREFIX/ argument that matched nothing adds
// when it begins with "/" (a path typed as on a disk): keys never do.
func slashHint(arg string) string {
	if !strings.HasPrefix(arg, "/") || strings.Trim(arg, "/") == "" {
		return ""
	}
	return fmt.Sprintf(` (keys never begin with "/": %s?)`, strings.TrimLeft(arg, "/"))
}

// looksLikeURL reports a name that begins "scheme:/" (s3:/bkt/x, a URL
// with a slash missing): as a path it would make a directory "s3:". A
// one-letter scheme is a Windows drive (C:/out), not a URL.
func looksLikeURL(name string) bool {
	i := strings.Index(name, ":/")
	if i < 2 {
		return false
	}
	for j, c := range name[:i] {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (j == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

// selection is what get's KEY and PREFIX/ arguments select: files and
// key prefixes, sorted, none inside another's prefix, so walking them in
// order gives every selected file once, in key order. It holds the
// arguments' resolution, never the files: each walks the archive's
// listing a page at a time, so the selection of a 5M-file archive costs
// one page of entries, not an entry per file.
type selection struct {
	a            *archiveview.Archive
	items        []selected
	files, bytes int64 // what each gives
}

// selected is one file (file true) or every file under prefix.
type selected struct {
	at   string // the file's key or the prefix
	file bool
	f    archiveview.File
}

// selectFiles resolves KEY and PREFIX/ arguments; missing says which
// arguments matched nothing, and why. It fails only when ctx ends while it
// counts the selected files.
func selectFiles(ctx context.Context, a *archiveview.Archive, args []string) (sel *selection, missing []string, err error) {
	sel = &selection{a: a}
	has := func(prefix string) bool {
		return len(a.List(archiveview.ListParams{Prefix: prefix, MaxKeys: 1}).Entries) > 0
	}
	under := func(prefix string) bool {
		if !has(prefix) {
			return false
		}
		sel.items = append(sel.items, selected{at: prefix})
		return true
	}
	for _, arg := range args {
		switch {
		case arg == "/":
			if !under("") {
				missing = append(missing, "the archive has no files")
			}
		case strings.HasSuffix(arg, "/"):
			if !under(arg) {
				missing = append(missing, fmt.Sprintf("%s: no files under this prefix%s", arg, slashHint(arg)))
			}
		default:
			if f, ok := a.Stat(arg); ok {
				sel.items = append(sel.items, selected{at: arg, file: true, f: f})
				continue
			}
			if under(arg + "/") {
				continue
			}
			if id, ok := a.DeleteMarker(arg); ok {
				missing = append(missing, fmt.Sprintf("%s: no such file (deleted by upload %s)", arg, id))
			} else {
				missing = append(missing, fmt.Sprintf("%s: no such file or directory in the archive%s", arg, slashHint(arg)))
			}
		}
	}
	// A prefix sorts before the keys under it, and the keys under it are
	// contiguous: one pass drops what a kept prefix covers, and repeats.
	sort.Slice(sel.items, func(i, j int) bool {
		x, y := sel.items[i], sel.items[j]
		return x.at < y.at || x.at == y.at && !x.file && y.file
	})
	kept := sel.items[:0]
	for _, it := range sel.items {
		if n := len(kept); n > 0 {
			last := kept[n-1]
			if !last.file && strings.HasPrefix(it.at, last.at) || last.file && it.file && it.at == last.at {
				continue
			}
		}
		kept = append(kept, it)
	}
	sel.items = kept
	err = sel.each(ctx, func(f archiveview.File) error {
		sel.files++
		sel.bytes += f.Size
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("interrupted while counting the selected files: %w", err)
	}
	return sel, missing, nil
}

// selectsUnder reports whether the selection holds a file under dir (a
// key prefix ending in "/").
func (s *selection) selectsUnder(dir string) bool {
	for _, it := range s.items {
		switch {
		case strings.HasPrefix(it.at, dir): // a file or a prefix under dir (a prefix is kept only with files)
			return true
		case !it.file && strings.HasPrefix(dir, it.at): // a prefix above dir
			return len(s.a.List(archiveview.ListParams{Prefix: dir, MaxKeys: 1}).Entries) > 0
		}
	}
	return false
}

// each calls fn for every selected file, in key order, stopping at fn's
// first error or when ctx ends.
func (s *selection) each(ctx context.Context, fn func(archiveview.File) error) error {
	for _, it := range s.items {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		if it.file {
			err = fn(it.f)
		} else {
			err = eachEntry(s.a, archiveview.ListParams{Prefix: it.at}, func(e archiveview.ListEntry) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				return fn(e.File)
			})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// getToStdout streams one verified file to w.
func getToStdout(ctx context.Context, a *archiveview.Archive, f archiveview.File, w io.Writer, pf *progressFlags) error {
	rep := pf.start("get", "files")
	rep.SetTotal(f.Size, 1)
	r, err := a.Open(ctx, f, 0, f.Size)
	if err == nil {
		var n int64
		n, err = io.Copy(progressWriter{w: w, add: rep.Add}, r)
		r.Close()
		if err == nil && n != f.Size {
			err = fmt.Errorf("key %s: wrote %d of %d bytes", f.Key, n, f.Size)
		}
	}
	if err == nil {
		rep.ItemDone()
	}
	snap := rep.Done(err)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("interrupted after %s of %s of %s", formatBytes(snap.Bytes), formatBytes(f.Size), f.Key)
	}
	return err
}

// progressWriter passes writes through to w, counting them.
type progressWriter struct {
	w   io.Writer
	add func(int64)
}

func (p progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.add(int64(n))
	return n, err
}

// writeTagged marks w's errors as writeErrors, telling them from the read
// path's when io.Copy returns one.
type writeTagged struct{ w io.Writer }

func (t writeTagged) Write(b []byte) (int, error) {
	n, err := t.w.Write(b)
	if err != nil {
		err = writeError{err}
	}
	return n, err
}

// writeError is an error of a write to the target directory.
type writeError struct{ err error }

func (e writeError) Error() string { return e.err.Error() }
func (e writeError) Unwrap() error { return e.err }

// getter extracts files into a directory.
type getter struct {
	a      *archiveview.Archive
	sel    *selection
	dir    string
	root   *os.Root
	stderr io.Writer
	pf     *progressFlags
	rep    *progress.Reporter
	// overwrite: replace a file already there whose content differs
	// (--overwrite); without it such a file is refused.
	overwrite bool
	// foldsCase: DIR's file system takes names differing only in case
	// for one (found by probeCaseFold, or set by a test); foldsNorm: it
	// takes names differing only in their Unicode normalisation for one
	// ("é" as U+00E9 and as "e" + U+0301: APFS, HFS+; probeNormFold).
	// collide then has each selected key that shares its folded name
	// with another, and what it says about them.
	foldsCase, foldsNorm bool
	collide              map[string]string

	mu                               sync.Mutex
	written, skipped, fail, replaced int
	writtenBytes                     int64
}

// filesFailed is get's error when some files failed: each was named on
// stderr already.
type filesFailed struct{ failed, of int }

func (e filesFailed) Error() string {
	return fmt.Sprintf("%d of %d files failed (named above); run the same command again to retry them", e.failed, e.of)
}

func (g *getter) run(ctx context.Context, sel *selection, missing []string, parallel int) error {
	start := time.Now()
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		return fmt.Errorf("target directory: %w", err)
	}
	root, err := os.OpenRoot(g.dir)
	if err != nil {
		return fmt.Errorf("target directory: %w", err)
	}
	defer root.Close()
	g.root = root
	if !g.foldsCase {
		g.foldsCase = g.probeCaseFold()
	}
	if !g.foldsNorm {
		g.foldsNorm = g.probeNormFold()
	}
	if fr := (foldRule{caseFold: g.foldsCase, normFold: g.foldsNorm}); fr.any() {
		if g.collide, err = collisions(ctx, sel, fr); err != nil {
			return fmt.Errorf("interrupted while checking the keys for names this file system takes for one: %w", err)
		}
	}

	for _, m := range missing {
		fmt.Fprintf(g.stderr, "wharf get: failed: %s\n", printable(m))
	}
	total, nfiles := sel.bytes, int(sel.files)
	g.rep = g.pf.start("get", "files")
	g.rep.SetTotal(total, sel.files)

	work := make(chan archiveview.File)
	var wg sync.WaitGroup
	for range min(parallel, max(nfiles, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				g.one(ctx, f)
			}
		}()
	}
	sw := sweeper{g: g}
	_ = sel.each(ctx, func(f archiveview.File) error {
		sw.enter(f.Key)
		select {
		case work <- f:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(work)
	wg.Wait()
	snap := g.rep.Done(ctx.Err())

	g.mu.Lock()
	defer g.mu.Unlock()
	if ctx.Err() != nil {
		left := nfiles - g.written - g.skipped - g.fail
		fmt.Fprintf(g.stderr, "wharf get: interrupted after %s: %d of %d files written (%s), %d already present, %d failed; %d not written (%s of %s done); run the same command again to resume\n",
			time.Since(start).Round(time.Millisecond), g.written, nfiles, formatBytes(g.writtenBytes), g.skipped, g.fail, left,
			formatBytes(snap.Bytes), formatBytes(total))
		return fmt.Errorf("interrupted: %d of %d files not written", left, nfiles)
	}
	replaced := ""
	if g.replaced > 0 {
		replaced = fmt.Sprintf(" (%d of them replaced a different file, named above)", g.replaced)
	}
	fmt.Fprintf(g.stderr, "wharf get: %d files written (%s)%s, %d already present, %d failed, in %s\n",
		g.written, formatBytes(g.writtenBytes), replaced, g.skipped, g.fail+len(missing), time.Since(start).Round(time.Millisecond))
	if n := g.fail + len(missing); n > 0 {
		return filesFailed{failed: n, of: nfiles + len(missing)}
	}
	return nil
}

// one extracts one file, reporting its outcome.
func (g *getter) one(ctx context.Context, f archiveview.File) {
	if ctx.Err() != nil {
		return
	}
	skipped, replaced, err := g.extract(ctx, f)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case err != nil && ctx.Err() != nil:
		// interrupted: counted as not written
	case err != nil:
		g.fail++
		fmt.Fprintf(g.stderr, "wharf get: failed: %s\n", printable(err.Error()))
	case skipped:
		g.skipped++
		g.rep.ItemDone()
	default:
		g.written++
		g.writtenBytes += f.Size
		g.rep.ItemDone()
		if replaced != "" {
			g.replaced++
			fmt.Fprintf(g.stderr, "wharf get: replaced %s: %s\n", printable(path.Join(g.dir, f.Key)), replaced)
		}
	}
}

// foldRule is how DIR's file system compares names: ignoring case,
// ignoring Unicode normalisation, or both (macOS's default).
type foldRule struct{ caseFold, normFold bool }

func (r foldRule) any() bool { return r.caseFold || r.normFold }

// what says what the file system ignores, for a refusal.
func (r foldRule) what() (ignores, differ string) {
	switch {
	case r.caseFold && r.normFold:
		return "case and Unicode normalisation", "for case or Unicode normalisation (\u00e9 and e + U+0301 are one name there)"
	case r.normFold:
		return "Unicode normalisation", "for Unicode normalisation (\u00e9 and e + U+0301 are one name there)"
	default:
		return "case", "for case"
	}
}

// foldCase is name as a file system that ignores case compares it: each
// rune replaced by the smallest of its simple case folds ("K", "k" and
// the Kelvin sign all become "K") that is not a combining mark (the
// orbit of "ι" holds U+0345, which a decomposition would move behind
// the marks before it: "ι\u0301" and "\u0301ι" would fold alike); a
// combining mark whose folds are all marks stays a mark.
func foldCase(name string) string { return string(appendFoldCase(nil, name)) }

// appendFoldCase appends foldCase(name) to dst.
func appendFoldCase(dst []byte, name string) []byte {
	for i := 0; i < len(name); {
		if c := name[i]; c < utf8.RuneSelf { // an ASCII letter's smallest fold is its upper case
			if c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(name[i:])
		m, mark := r, unicode.Is(unicode.Mn, r)
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			switch fm := unicode.Is(unicode.Mn, f); {
			case mark && !fm:
				m, mark = f, false
			case fm == mark:
				m = min(m, f)
			}
		}
		dst = utf8.AppendRune(dst, m)
		i += n
	}
	return dst
}

// folder folds names by a rule, reusing its buffers.
type folder struct {
	rule      foldRule
	dec, fold []byte
}

// key is name as the rule compares it, valid until the next call: under
// normalisation, its canonical decomposition (NFD, as HFS+ stores it),
// case-folded when the rule ignores case too, and decomposed once more
// (a fold may compose).
func (f *folder) key(name string) []byte {
	if !f.rule.normFold {
		f.fold = appendFoldCase(f.fold[:0], name)
		return f.fold
	}
	f.dec = norm.NFD.AppendString(f.dec[:0], name)
	if !f.rule.caseFold {
		return f.dec
	}
	f.fold = appendFoldCase(f.fold[:0], string(f.dec))
	f.dec = norm.NFD.Append(f.dec[:0], f.fold...)
	return f.dec
}

// probeCaseFold reports whether DIR's file system ignores case: a
// temporary file it creates is found under its name in upper case.
func (g *getter) probeCaseFold() bool {
	tf, tmp, err := g.createTemp(".")
	if err != nil {
		return false
	}
	defer func() {
		tf.Close()
		g.root.Remove(tmp)
	}()
	upper := strings.ToUpper(tmp)
	if upper == tmp {
		return false
	}
	fi, err1 := tf.Stat()
	li, err2 := g.root.Lstat(upper)
	return err1 == nil && err2 == nil && os.SameFile(fi, li)
}

// probeNormFold reports whether DIR's file system ignores Unicode
// normalisation: a temporary file it creates under a name holding
// U+00E9 is found under the same name with "e" + U+0301.
func (g *getter) probeNormFold() bool {
	tf, tmp, err := g.createTempMarked(".", tempNormMark)
	if err != nil {
		return false
	}
	defer func() {
		tf.Close()
		g.root.Remove(tmp)
	}()
	decomposed := norm.NFD.String(tmp)
	if decomposed == tmp {
		return false
	}
	fi, err1 := tf.Stat()
	li, err2 := g.root.Lstat(decomposed)
	return err1 == nil && err2 == nil && os.SameFile(fi, li)
}

// collisions finds the selected keys that share their folded name (by
// rule) with another: a walk of the selection that keeps 8 bytes a file
// (a hash of its folded key), and when two hashes agree, a second walk
// that keeps the keys of those hashes only. It returns, for each such
// key, the refusal's reason.
func collisions(ctx context.Context, sel *selection, rule foldRule) (map[string]string, error) {
	seed := maphash.MakeSeed()
	var sums []uint64
	fo := folder{rule: rule}
	if err := sel.each(ctx, func(f archiveview.File) error {
		sums = append(sums, maphash.Bytes(seed, fo.key(f.Key)))
		return nil
	}); err != nil {
		return nil, err
	}
	slices.Sort(sums)
	dup := map[uint64]bool{}
	for i := 1; i < len(sums); i++ {
		if sums[i] == sums[i-1] {
			dup[sums[i]] = true
		}
	}
	sums = nil
	if len(dup) == 0 {
		return nil, nil
	}
	byFold := map[string][]string{}
	if err := sel.each(ctx, func(f archiveview.File) error {
		buf := fo.key(f.Key)
		if dup[maphash.Bytes(seed, buf)] {
			fk := string(buf)
			byFold[fk] = append(byFold[fk], f.Key)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// Each refusal names at most sampleOthers of the others (a hostile
	// archive may spell one name in thousands of ways: its report grows
	// with the keys, not with their square).
	const sampleOthers = 3
	ignores, differ := rule.what()
	out := map[string]string{}
	for _, keys := range byFold {
		if len(keys) < 2 {
			continue // two folded keys with one hash
		}
		for _, k := range keys {
			var others []string
			for _, o := range keys[:min(len(keys), sampleOthers+1)] {
				if o != k && len(others) < sampleOthers {
					others = append(others, o)
				}
			}
			named := strings.Join(others, ", ")
			if n := len(keys) - 1; n == 1 {
				named = "also has " + named
			} else if n > len(others) {
				named = fmt.Sprintf("has %d other keys of this name (%s, ...)", n, named)
			} else {
				named = fmt.Sprintf("has %d other keys of this name (%s)", n, named)
			}
			out[k] = "this file system ignores " + ignores + ", and the archive " + named + ", the same but " + differ + ": none of them is written (get them into different directories, or onto a file system that tells them apart)"
		}
	}
	return out, nil
}

// Temporary files: ".wharf-get-" + 16 hex digits + ".tmp", or for the
// normalisation probe ".wharf-get-" + 16 hex digits + tempNormMark +
// ".tmp" (the mark composed, or decomposed as HFS+ stores it).
const (
	tempPrefix   = ".wharf-get-"
	tempSuffix   = ".tmp"
	tempNormMark = "-\u00e9"
	// tempNormMarkNFD is tempNormMark decomposed, as HFS+ stores it.
	tempNormMarkNFD = "-e\u0301"
	// tempOld: without flock, a temporary file not written for this long
	// is no live get's (every read has its deadlines).
	tempOld = time.Hour
)

// isTempName reports whether name is one of get's temporary files.
func isTempName(name string) bool {
	h, ok := strings.CutPrefix(name, tempPrefix)
	if !ok {
		return false
	}
	if h, ok = strings.CutSuffix(h, tempSuffix); !ok {
		return false
	}
	if m, ok := strings.CutSuffix(h, tempNormMark); ok {
		h = m
	} else if m, ok := strings.CutSuffix(h, tempNormMarkNFD); ok {
		h = m
	}
	if len(h) != 16 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// sweeper removes the temporary files an earlier get left (it was killed
// before it could) in each directory this run writes to, once per
// directory: the selected keys come in key order, and the keys under a
// directory are contiguous in it, so a directory is entered once, when
// the first key under it comes. It holds one directory name.
type sweeper struct {
	g       *getter
	started bool
	last    string // the directory of the last key ("." for DIR itself)
}

// enter sweeps the directories of key that the keys before it did not
// lie in.
func (s *sweeper) enter(key string) {
	if _, err := localPath(key); err != nil {
		return // refused when it is extracted
	}
	dir := path.Dir(key)
	seen := func(d string) bool {
		return s.started && (d == "." || s.last == d || strings.HasPrefix(s.last, d+"/"))
	}
	if !seen(".") {
		s.g.sweep(".")
	}
	for i := 0; i < len(dir) && dir != "."; i++ {
		if dir[i] == '/' && !seen(dir[:i]) {
			s.g.sweep(dir[:i])
		}
	}
	if dir != "." && !seen(dir) {
		s.g.sweep(dir)
	}
	s.started, s.last = true, dir
}

// sweep removes the stale temporary files directly in dir (a directory
// that does not exist yet has none), reading it a batch at a time.
func (g *getter) sweep(dir string) {
	d, err := g.root.Open(dir)
	if err != nil {
		return
	}
	defer d.Close()
	for {
		ents, err := d.ReadDir(256)
		for _, e := range ents {
			if e.Type().IsRegular() && isTempName(e.Name()) {
				g.removeStale(path.Join(dir, e.Name()))
			}
		}
		if err != nil {
			return
		}
	}
}

// removeStale removes the temporary file name unless a live get may be
// writing it: one holds its lock, or (without flock) wrote it within
// tempOld. (A get that has created its file and not locked it yet sees,
// once it has the lock, that the name is gone, and creates another:
// createTemp.)
func (g *getter) removeStale(name string) {
	f, err := g.root.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return
	}
	defer f.Close() // after the removal: the lock is held until then
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	locked, err := lockTemp(f)
	if err != nil {
		locked = time.Since(fi.ModTime()) > tempOld
	}
	if !locked {
		return
	}
	if li, err := g.root.Lstat(name); err != nil || !os.SameFile(fi, li) {
		return
	}
	if err := g.root.Remove(name); err != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	fmt.Fprintf(g.stderr, "wharf get: removed %s (%s), the temporary file of an earlier get that did not finish\n", printable(path.Join(g.dir, name)), formatBytes(fi.Size()))
}

// errOutside is returned for a key that cannot be written under DIR as
// itself.
var errOutside = errors.New("refused: the key would be written outside the target directory")

// localPath checks that key names a path inside the target directory: a
// relative "/"-separated path with no empty, "." or ".." segment and no
// NUL, whose file name is not one of get's temporary names (isTempName).
// (Archive keys are sanitized when the archive is opened; this is the
// second line, and os.Root the third.)
//
// On Windows a segment must also be a name Windows keeps as it is
// (windowsNameProblem): else "a:b" writes a stream of file "a", "x."
// writes "x", "NUL" writes nothing, and "a\b" is two segments.
func localPath(key string) (string, error) {
	return localPathOn(runtime.GOOS, key)
}

// localPathOn is localPath for the file names of goos.
func localPathOn(goos, key string) (string, error) {
	if key == "" || strings.HasPrefix(key, "/") || strings.ContainsRune(key, 0) {
		return "", errOutside
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", errOutside
		}
		if goos == "windows" {
			if why := windowsNameProblem(seg); why != "" {
				return "", fmt.Errorf("refused: %q is not a file name Windows keeps as it is (%s)", seg, why)
			}
		}
	}
	if base := path.Base(key); isTempName(base) {
		// Written, it would be taken by a later get's sweep for a
		// temporary file left behind, and removed.
		return "", fmt.Errorf("refused: %q is the name of wharf get's temporary files, which a later get into this directory would remove as left behind", base)
	}
	return key, nil
}

// windowsNameProblem says why Windows would not keep seg as the name of a
// file, or "".
func windowsNameProblem(seg string) string {
	if i := strings.IndexAny(seg, `\:*?"<>|`); i >= 0 {
		return fmt.Sprintf("%q is a separator or reserved there", seg[i])
	}
	for _, r := range seg {
		if r < 0x20 {
			return "a control character"
		}
	}
	if strings.HasSuffix(seg, ".") || strings.HasSuffix(seg, " ") {
		return "Windows drops a trailing dot or space"
	}
	base, _, _ := strings.Cut(seg, ".")
	b := strings.ToUpper(strings.TrimRight(base, " "))
	if slices.Contains([]string{"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}, b) {
		return "a device name"
	}
	if len(b) > 3 && (b[:3] == "COM" || b[:3] == "LPT") && slices.Contains([]string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "\u00b9", "\u00b2", "\u00b3"}, b[3:]) {
		return "a device name"
	}
	return ""
}

// extract writes f to DIR/key atomically, or skips it when the file there
// already has its content. A file there with other content is refused,
// or with --overwrite replaced: replaced then says how it differed.
func (g *getter) extract(ctx context.Context, f archiveview.File) (skipped bool, replaced string, err error) {
	name, err := localPath(f.Key)
	if err != nil {
		return false, "", fmt.Errorf("key %q: %w", f.Key, err)
	}
	fail := func(what string, err error) (bool, string, error) {
		return false, "", fmt.Errorf("key %s: %s %s: %w", f.Key, what, path.Join(g.dir, name), err)
	}
	if why, ok := g.collide[f.Key]; ok {
		return false, "", fmt.Errorf("key %s: refused: %s", f.Key, why)
	}
	if g.sel.selectsUnder(f.Key + "/") {
		// The files under it are written; which one lost a race is not
		// left to chance.
		return false, "", fmt.Errorf("key %s: refused: the archive also has files under %s/, and a directory cannot be a file too (get %s alone into another directory)", f.Key, f.Key, f.Key)
	}
	ok, differs, err := g.present(ctx, name, f)
	switch {
	case err != nil:
		return fail("check", err)
	case ok:
		g.rep.Add(f.Size)
		return true, "", nil
	case differs != "" && !g.overwrite:
		return false, "", fmt.Errorf("key %s: refused: %s is already there and %s; --overwrite replaces it", f.Key, path.Join(g.dir, name), differs)
	}
	dir := path.Dir(name)
	if dir != "." {
		if err := g.root.MkdirAll(dir, 0o755); err != nil {
			return fail("mkdir for", err)
		}
	}
	tf, tmp, err := g.createTemp(dir)
	if err != nil {
		return fail("create", err)
	}
	done := false
	defer func() {
		if !done {
			tf.Close()
			g.root.Remove(tmp)
		}
	}()
	r, err := g.a.Open(ctx, f, 0, f.Size)
	if err != nil {
		return false, "", err
	}
	n, err := io.Copy(progressWriter{w: writeTagged{tf}, add: g.rep.Add}, r)
	r.Close()
	var we writeError
	if errors.As(err, &we) {
		return fail("write", we.err) // a full disk: the key and where it goes
	}
	if err != nil {
		return false, "", err // the read path's error names the archive, key and chunk
	}
	if n != f.Size {
		return fail("write", fmt.Errorf("%d of %d bytes", n, f.Size))
	}
	if err := tf.Sync(); err != nil {
		return fail("fsync", err)
	}
	if err := tf.Close(); err != nil {
		return fail("close", err)
	}
	done = true
	if err := g.root.Chtimes(tmp, f.ModTime, f.ModTime); err != nil {
		g.root.Remove(tmp)
		return fail("set mtime of", err)
	}
	if err := g.install(tmp, name, differs != ""); err != nil {
		g.root.Remove(tmp)
		return fail("rename into", err)
	}
	if d, err := g.root.Open(dir); err == nil { // make the rename durable
		d.Sync()
		d.Close()
	}
	return false, differs, nil
}

// createTemp creates a temporary file in dir and locks it (held until it
// is closed, so another get's sweep leaves it alone). A sweep may have
// taken the lock, or removed the name, between the creation and the
// lock: then the file is not the one under its name any more, and
// another is created.
func (g *getter) createTemp(dir string) (*os.File, string, error) {
	return g.createTempMarked(dir, "")
}

// createTempMarked is createTemp with mark (tempNormMark or "") before
// the name's suffix.
func (g *getter) createTempMarked(dir, mark string) (*os.File, string, error) {
	var lastErr error
	for range 4 {
		var rnd [8]byte
		rand.Read(rnd[:])
		tmp := path.Join(dir, tempPrefix+hex.EncodeToString(rnd[:])+mark+tempSuffix)
		tf, err := g.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, "", err
		}
		locked, lerr := lockTemp(tf)
		if lerr != nil { // no flock here: sweeps go by age
			return tf, tmp, nil
		}
		if locked {
			fi, err1 := tf.Stat()
			li, err2 := g.root.Lstat(tmp)
			if err1 == nil && err2 == nil && os.SameFile(fi, li) {
				return tf, tmp, nil
			}
		}
		tf.Close()
		lastErr = fmt.Errorf("temporary file %s: taken by another get's sweep", tmp)
	}
	return nil, "", lastErr
}

// install puts the finished temporary file tmp under name. Replacing
// what is there (replace: it was found different and --overwrite given)
// is a rename. Otherwise nothing was there when checked, and nothing that
// has appeared since is replaced: a hard link fails when name exists,
// then the temporary name goes; a file system without hard links gets a
// rename after a second look.
func (g *getter) install(tmp, name string, replace bool) error {
	if replace {
		return g.root.Rename(tmp, name)
	}
	err := g.root.Link(tmp, name)
	if err == nil {
		g.root.Remove(tmp)
		return nil
	}
	if _, serr := g.root.Lstat(name); serr == nil || !errors.Is(serr, fs.ErrNotExist) {
		if g.overwrite {
			return g.root.Rename(tmp, name)
		}
		return fmt.Errorf("refused: a file appeared there while the key was written (--overwrite replaces it): %w", fs.ErrExist)
	}
	return g.root.Rename(tmp, name)
}

// present reports whether DIR/name already holds f: a regular file of f's
// size whose sha256 matches the manifest's, or, when the manifest has no
// sha256 for it, whose mtime matches (whole seconds). When something else
// is there, differs says what (for the refusal, or the replaced line).
// Reading the file stops when ctx ends.
func (g *getter) present(ctx context.Context, name string, f archiveview.File) (ok bool, differs string, err error) {
	fi, err := g.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, "", nil
	}
	if err != nil {
		return false, "", err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return false, "is a symlink (replaced itself, never written through)", nil
	case fi.IsDir():
		return false, "", errors.New("refused: a directory is there (no flag replaces a directory)")
	case !fi.Mode().IsRegular():
		return false, fmt.Sprintf("is not a regular file (%s)", fi.Mode().Type()), nil
	case fi.Size() != f.Size:
		return false, fmt.Sprintf("has %d bytes, the archive's file %d", fi.Size(), f.Size), nil
	}
	sameTime := fi.ModTime().Unix() == f.ModTime.Unix()
	if f.SHA256 == "" {
		if !sameTime {
			return false, fmt.Sprintf("has another mtime (%s, the archive's %s; the manifest has no sha256 to compare the content)",
				fi.ModTime().UTC().Format(time.RFC3339), f.ModTime.UTC().Format(time.RFC3339)), nil
		}
		return true, "", nil
	}
	h := sha256.New()
	rf, err := g.root.Open(name)
	if err != nil {
		return false, "", err
	}
	defer rf.Close()
	if _, err := io.Copy(h, ctxReader{ctx: ctx, r: rf}); err != nil {
		return false, "", err
	}
	if hex.EncodeToString(h.Sum(nil)) != strings.ToLower(f.SHA256) {
		return false, "has other content (its sha256 is not the manifest's)", nil
	}
	if !sameTime { // the right content with another mtime: keep the content, fix the time
		if err := g.root.Chtimes(name, f.ModTime, f.ModTime); err != nil {
			return false, "", err
		}
	}
	return true, "", nil
}

// ctxReader reads from r until ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
