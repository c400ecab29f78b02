package bench

import (
	"bytes"
	"io"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestMixedReader: the mixed content is the same bytes however it is read,
// and compresses to about 0.6 of its size, as the workload says.
func TestMixedReader(t *testing.T) {
	const size = 8 << 20
	whole, err := io.ReadAll(newMixedReader(7, size))
	if err != nil || len(whole) != size {
		t.Fatalf("%d bytes, %v", len(whole), err)
	}
	var odd bytes.Buffer
	r := newMixedReader(7, size)
	buf := make([]byte, 1000003)
	for k := 1; ; k = k%7919 + 13 {
		n, err := r.Read(buf[:k])
		odd.Write(buf[:n])
		if err == io.EOF {
			break
		}
	}
	if !bytes.Equal(whole, odd.Bytes()) {
		t.Fatal("reads of other sizes give other bytes")
	}
	enc, _ := zstd.NewWriter(nil)
	ratio := float64(len(enc.EncodeAll(whole, nil))) / size
	if ratio < 0.5 || ratio > 0.7 {
		t.Errorf("zstd ratio %.2f, want about 0.6", ratio)
	}
	t.Logf("zstd ratio %.3f", ratio)
}
