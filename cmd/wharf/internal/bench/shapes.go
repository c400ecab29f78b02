package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// shapeRange is one ranged GET of an analytic client: [off, off+n) of the
// file, or, with suffix, the last n bytes ("bytes=-n").
type shapeRange struct {
	off, n int64
	suffix bool
}

func (r shapeRange) header() string {
	if r.suffix {
		return fmt.Sprintf("bytes=-%d", r.n)
	}
	return fmt.Sprintf("bytes=%d-%d", r.off, r.off+r.n-1)
}

// shapeBatch is ranges a client issues at once, at most conc in flight;
// a shape's batches run one after another (a client that needs the
// answer of one to plan the next, like a Parquet footer before its
// column chunks).
type shapeBatch struct {
	conc   int
	ranges []shapeRange
}

// shape is one analytic client's request pattern against one file.
type shape struct {
	name    string
	batches []shapeBatch
	target  bool // one of issue 24's "1.1x covering frames, 1.5x direct" shapes
}

// Sizes of the shapes workload's file and frames (Config.ShapeSize,
// Config.ShapeFrame). The request sizes below are the clients' own and do
// not scale with them.
const (
	shapeFooter   = 256 << 10 // DuckDB's first read of a Parquet file: bytes=-262144
	shapeZarr     = 512 << 10 // one zarr chunk (compressed, as stored)
	shapeCOGTile  = 192 << 10 // one 512x512 tile of a COG, compressed
	shapeCOGWidth = 16        // tiles per row of the COG's full-resolution level
	shapeH5Block  = 1 << 20   // fsspec's block (its readahead cache's unit) for the HDF5 shape
)

