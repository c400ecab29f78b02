package bench

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestTimedGetAndRangedGet: the timed reads of the cold and first-read
// workloads, against the per-object baseline's server: the right bytes pass
// (first byte no later than the whole body), other bytes are an error.
func TestTimedGetAndRangedGet(t *testing.T) {
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.Latency, cfg.Bandwidth, cfg.TempDir = 0, 0, t.TempDir()
	e, err := newEnv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	data, err := io.ReadAll(newMixedReader(3, 300<<10))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeRaw(e, "raw/t.bin", io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	e.faulty.Reset()
	first, whole, err := timedGet(ctx, e.plainClient, benchBucket, "raw/t.bin", data)
	if err != nil || first <= 0 || first > whole {
		t.Fatalf("timedGet: first %v, whole %v, %v", first, whole, err)
	}
	// One GET of a plain object is one round trip to the modelled S3,
	// as on S3 (the baseline must not pay the latency twice).
	if n := e.faulty.Requests(""); n != 1 {
		t.Fatalf("one GET of the plain object made %d requests to the modelled store, want 1", n)
	}
	other := bytes.Clone(data)
	other[len(other)-1] ^= 1
	if _, _, err := timedGet(ctx, e.plainClient, benchBucket, "raw/t.bin", other); err == nil || !strings.Contains(err.Error(), "differ") {
		t.Fatalf("timedGet of other bytes: %v, want an error", err)
	}
	if err := rangedGet(ctx, e.plainClient, benchBucket, "raw/t.bin", 1000, data[1000:5000]); err != nil {
		t.Fatal(err)
	}
	if err := rangedGet(ctx, e.plainClient, benchBucket, "raw/t.bin", 1000, data[1001:5001]); err == nil {
		t.Fatal("rangedGet of other bytes: no error")
	}
}
