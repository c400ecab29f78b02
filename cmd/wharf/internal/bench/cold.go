package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// coldFrames is workload 2b: cold reads of single files whose covering
// frame is 16 MiB, with a fresh cache for each read, against the same
// files stored as plain objects. The files are 1 MiB of mixed content
// (zstd ~0.6), so each frame holds 16 of them and its compressed span is
// about 10 MB: over one S3 connection that alone takes ~100 ms. It reports
// the median time to the first body byte and to the whole body, and,
// timed at wharf's backend (fetchClock), to the first backend response and
// to the frame fetched (its last part consumed): what the rest of the time
// is the decode, hash and serve of the frame.
func coldFrames(ctx context.Context, cfg Config, e *env, rep *Report) error {
	const fileSize = 1 << 20
	n := cfg.ColdFiles
	files := map[string][]byte{}
	var rels []string
	for i := 0; i < n; i++ {
		rel := fmt.Sprintf("cold/%03d.bin", i)
		b, err := io.ReadAll(newMixedReader(cfg.Seed+5000+uint64(i), fileSize))
		if err != nil {
			return err
		}
		files[rel] = b
		rels = append(rels, rel)
		p := filepath.Join(e.dir, benchBucket, "coldplain", filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	mtime := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	res, err := cargopack.Write(ctx, cargopack.DirSink(e.dir), cargopack.FromMap(files, mtime), cargopack.Options{
		Bucket: benchBucket, Prefix: "cold", UploadID: "cold-16m",
		FrameSize: 16 << 20, ChunkSize: 1 << 30, ShardCount: 1, ContentHash: true, Created: mtime,
	})
	if err != nil {
		return fmt.Errorf("pack cold tree: %w", err)
	}
	wl := "2b. Cold single-file reads, 16 MiB frames (1 MiB files, zstd ~0.6; fresh cache per read)"
	reads := min(n, 15)
	// With the HTTP model each read is made twice, interleaved: by a
	// running wharf (its backend client and connections already in use)
	// and by a freshly started one (a new S3Store: a new SDK client, its
	// first connections dialled by this read).
	type side struct {
		first, whole []float64
		hdr, fetched []float64 // first backend response, last part consumed
		bytes, gets  int64
		conns        int64
	}
	var running, fresh side
	var pFirst, pWhole []float64
	_, viaHTTP := e.backendConns()
	e.clock = &fetchClock{}
	defer func() { e.clock = nil }()
	passes := 1
	if viaHTTP {
		passes = 2
	}
	for i := 0; i < passes*reads; i++ {
		rel := rels[(i/passes*7+3)%n]
		sd := &running
		if passes == 2 && i%2 == 0 {
			sd = &fresh
			if _, err := e.renewBacking(ctx); err != nil {
				return err
			}
		}
		if _, err := e.serveArchive(ctx, res.ManifestKey, cfg.CacheBytes, -1); err != nil {
			return err
		}
		e.faulty.Reset()
		conns0, _ := e.backendConns()
		e.clock.reset(time.Now())
		first, whole, err := timedGet(ctx, e.client, "wharf", rel, files[rel])
		if err != nil {
			return err
		}
		sd.first, sd.whole = append(sd.first, first), append(sd.whole, whole)
		hdr, fetched := e.clock.times()
		sd.hdr, sd.fetched = append(sd.hdr, hdr.Seconds()), append(sd.fetched, fetched.Seconds())
		sd.bytes += e.faulty.BytesReturned()
		sd.gets += getsOf(e.faulty)
		conns1, _ := e.backendConns()
		sd.conns += conns1 - conns0
		if sd == &fresh {
			continue
		}
		e.plain.use(e.faulty)
		first, whole, err = timedGet(ctx, e.plainClient, benchBucket, "coldplain/"+rel, files[rel])
		if err != nil {
			return err
		}
		pFirst, pWhole = append(pFirst, first), append(pWhole, whole)
	}
	var frameC float64
	var frames int
	for _, c := range res.Manifest.Chunks {
		for _, f := range c.Frames {
			if f.UncompressedSize >= 8<<20 {
				frameC += float64(f.CompressedSize)
				frames++
			}
		}
	}
	v := fmt.Sprintf("%d reads", reads)
	rep.add(Row{Workload: wl, System: "source", Variant: "16 MiB frames", Metric: "compressed MB per frame", Value: frameC / float64(max(frames, 1)) / 1e6, Unit: "MB"})
	type named struct {
		sys string
		sd  *side
	}
	sides := []named{{"wharf", &running}}
	if viaHTTP {
		sides = append(sides, named{"wharf, freshly started (new S3 client)", &fresh})
	}
	for _, x := range sides {
		sd := x.sd
		rep.add(Row{Workload: wl, System: x.sys, Variant: v, Concurrency: 1, Metric: "median first byte", Value: 1000 * medianOf(sd.first), Unit: "ms"})
		rep.add(Row{Workload: wl, System: x.sys, Variant: v, Concurrency: 1, Metric: "median whole body", Value: 1000 * medianOf(sd.whole), Unit: "ms"})
		rep.add(Row{Workload: wl, System: x.sys, Variant: v, Concurrency: 1, Metric: "median first backend response", Value: 1000 * medianOf(sd.hdr), Unit: "ms"})
		rep.add(Row{Workload: wl, System: x.sys, Variant: v, Concurrency: 1, Metric: "median frame fetched", Value: 1000 * medianOf(sd.fetched), Unit: "ms"})
		rep.add(Row{Workload: wl, System: x.sys, Variant: v, Concurrency: 1, Metric: "backend GETs per read", Value: float64(sd.gets) / float64(reads)})
		rep.add(Row{Workload: wl, System: x.sys, Variant: v, Concurrency: 1, Metric: "backend MB per read", Value: float64(sd.bytes) / float64(reads) / 1e6, Unit: "MB"})
		if viaHTTP {
			rep.add(Row{Workload: wl, System: x.sys, Variant: v, Concurrency: 1, Metric: "backend connections opened per read", Value: float64(sd.conns) / float64(reads)})
		}
	}
	rep.add(Row{Workload: wl, System: "per-object", Variant: v, Concurrency: 1, Metric: "median first byte", Value: 1000 * medianOf(pFirst), Unit: "ms"})
	rep.add(Row{Workload: wl, System: "per-object", Variant: v, Concurrency: 1, Metric: "median whole body", Value: 1000 * medianOf(pWhole), Unit: "ms"})
	for _, x := range sides {
		r := medianOf(x.sd.whole) / medianOf(pWhole)
		rep.add(Row{Workload: wl, System: x.sys, Variant: v, Concurrency: 1, Metric: "median whole body / per-object", Value: r, Unit: "x"})
		name := "cold read of a file in a 16 MiB frame, median whole body vs the plain object"
		if x.sd == &fresh {
			name += ", freshly started wharf"
		}
		rep.target(name, fmt.Sprintf("%.2fx (%.0f ms vs %.0f ms)", r, 1000*medianOf(x.sd.whole), 1000*medianOf(pWhole)), "<= 2x (issue 24)", r <= 2)
		cfg.logf("cold 16 MiB frames, %s: first backend response %.0f ms, frame fetched %.0f ms, first byte %.0f ms, whole %.0f ms; plain object %.0f / %.0f ms; %.1f GETs, %.1f MB and %.1f new connections per read",
			x.sys, 1000*medianOf(x.sd.hdr), 1000*medianOf(x.sd.fetched), 1000*medianOf(x.sd.first), 1000*medianOf(x.sd.whole), 1000*medianOf(pFirst), 1000*medianOf(pWhole),
			float64(x.sd.gets)/float64(reads), float64(x.sd.bytes)/float64(reads)/1e6, float64(x.sd.conns)/float64(reads))
	}
	os.RemoveAll(filepath.Join(e.dir, benchBucket, "cold"))
	os.RemoveAll(filepath.Join(e.dir, benchBucket, "coldplain"))
	return nil
}

// timedGet GETs bucket/key and returns the seconds to the first body byte
// and to the whole body, checking the bytes.
func timedGet(ctx context.Context, c *s3.Client, bucket, key string, want []byte) (first, whole float64, err error) {
	t0 := time.Now()
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return 0, 0, fmt.Errorf("get %s: %w", key, err)
	}
	defer out.Body.Close()
	var buf bytes.Buffer
	buf.Grow(len(want) + bytes.MinRead) // the body and the read that sees its end
	var b [1]byte
	if k, err := io.ReadFull(out.Body, b[:]); err != nil || k != 1 {
		return 0, 0, fmt.Errorf("get %s: first byte: %v", key, err)
	}
	first = time.Since(t0).Seconds()
	buf.WriteByte(b[0])
	if _, err := io.Copy(&buf, out.Body); err != nil {
		return 0, 0, fmt.Errorf("get %s: %w", key, err)
	}
	whole = time.Since(t0).Seconds()
	if !bytes.Equal(buf.Bytes(), want) {
		return 0, 0, fmt.Errorf("get %s: bytes differ from the source", key)
	}
	return first, whole, nil
}