// analyticShapes is the request shapes of issue 24 against a file of size
// bytes whose frames are frame bytes, drawn from seed.
func analyticShapes(size, frame int64, seed uint64) []shape {
	rng := rand.New(rand.NewPCG(seed, 24))
	var out []shape

	// DuckDB opening a Parquet file: the suffix read of the footer, then
	// the column chunks of one row group read at once.
	cols := shapeBatch{conc: 8}
	rowGroup := max(size/4, 1)
	start := rng.Int64N(max(size-rowGroup-shapeFooter, 1))
	for off, i := start, 0; i < 6 && off < size-shapeFooter; i++ {
		n := min(int64(64<<10+rng.IntN(448<<10)), size-shapeFooter-off)
		cols.ranges = append(cols.ranges, shapeRange{off: off, n: n})
		off += n + rowGroup/6
	}
	out = append(out, shape{name: "DuckDB Parquet open (bytes=-262144, then 6 column chunks)", batches: []shapeBatch{
		{conc: 1, ranges: []shapeRange{{n: min(shapeFooter, size), suffix: true}}}, cols}})

	// zarr-python 3: a selection of conc random chunks, read conc at a
	// time (its default async concurrency is 64; 16 as well).
	for _, conc := range []int{16, 64} {
		nChunks := size / shapeZarr
		pick := rng.Perm(int(nChunks))[:min(int(nChunks), conc)]
		b := shapeBatch{conc: conc}
		for _, c := range pick {
			b.ranges = append(b.ranges, shapeRange{off: int64(c) * shapeZarr, n: shapeZarr})
		}
		out = append(out, shape{name: fmt.Sprintf("zarr-python 3 random chunks (512 KiB), %d at a time", conc), batches: []shapeBatch{b}, target: true})
	}

	// pyarrow's pre-buffering: many column-chunk reads, holes up to
	// 8 KiB merged into spans up to 32 MiB, the spans read 8 at a time.
	var small []shapeRange
	for off := rng.Int64N(max(size/2, 1)); off < size && len(small) < 400; {
		n := min(int64(1<<10+rng.IntN(63<<10)), size-off)
		small = append(small, shapeRange{off: off, n: n})
		off += n + int64(rng.IntN(16<<10))
	}
	out = append(out, shape{name: "pyarrow coalesced reads (8 KiB holes merged, spans up to 32 MiB, 8 at a time)",
		batches: []shapeBatch{{conc: 8, ranges: coalesceRanges(small, 8<<10, 32<<20)}}})

	// 256 small concurrent reads inside the same few frames.
	few := min(3*frame, size)
	base := rng.Int64N(max(size-few, 1))
	many := shapeBatch{conc: 256}
	for i := 0; i < 256; i++ {
		n := int64(4<<10 + rng.IntN(60<<10))
		many.ranges = append(many.ranges, shapeRange{off: base + rng.Int64N(max(few-n, 1)), n: min(n, size-base)})
	}
	out = append(out, shape{name: "256 small concurrent reads (4-64 KiB) inside 3 frames", batches: []shapeBatch{many}})

	// A COG read by GDAL: the header, then random 512x512-pixel windows,
	// each covering 2x2 tiles (two runs of two adjacent tiles, which GDAL
	// merges into one range each), one window after another.
	rows := max((size-16<<10)/(shapeCOGTile*shapeCOGWidth), 2)
	cog := []shapeBatch{{conc: 1, ranges: []shapeRange{{off: 0, n: 16 << 10}}}}
	for w := 0; w < 8; w++ {
		x, y := rng.Int64N(shapeCOGWidth-1), rng.Int64N(rows-1)
		b := shapeBatch{conc: 2}
		for dy := int64(0); dy < 2; dy++ {
			off := 16<<10 + ((y+dy)*shapeCOGWidth+x)*shapeCOGTile
			if off+2*shapeCOGTile <= size {
				b.ranges = append(b.ranges, shapeRange{off: off, n: 2 * shapeCOGTile})
			}
		}
		if len(b.ranges) > 0 {
			cog = append(cog, b)
		}
	}
	out = append(out, shape{name: "COG-like random 512x512 windows (2x2 tiles of 192 KiB, 8 windows)", batches: cog, target: true})

	// h5py over an fsspec HTTP file (xarray's h5netcdf engine): fsspec's
	// readahead cache turns every miss into one range of the bytes asked
	// for plus one block (1 MiB here). The superblock and root group are
	// read first (one block at the start), then the chunk index (a B-tree
	// node a few MiB in), then 8 hyperslabs one after another, each a row
	// of two 512 KiB chunks: h5py reads the first chunk, whose miss
	// fetches it and the next block (holding the second chunk).
	// (A file smaller than 8 MiB scales the block and chunk down.)
	blk := min(int64(shapeH5Block), max(size/8, 1))
	chunk := min(int64(shapeZarr), max(blk/2, 1))
	h5 := []shapeBatch{{conc: 1, ranges: []shapeRange{{off: 0, n: blk}}}}
	h5 = append(h5, shapeBatch{conc: 1, ranges: []shapeRange{{off: 2*blk + rng.Int64N(blk), n: blk}}})
	if rowsH5 := (size - 4*blk) / (2 * chunk); rowsH5 > 0 {
		for _, r := range rng.Perm(int(rowsH5))[:min(int(rowsH5), 8)] {
			off := 4*blk + int64(r)*2*chunk
			h5 = append(h5, shapeBatch{conc: 1, ranges: []shapeRange{{off: off, n: min(chunk+blk, size-off)}}})
		}
	}
	out = append(out, shape{name: "HDF5 hyperslabs, h5py over fsspec (2 metadata block reads, then 8 rows of 2 chunks of 512 KiB, 1 MiB readahead blocks)", batches: h5, target: true})
	return out
}

