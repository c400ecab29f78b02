package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// runRestore is "wharf restore": restore the archived chunks that hold
// selected files of an upload, and nothing else.
func runRestore(ctx context.Context, args []string) error {
	return restoreCmd(ctx, args, os.Stdout)
}

// pathFlags collects repeated --path globs.
type pathFlags []string

func (p *pathFlags) String() string { return strings.Join(*p, ",") }

func (p *pathFlags) Set(v string) error {
	if v == "" {
		return errors.New("empty glob")
	}
	if _, err := path.Match(v, ""); err != nil {
		return fmt.Errorf("glob %q: %w", v, err)
	}
	*p = append(*p, v)
	return nil
}

// globSelects reports whether glob selects key: it matches the key
// (path.Match: '*' and '?' do not cross '/'), or one of its directories,
// so "data/2024" and "data/*" select everything under them.
func globSelects(glob, key string) bool {
	for p := key; ; {
		if ok, _ := path.Match(glob, p); ok {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// restoreFlags are "wharf restore"'s own flags, validated.
type restoreFlags struct {
	paths  pathFlags
	days   int
	tier   string
	dryRun bool
}

func (rf *restoreFlags) validate() error {
	if rf.days < 1 || rf.days > backend.MaxRestoreDays {
		return fmt.Errorf("--days %d: want 1 to %d (how long the restored copies stay; ignored for Intelligent-Tiering, whose restores have no expiry)", rf.days, backend.MaxRestoreDays)
	}
	if !backend.ValidRetrievalTier(rf.tier) {
		return fmt.Errorf("--tier %q: want Standard, Bulk or Expedited", rf.tier)
	}
	return nil
}

func restoreCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	sf := addStoreFlags(fs)
	var rf restoreFlags
	fs.Var(&rf.paths, "path", "`GLOB` of the files to restore (path.Match on the file's key or one of its directories); repeatable; default every file")
	fs.IntVar(&rf.days, "days", 0, "how many days the restored copies stay (required, >= 1)")
	fs.StringVar(&rf.tier, "tier", backend.RetrievalStandard, "retrieval tier: Standard, Bulk or Expedited (not for DEEP_ARCHIVE)")
	fs.BoolVar(&rf.dryRun, "dry-run", false, "report the chunks, their sizes and the retrieval estimate; start no restore")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: wharf restore MANIFEST_URL [--path GLOB ...] --days N [--tier Standard|Bulk|Expedited] [--dry-run] [--store URL --s3-endpoint URL ...]")
		fs.PrintDefaults()
	}
	manifestURL, err := manifestArg(fs, args)
	if err != nil {
		return err
	}
	if err := rf.validate(); err != nil {
		return usageErr(err)
	}
	a, err := sf.openArchive(ctx, manifestURL, archiveview.Options{StorageClasses: true})
	if err != nil {
		return err
	}
	defer a.Close()
	return restoreReport(ctx, a, manifestURL, rf, printableWriter{out}) // it names the manifest's object keys
}

// selectGlobs walks the files the globs select (every file without globs),
// page by page, and returns how many there are, their bytes, and the
// distinct objects holding them with the upload's total stored size
// (Archive.StorageObjects, a page of files at a time: what it holds is
// the objects, never the files). A glob that selects nothing is an error,
// found by a first walk before any object is looked at.
func selectGlobs(ctx context.Context, a *archiveview.Archive, globs []string) (files, bytes int64, objs []archiveview.StorageObject, total int64, err error) {
	used := make([]bool, len(globs))
	selects := func(key string) bool {
		sel := len(globs) == 0
		for i, g := range globs {
			if globSelects(g, key) {
				sel, used[i] = true, true
			}
		}
		return sel
	}
	_ = eachEntry(a, archiveview.ListParams{}, func(e archiveview.ListEntry) error {
		if selects(e.File.Key) {
			files++
			bytes += e.File.Size
		}
		return nil
	})
	for i, g := range globs {
		if !used[i] {
			return 0, 0, nil, 0, fmt.Errorf("--path %q selects no file of the archive", g)
		}
	}
	byKey := map[string]archiveview.StorageObject{}
	batch := make([]archiveview.File, 0, 1000)
	flush := func() error {
		o, t, err := a.StorageObjects(ctx, batch)
		if err != nil {
			return err
		}
		for _, so := range o {
			byKey[so.Key] = so
		}
		total, batch = t, batch[:0]
		return nil
	}
	err = eachEntry(a, archiveview.ListParams{}, func(e archiveview.ListEntry) error {
		if !selects(e.File.Key) {
			return nil
		}
		batch = append(batch, e.File)
		if len(batch) == cap(batch) {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush() // the rest, and the total when nothing was selected
	}
	if err != nil {
		return 0, 0, nil, 0, err
	}
	for _, so := range byKey {
		objs = append(objs, so)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return files, bytes, objs, total, nil
}

// objectState is one object's restore state in words.
func objectState(o archiveview.StorageObject, now time.Time) string {
	switch {
	case !o.Archived():
		return "readable"
	case o.Restore.Ongoing:
		return "restore in progress"
	case o.Restore.Done(now) && !o.Restore.Expiry.IsZero():
		return "restored until " + o.Restore.Expiry.UTC().Format(time.RFC3339)
	case o.Restore.Done(now):
		return "restored"
	}
	return "archived: needs a restore"
}

func classOf(o archiveview.StorageObject) string {
	c := o.Class
	if c == "" {
		c = backend.ClassStandard
	}
	if o.Tier != "" {
		c += "/" + o.Tier
	}
	return c
}

// storedSize is what an object costs to retrieve: its size as the store
// listed it (or a HEAD reported it), which is what S3 bills, else the
// manifest's compressed_size (listed false).
func storedSize(o archiveview.StorageObject) (size int64, listed bool) {
	if o.ObjectClass.Size > 0 {
		return o.ObjectClass.Size, true
	}
	return o.Size, false
}

// sizeNote is what an object line adds when the manifest disagrees with
// the store, or when the store did not report the size.
func sizeNote(o archiveview.StorageObject) string {
	size, listed := storedSize(o)
	switch {
	case !listed:
		return "\t(size from the manifest: not listed)"
	case o.Size > 0 && o.Size != size:
		return fmt.Sprintf("\t(the manifest says %d bytes)", o.Size)
	}
	return ""
}

func percent(part, whole int64) string {
	if whole <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

// restoreReport prints the selection, its chunks and sizes, the retrieval
// estimate, and (unless a dry run) starts the restores. Sizes and the
// estimate are the store's (the storage-class listing knows every
// object's real size); an object whose manifest compressed_size disagrees
// is flagged on its line and in a warning, and one the store did not
// report falls back to the manifest's size, also flagged.
func restoreReport(ctx context.Context, a *archiveview.Archive, manifestURL string, rf restoreFlags, out io.Writer) error {
	nfiles, fileBytes, objs, total, err := selectGlobs(ctx, a, rf.paths)
	if err != nil {
		return err
	}
	now := time.Now()
	var (
		held, need, needBytes int64
		it, glacier           []archiveview.StorageObject
		disagree, unlisted    []string
	)
	fmt.Fprintf(out, "archive:        %s (%s)\n", a.UploadID(), manifestURL)
	fmt.Fprintf(out, "selected files: %d (%d bytes)\n", nfiles, fileBytes)
	fmt.Fprintf(out, "objects:        %d of the %d holding the upload\n", len(objs), a.Info().Chunks)
	for _, o := range objs {
		size, listed := storedSize(o)
		held += size
		switch {
		case !listed:
			unlisted = append(unlisted, o.Key)
		case o.Size > 0 && o.Size != size:
			disagree = append(disagree, fmt.Sprintf("%s (stored %d, manifest %d)", o.Key, size, o.Size))
		}
		state := objectState(o, now)
		fmt.Fprintf(out, "  %s\t%s\t%d bytes\t%s%s\n", o.Key, classOf(o), size, state, sizeNote(o))
		if o.Archived() && !o.Restore.Ongoing && !o.Restore.Done(now) {
			need++
			needBytes += size
			req := backend.RestoreRequest{Days: rf.days, Tier: rf.tier}
			if o.Class == backend.ClassIntelligentTiering {
				req.Days = 0 // its restore has no expiry
				it = append(it, o)
			} else {
				glacier = append(glacier, o)
			}
			// S3's rules (Expedited is not for Deep Archive), before
			// anything is sent.
			if err := backend.CheckRestore(o.Class, o.Tier, req); err != nil {
				return fmt.Errorf("object %s: %w", o.Key, err)
			}
		}
	}
	// The upload's total is the manifest's: a share of it means nothing
	// once the store has shown the manifest's sizes wrong.
	share := func(n int64) string {
		if len(disagree) > 0 {
			return "no share: the manifest's sizes are wrong"
		}
		return percent(n, total)
	}
	fmt.Fprintf(out, "compressed:     %d bytes of %d in the upload (%s)\n", held, total, share(held))
	of := share(needBytes) + " of the upload"
	if len(disagree) > 0 {
		of = "from the store's sizes; no share of the upload: the manifest's sizes are wrong"
	}
	fmt.Fprintf(out, "to restore:     %d objects, %d bytes (estimated retrieval size, %s)\n", need, needBytes, of)
	if len(disagree) > 0 {
		fmt.Fprintf(out, "warning:        %d objects are not the size the manifest's compressed_size says; the estimate uses the sizes the store listed: %s\n",
			len(disagree), strings.Join(disagree, ", "))
	}
	if len(unlisted) > 0 {
		fmt.Fprintf(out, "warning:        the store did not report the size of %d objects; the estimate uses the manifest's for them: %s\n",
			len(unlisted), strings.Join(unlisted, ", "))
	}
	if rf.dryRun {
		fmt.Fprintln(out, "dry run: no restore requested")
		return nil
	}
	if need == 0 {
		fmt.Fprintln(out, "nothing to restore: every selected object is readable, restored or being restored")
		return nil
	}
	fmt.Fprintf(out, "restoring:      tier %s, %d days\n", rf.tier, rf.days)
	var started, inProgress, restored int
	for _, batch := range []struct {
		objs []archiveview.StorageObject
		req  backend.RestoreRequest
	}{
		{glacier, backend.RestoreRequest{Days: rf.days, Tier: rf.tier}},
		{it, backend.RestoreRequest{Tier: rf.tier}}, // Intelligent-Tiering: no Days
	} {
		if len(batch.objs) == 0 {
			continue
		}
		rep, err := a.RestoreObjects(ctx, batch.objs, batch.req)
		if errors.Is(err, archiveview.ErrNotArchived) {
			// Every one was moved to a readable class since it was
			// listed above: nothing was sent, nothing is needed.
			fmt.Fprintf(out, "  %d objects need no restore any more\n", len(batch.objs))
			continue
		}
		for _, o := range rep.Objects {
			if o.Result == 0 { // its RestoreObject failed: err says why
				fmt.Fprintf(out, "  %s\tfailed\n", o.Key)
				continue
			}
			fmt.Fprintf(out, "  %s\t%s\n", o.Key, o.Result)
			switch o.Result {
			case backend.RestoreStarted:
				started++
			case backend.RestoreInProgress:
				inProgress++
			default:
				restored++
			}
		}
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "restores:       %d started, %d already in progress, %d already restored\n", started, inProgress, restored)
	return nil
}
