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

// firstRead is workload 5: what checking a large file without frame
// checksums costs. A direct-upload object (the object is the file) has only
// the file's sha256, so the first ranged read of it reads the object whole
// through the planner's parallel parts and checks it before serving its
// range; later reads carry If-Match and read only their range. Compared
// with the same range of the object read directly.
func firstRead(ctx context.Context, cfg Config, e *env, rep *Report) error {
	size := cfg.LargeSize / 2
	data, err := io.ReadAll(newMixedReader(cfg.Seed+7000, size))
	if err != nil {
		return err
	}
	res, err := cargopack.Write(ctx, cargopack.DirSink(e.dir), cargopack.FromMap(map[string][]byte{"direct/big.bin": data}, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)),
		cargopack.Options{Bucket: benchBucket, Prefix: "firstread", UploadID: "firstread", Direct: true})
	if err != nil {
		return fmt.Errorf("pack direct file: %w", err)
	}
	if len(res.ObjectKeys) != 1 {
		return fmt.Errorf("direct upload wrote %d objects, want 1", len(res.ObjectKeys))
	}
	wl := fmt.Sprintf("5. First ranged read of a %d MiB direct-upload file (no frame checksums: checked whole first)", size>>20)
	const n = 1 << 20
	off := size / 2
	want := data[off : off+n]
	if _, err := e.serveArchive(ctx, res.ManifestKey, cfg.CacheBytes, -1); err != nil {
		return err
	}
	for i, what := range []string{"first ranged read (checks the whole object)", "second ranged read (already checked)"} {
		e.faulty.Reset()
		t0 := time.Now()
		at := off + int64(i)*n
		if err := rangedGet(ctx, e.client, "wharf", "direct/big.bin", at, data[at:at+n]); err != nil {
			return err
		}
		d := time.Since(t0).Seconds()
		rep.add(Row{Workload: wl, System: "wharf", Variant: what, Concurrency: 1, Metric: "wall", Value: 1000 * d, Unit: "ms"})
		rep.add(Row{Workload: wl, System: "wharf", Variant: what, Concurrency: 1, Metric: "backend GETs", Value: float64(getsOf(e.faulty))})
		rep.add(Row{Workload: wl, System: "wharf", Variant: what, Concurrency: 1, Metric: "backend MB", Value: float64(e.faulty.BytesReturned()) / 1e6})
		cfg.logf("direct %d MiB file, %s: %.0f ms, %.1f MB from the backend", size>>20, what, 1000*d, float64(e.faulty.BytesReturned())/1e6)
	}
	rawKey := filepath.ToSlash(filepath.Join("firstread-raw", "big.bin"))
	if _, err := writeRaw(e, rawKey, io.NopCloser(bytes.NewReader(data))); err != nil {
		return err
	}
	e.plain.use(e.faulty)
	t0 := time.Now()
	if err := rangedGet(ctx, e.plainClient, benchBucket, rawKey, off, want); err != nil {
		return err
	}
	rep.add(Row{Workload: wl, System: "per-object", Variant: "the same range of the plain object", Concurrency: 1, Metric: "wall", Value: 1000 * time.Since(t0).Seconds(), Unit: "ms"})
	os.RemoveAll(filepath.Join(e.dir, benchBucket, "firstread"))
	os.RemoveAll(filepath.Join(e.dir, benchBucket, "firstread-raw"))
	return nil
}

// rangedGet reads len(want) bytes of bucket/key at off and compares them
// with want.
func rangedGet(ctx context.Context, c *s3.Client, bucket, key string, off int64, want []byte) error {
	n := int64(len(want))
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))})
	if err != nil {
		return fmt.Errorf("get %s range: %w", key, err)
	}
	defer out.Body.Close()
	got, err := io.ReadAll(out.Body)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("get %s range at %d: bytes differ from the source", key, off)
	}
	return nil
}