// coalesceRanges merges sorted ranges whose holes are at most hole bytes
// into spans of at most span bytes, as pyarrow's read coalescing does.
func coalesceRanges(rs []shapeRange, hole, span int64) []shapeRange {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b shapeRange) int { return int(a.off - b.off) })
	var out []shapeRange
	for _, r := range s {
		if k := len(out) - 1; k >= 0 {
			last := &out[k]
			end := last.off + last.n
			if r.off-end <= hole && r.off+r.n-last.off <= span {
				last.n = max(end, r.off+r.n) - last.off
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// resolve is r as an offset and length within a file of size bytes.
func (r shapeRange) resolve(size int64) (int64, int64) {
	if r.suffix {
		n := min(r.n, size)
		return size - n, n
	}
	return r.off, min(r.n, size-r.off)
}

// shapeRun is what one side measured of one shape.
type shapeRun struct {
	lat         []float64 // seconds per request
	wall        float64   // seconds, all batches
	gets, bytes int64     // at the backend
	cpu         float64   // seconds of this process's CPU during the run (wharf, the S3 model and the client)
}

// runShape issues s's batches against bucket/key and checks every byte
// against data.
func runShape(ctx context.Context, c *s3.Client, bucket, key string, data []byte, s shape) (shapeRun, error) {
	var run shapeRun
	var mu sync.Mutex
	size := int64(len(data))
	t0 := time.Now()
	for _, b := range s.batches {
		sem := make(chan struct{}, max(b.conc, 1))
		errs := make(chan error, len(b.ranges))
		var wg sync.WaitGroup
		for _, r := range b.ranges {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				off, n := r.resolve(size)
				t := time.Now()
				out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Range: aws.String(r.header())})
				if err != nil {
					errs <- fmt.Errorf("%s: get %s %s: %w", s.name, key, r.header(), err)
					return
				}
				got, err := io.ReadAll(out.Body)
				out.Body.Close()
				if err != nil {
					errs <- fmt.Errorf("%s: get %s %s: %w", s.name, key, r.header(), err)
					return
				}
				if !bytes.Equal(got, data[off:off+n]) {
					errs <- fmt.Errorf("%s: get %s %s: bytes differ from the source", s.name, key, r.header())
					return
				}
				mu.Lock()
				run.lat = append(run.lat, time.Since(t).Seconds())
				mu.Unlock()
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return run, err
		}
	}
	run.wall = time.Since(t0).Seconds()
	return run, nil
}

// coveringFrames is the frames of the one-file archive m that hold any
// byte s asks for, and their compressed bytes.
func coveringFrames(m *manifest.Manifest, size int64, s shape) (frames []frameRef, compressed int64, err error) {
	if len(m.Files) != 1 || m.Files[0].ArchiveOffset == nil {
		return nil, 0, fmt.Errorf("shapes: the archive must hold one file with an archive offset")
	}
	base := *m.Files[0].ArchiveOffset
	seen := map[frameRef]bool{}
	for _, b := range s.batches {
		for _, r := range b.ranges {
			off, n := r.resolve(size)
			lo, hi := base+off, base+off+n
			for ci, c := range m.Chunks {
				if c.ID != m.Files[0].ChunkID {
					continue
				}
				for fi, f := range c.Frames {
					if k := (frameRef{ci, fi}); f.UncompressedOffset < hi && lo < f.UncompressedOffset+f.UncompressedSize && !seen[k] {
						seen[k] = true
						frames = append(frames, k)
						compressed += f.CompressedSize
					}
				}
			}
		}
	}
	return frames, compressed, nil
}

// percentileOf is the p-quantile (0..1) of v, nearest rank; v is not
// changed.
func percentileOf(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// analyticShapesWorkload is workload 8: the request shapes of analytic
// clients (issue 24) against one file of Config.ShapeSize bytes packed
// in Config.ShapeFrame frames, each shape from a cold cache in wharf and
// then against the same file stored as a plain object on the same S3
// model. It reports backend GETs and bytes, the bytes against the frames
// that cover the bytes asked for, and request p50/p99 and wall against
// the plain object.
func analyticShapesWorkload(ctx context.Context, cfg Config, e *env, rep *Report) error {
	size, frame := cfg.ShapeSize, cfg.ShapeFrame
	const rel = shapesKey
	data, res, err := packShapes(ctx, cfg, e)
	if err != nil {
		return err
	}
	defer os.RemoveAll(filepath.Join(e.dir, benchBucket, "shapesplain"))
	defer os.RemoveAll(filepath.Join(e.dir, benchBucket, "shapes"))
	wl := fmt.Sprintf("8. Analytic request shapes (one %d MiB file, %d KiB frames, zstd ~0.6; cold cache per shape)", size>>20, frame>>10)
	type readahead struct {
		n    int
		name string
	}
	floors := map[string]time.Duration{}
	for _, ra := range []readahead{{0, "serve's default readahead"}, {-1, "readahead off"}} {
		for _, s := range analyticShapes(size, frame, cfg.Seed) {
			frames, coverC, err := coveringFrames(res.Manifest, size, s)
			if err != nil {
				return err
			}
			floor, measured := floors[s.name] // the same frames under both readahead settings
			if s.target && !measured {
				if floor, err = shapeFloor(e, res.Manifest, frames); err != nil {
					return err
				}
				floors[s.name] = floor
			}
			var asked int64
			var reqs int
			for _, b := range s.batches {
				for _, r := range b.ranges {
					_, n := r.resolve(size)
					asked += n
					reqs++
				}
			}
			if _, err := e.serveArchive(ctx, res.ManifestKey, cfg.CacheBytes, ra.n); err != nil {
				return err
			}
			e.faulty.Reset()
			cpu0 := cpuSeconds()
			w, err := runShape(ctx, e.client, "wharf", rel, data, s)
			if err != nil {
				return err
			}
			w.cpu = cpuSeconds() - cpu0
			// wharf's readahead may still be fetching: its bytes are this
			// shape's, and must not be counted against the plain object.
			if err := quiesce(ctx, e); err != nil {
				return err
			}
			w.gets, w.bytes = getsOf(e.faulty), e.faulty.BytesReturned()
			e.plain.use(e.faulty)
			e.faulty.Reset()
			cpu0 = cpuSeconds()
			pl, err := runShape(ctx, e.plainClient, benchBucket, "shapesplain/"+rel, data, s)
			if err != nil {
				return err
			}
			pl.cpu = cpuSeconds() - cpu0
			pl.gets, pl.bytes = getsOf(e.faulty), e.faulty.BytesReturned()
			name := wl + ": " + s.name
			v := ra.name + fmt.Sprintf(", %d requests, %.1f MB asked, %d covering frames (%.1f MB compressed)", reqs, float64(asked)/1e6, len(frames), float64(coverC)/1e6)
			amp := float64(w.bytes) / float64(max(coverC, 1))
			wallR := w.wall / pl.wall
			for _, x := range []struct {
				sys string
				r   shapeRun
			}{{"wharf", w}, {"per-object", pl}} {
				rep.add(Row{Workload: name, System: x.sys, Variant: v, Metric: "backend GETs", Value: float64(x.r.gets)})
				rep.add(Row{Workload: name, System: x.sys, Variant: v, Metric: "backend MB", Value: float64(x.r.bytes) / 1e6, Unit: "MB"})
				rep.add(Row{Workload: name, System: x.sys, Variant: v, Metric: "request p50", Value: 1000 * percentileOf(x.r.lat, 0.5), Unit: "ms"})
				rep.add(Row{Workload: name, System: x.sys, Variant: v, Metric: "request p99", Value: 1000 * percentileOf(x.r.lat, 0.99), Unit: "ms"})
				rep.add(Row{Workload: name, System: x.sys, Variant: v, Metric: "wall", Value: 1000 * x.r.wall, Unit: "ms"})
				rep.add(Row{Workload: name, System: x.sys, Variant: v, Metric: "process CPU (wharf, S3 model and client)", Value: 1000 * x.r.cpu, Unit: "ms"})
			}
			rep.add(Row{Workload: name, System: "wharf", Variant: v, Metric: "backend bytes / covering frames", Value: amp, Unit: "x"})
			rep.add(Row{Workload: name, System: "wharf", Variant: v, Metric: "wall / per-object", Value: wallR, Unit: "x"})
			rep.add(Row{Workload: name, System: "wharf", Variant: v, Metric: "p99 / per-object p99", Value: percentileOf(w.lat, 0.99) / percentileOf(pl.lat, 0.99), Unit: "x"})
			if s.target {
				sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
				need := floorCores(floor, sec(pl.cpu), sec(pl.wall), cfg.Latency)
				rep.add(Row{Workload: name, System: "floor", Variant: v, Metric: "CPU floor: sha256 + zstd of the covering frames, one core", Value: float64(floor.Microseconds()) / 1000, Unit: "ms"})
				rep.add(Row{Workload: name, System: "floor", Variant: v, Metric: "cores 1.5x the plain object needs at the floor", Value: need})
				tn := s.name + " (" + ra.name + ")"
				rep.target(tn+": backend bytes / covering frames", fmt.Sprintf("%.3fx", amp), "<= 1.1x", amp <= 1.1)
				rep.target(tn+": wall vs the plain object", fmt.Sprintf("%.2fx (%.0f ms vs %.0f ms; at the CPU floor, %.0f ms, 1.5x needs %.1f cores, this machine has %d)",
					wallR, 1000*w.wall, 1000*pl.wall, float64(floor.Microseconds())/1000, need, runtime.GOMAXPROCS(0)), "<= 1.5x", wallR <= 1.5)
			}
			cfg.logf("%s, %s: wharf %d GETs %.1f MB (%.2fx covering frames) p50 %.0f p99 %.0f wall %.0f ms; plain %d GETs %.1f MB p50 %.0f p99 %.0f wall %.0f ms",
				s.name, ra.name, w.gets, float64(w.bytes)/1e6, amp, 1000*percentileOf(w.lat, 0.5), 1000*percentileOf(w.lat, 0.99), 1000*w.wall,
				pl.gets, float64(pl.bytes)/1e6, 1000*percentileOf(pl.lat, 0.5), 1000*percentileOf(pl.lat, 0.99), 1000*pl.wall)
		}
	}
	return nil
}

// quiesce waits, at most 10 s, until wharf's backend has made no request
// and returned no byte for 100 ms: its background fetches are done.
func quiesce(ctx context.Context, e *env) error {
	deadline := time.Now().Add(10 * time.Second)
	last := [2]int64{-1, -1}
	for time.Now().Before(deadline) {
		now := [2]int64{e.faulty.Requests(""), e.faulty.BytesReturned()}
		if now == last {
			return nil
		}
		last = now
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("shapes: wharf's backend reads did not settle within 10 s")
}

// minShapeSize is the smallest file the shapes workload runs on: two zarr
// chunks and a Parquet footer.
const minShapeSize = 1 << 20

// shapesKey is the file the shapes read, in the archive and (under
// "shapesplain/") as a plain object.
const shapesKey = "shapes/data.bin"

// packShapes writes the shapes workload's file of cfg.ShapeSize bytes as
// a plain object and as a one-file archive in cfg.ShapeFrame frames.
func packShapes(ctx context.Context, cfg Config, e *env) ([]byte, *cargopack.Result, error) {
	data, err := io.ReadAll(newMixedReader(cfg.Seed+2400, cfg.ShapeSize))
	if err != nil {
		return nil, nil, err
	}
	p := filepath.Join(e.dir, benchBucket, "shapesplain", filepath.FromSlash(shapesKey))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return nil, nil, err
	}
	mtime := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	res, err := cargopack.Write(ctx, cargopack.DirSink(e.dir), cargopack.FromMap(map[string][]byte{shapesKey: data}, mtime), cargopack.Options{
		Bucket: benchBucket, Prefix: "shapes", UploadID: "shapes",
		FrameSize: cfg.ShapeFrame, ChunkSize: 1 << 40, ShardCount: 1, ContentHash: true, Created: mtime,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("pack shapes file: %w", err)
	}
	return data, res, nil
}
