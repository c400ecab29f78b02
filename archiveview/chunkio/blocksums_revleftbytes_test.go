package chunkio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestRangeAfterCheckVerified: a ranged read of a span whose whole check
// passed once is checked again, block by block, against the sums that
// check took: a byte flipped in transit on a later GET is never served.
// Flipped once, the block is read again and the right bytes served;
// flipped on every GET, the read fails with ErrChecksum. Before, the
// later GET's bytes were served as they came (only TLS protected them).
func TestRangeAfterCheckVerified(t *testing.T) {
	good := make([]byte, 3<<20+12345)
	for i := range good {
		good[i] = byte(i*13 + i>>11)
	}
	const key = "s/uploads/u/files/d"
	const flipAt = 2_000_000
	for _, tc := range []struct {
		name   string
		kind   Kind
		extent bool // the extent's own sum (a UnitExtent), else the object's
		always bool
	}{
		{"direct object, flipped once", Direct, false, false},
		{"direct object, flipped always", Direct, false, true},
		{"plain extent, flipped once", PlainTar, true, false},
		{"plain extent, flipped always", PlainTar, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, good, 0o644); err != nil {
				t.Fatal(err)
			}
			var armed atomic.Bool
			var flips atomic.Int32
			store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
				if !armed.Load() || r.Op != "range" || r.Off > flipAt || r.Off+r.Len <= flipAt {
					return faults.Fault{}
				}
				if !tc.always && flips.Add(1) > 1 {
					return faults.Fault{}
				}
				return faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{flipAt}}
			}})
			sum := sha256.Sum256(good)
			c := Chunk{Key: key, Kind: tc.kind, Size: int64(len(good))}
			e := Extent{Chunk: 0, Off: 0, Length: int64(len(good))}
			if tc.extent {
				e.Sum, e.HasSum = sum, true
			} else {
				c.Sum, c.HasSum = sum, true
			}
			if tc.kind == PlainTar {
				// A member at offset 512 after its header would need one;
				// read it as the object's bytes from 0 (Direct-like base).
				e.Off = 512
				e.Length -= 512
				if tc.extent {
					e.Sum = sha256.Sum256(good[512:])
				}
			}
			set := NewSet(store, "bkt", []Chunk{c}, Options{SmallVerifyBytes: -1})
			defer set.Close()
			// The header check of a plain member reads bytes 0-512: that
			// is not a tar header here, so mark it checked.
			set.state(0).hdrOK.Store(hdrKey{off: e.Off, name: e.TarName, length: e.Length}, struct{}{})
			read := func(start, n int64) ([]byte, error) {
				src, err := set.OpenExtent(context.Background(), e, start, n)
				if err != nil {
					return nil, err
				}
				sr := &segReader{src: src}
				defer sr.Close()
				return io.ReadAll(sr)
			}
			base := e.Off
			if got, err := read(1000, 100); err != nil || !bytes.Equal(got, good[base+1000:base+1100]) {
				t.Fatalf("first read (the check): %v (%d bytes; first %x want %x)", err, len(got), got[:min(8, len(got))], good[base+1000:base+1008])
			}
			armed.Store(true)
			start := int64(flipAt-5000) - base
			got, err := read(start, 10000)
			switch {
			case err == nil && !bytes.Equal(got, good[base+start:base+start+10000]):
				t.Fatalf("a byte flipped in transit after the span's check was served (byte %d: %#x, want %#x)", flipAt, got[flipAt-base-start], good[flipAt])
			case tc.always && !errors.Is(err, ErrChecksum):
				t.Fatalf("flipped on every GET: %v, want a checksum mismatch", err)
			case !tc.always && err != nil:
				t.Fatalf("flipped once: %v, want the right bytes read again", err)
			}
			if flips.Load() == 0 && !tc.always {
				t.Fatal("no GET was flipped")
			}
		})
	}
}
