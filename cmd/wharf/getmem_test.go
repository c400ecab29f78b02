package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// peakLiveHeap runs fn and returns the largest live heap (bytes marked
// reachable by a GC) seen while it ran, above the live heap before it (or
// after it, when less).
// The GC runs often meanwhile (GOGC 5), so what fn holds for a while is
// seen.
func peakLiveHeap(fn func()) int64 {
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	for range 3 { // what finalizers held goes in the next cycle
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	live := func() int64 { metrics.Read(sample); return int64(sample[0].Value.Uint64()) }
	base := live()
	var (
		peak int64
		wg   sync.WaitGroup
		stop = make(chan struct{})
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			peak = max(peak, live())
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	fn()
	runtime.GC()
	close(stop)
	wg.Wait()
	end := live() // fn holds nothing once done: what was live before it that is gone now was not its
	return max(peak, end) - min(base, end)
}

// TestGetSelectionHoldsNoFiles: get walks what its arguments select page
// by page, as ls does, instead of collecting every selected file first:
// selecting the whole of a 100,000-file archive holds no more memory than
// ls listing it (the archive's own index, one page), where collecting it
// held about 350 more bytes per file (1.75 GB for 5M files, three times
// the index).
func TestGetSelectionHoldsNoFiles(t *testing.T) {
	const n = 100_000
	st := t.TempDir()
	u := func() string {
		files := make(map[string][]byte, n)
		for i := range n {
			files[fmt.Sprintf("d%03d/file-%06d.txt", i%500, i)] = []byte("x")
		}
		u, _ := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-many", FrameSize: 1 << 20})
		return u
	}()
	ctx := context.Background()
	lsPeak := peakLiveHeap(func() {
		if err := lsCmd(ctx, []string{"--store", "file://" + st, "--recursive", u}, io.Discard); err != nil {
			t.Fatal(err)
		}
	})
	var err error
	getPeak := peakLiveHeap(func() {
		// -o - with the whole archive selected: refused once the selection
		// is counted, after the whole archive was selected.
		err = getCmd(ctx, []string{"--store", "file://" + st, "-q", u, "/", "d007/", "-o", "-"}, io.Discard, io.Discard)
	})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("select %d", n)) {
		t.Fatalf("get -o - of the whole archive: %v, want a refusal counting %d files", err, n)
	}
	t.Logf("peak live heap above the start: ls --recursive %d bytes, get's selection %d bytes (%d files)", lsPeak, getPeak, n)
	if slack := int64(8 << 20); getPeak > lsPeak+lsPeak/4+slack {
		t.Errorf("get's selection of %d files held %d bytes of heap at its peak, ls listing them %d (%.0f more bytes per file)",
			n, getPeak, lsPeak, float64(getPeak-lsPeak)/n)
	}
}

// TestSelectFilesOverlapping: arguments that overlap (a prefix and a key
// under it, a directory given both ways, repeats, "/" with anything)
// select each file once, in key order, and count what they walk.
func TestSelectFilesOverlapping(t *testing.T) {
	files := getTree()
	st := t.TempDir()
	u, _ := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-overlap", FrameSize: 8192})
	ctx := context.Background()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	sf := addStoreFlags(fs)
	if err := fs.Parse([]string{"--store", "file://" + st}); err != nil {
		t.Fatal(err)
	}
	a, err := sf.openArchive(ctx, u, archiveview.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// want: every key one of the arguments selects, by the documented rules
	want := func(args []string) []string {
		var keys []string
		for k := range files {
			for _, arg := range args {
				if arg == "/" || strings.HasSuffix(arg, "/") && strings.HasPrefix(k, arg) || k == arg || strings.HasPrefix(k, arg+"/") {
					keys = append(keys, k)
					break
				}
			}
		}
		sort.Strings(keys)
		return keys
	}
	for _, args := range [][]string{
		{"/"}, {"/", "d/"}, {"d/", "/"}, {"d/f03.txt", "d/", "d/f03.txt"}, {"d/sub", "d/"}, {"d/sub/", "d/sub"},
		{"d/f01.txt", "d/f01.txt"}, {"README.md", "d/sub/", "big", "dir-ü/naïve.csv"}, {"d/sub/deep/leaf.txt", "d/sub/"},
		{"d/f1", "d/f10.txt", "d/f1/"},
	} {
		sel, _, err := selectFiles(ctx, a, args)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		var bytes int64
		sel.each(ctx, func(f archiveview.File) error {
			got = append(got, f.Key)
			bytes += f.Size
			return nil
		})
		w := want(args)
		var wantBytes int64
		for _, k := range w {
			wantBytes += int64(len(files[k]))
		}
		if strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Errorf("%q selects\n%q, want\n%q", args, got, w)
		}
		if sel.files != int64(len(w)) || sel.bytes != wantBytes || bytes != wantBytes {
			t.Errorf("%q: counted %d files, %d bytes (walked %d); want %d, %d", args, sel.files, sel.bytes, bytes, len(w), wantBytes)
		}
	}
}

// TestRestoreSelectionHoldsNoFiles: restore walks the files its globs
// select page by page, keeping only the distinct objects that hold them:
// a dry run over a 100,000-file archive holds no more memory than ls
// listing it.
func TestRestoreSelectionHoldsNoFiles(t *testing.T) {
	const n = 100_000
	st := t.TempDir()
	u := func() string {
		files := make(map[string][]byte, n)
		for i := range n {
			files[fmt.Sprintf("d%03d/file-%06d.txt", i%500, i)] = []byte("x")
		}
		u, _ := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-many", FrameSize: 1 << 20})
		return u
	}()
	ctx := context.Background()
	lsPeak := peakLiveHeap(func() {
		if err := lsCmd(ctx, []string{"--store", "file://" + st, "--recursive", u}, io.Discard); err != nil {
			t.Fatal(err)
		}
	})
	var out strings.Builder
	restorePeak := peakLiveHeap(func() {
		if err := restoreCmd(ctx, []string{"--store", "file://" + st, "--days", "1", "--dry-run", u}, &out); err != nil {
			t.Fatal(err)
		}
	})
	if want := fmt.Sprintf("selected files: %d (%d bytes)", n, n); !strings.Contains(out.String(), want) {
		t.Fatalf("restore --dry-run: output lacks %q:\n%s", want, out.String())
	}
	t.Logf("peak live heap above the start: ls --recursive %d bytes, restore --dry-run %d bytes (%d files)", lsPeak, restorePeak, n)
	if slack := int64(8 << 20); restorePeak > lsPeak+lsPeak/4+slack {
		t.Errorf("restore's selection of %d files held %d bytes of heap at its peak, ls listing them %d (%.0f more bytes per file)",
			n, restorePeak, lsPeak, float64(restorePeak-lsPeak)/n)
	}
}
