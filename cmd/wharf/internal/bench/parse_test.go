package bench

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestParseStatusField: kB fields of /proc/PID/status come back in bytes;
// a missing field (or a prefix of another one) is -1.
func TestParseStatusField(t *testing.T) {
	const status = "Name:\twharf\nVmPeak:\t  123456 kB\nVmRSS:\t    2048 kB\nRssAnon:\t     100 kB\nRssFile:\t       0 kB\n"
	for _, c := range []struct {
		field string
		want  int64
	}{
		{"VmRSS", 2048 << 10},
		{"VmPeak", 123456 << 10},
		{"RssAnon", 100 << 10},
		{"RssFile", 0},
		{"Rss", -1},
		{"VmHWM", -1},
	} {
		if got := parseStatusField([]byte(status), c.field); got != c.want {
			t.Errorf("%s: got %d, want %d", c.field, got, c.want)
		}
	}
	if got := statusField(t.TempDir()+"/missing", "VmRSS"); got != -1 {
		t.Errorf("missing file: got %d, want -1", got)
	}
}

// TestPlainRange: every case the per-object baseline's Range parser
// documents, on a 100-byte object.
func TestPlainRange(t *testing.T) {
	for _, c := range []struct {
		h                  string
		off, n             int64
		partial, satisfied bool
	}{
		{"", 0, 100, false, true},
		{"bytes=0-9", 0, 10, true, true},
		{"bytes=90-200", 90, 10, true, true},
		{"bytes=50-", 50, 50, true, true},
		{"bytes=-10", 90, 10, true, true},
		{"bytes=-500", 0, 100, true, true},
		{"bytes=-0", 0, 0, false, false},
		{"bytes=100-", 0, 0, false, false},
		{"bytes=9-3", 0, 0, false, false},
		{"bytes=x-3", 0, 0, false, false},
		{"bytes=0-1,5-6", 0, 100, false, true}, // several ranges: the whole object
		{"items=0-9", 0, 100, false, true},
		{"bytes=7", 0, 100, false, true},
	} {
		off, n, partial, ok := plainRange(c.h, 100)
		if off != c.off || n != c.n || partial != c.partial || ok != c.satisfied {
			t.Errorf("%q: got (%d, %d, %v, %v), want (%d, %d, %v, %v)", c.h, off, n, partial, ok, c.off, c.n, c.partial, c.satisfied)
		}
	}
}

// TestCompareStream: the soak's body check counts every byte, reports a
// body that is short, long or different, and passes on the read error;
// the buffer's size does not change the answer.
func TestCompareStream(t *testing.T) {
	want := bytes.Repeat([]byte("0123456789"), 1000)
	other := bytes.Clone(want)
	other[7777] ^= 1
	cut := errors.New("cut")
	for _, c := range []struct {
		name string
		r    io.Reader
		n    int64
		same bool
		err  error
	}{
		{"exact", bytes.NewReader(want), 10000, true, nil},
		{"short", bytes.NewReader(want[:9000]), 9000, true, nil},
		{"long", bytes.NewReader(append(bytes.Clone(want), 'x')), 10001, false, nil},
		{"different", bytes.NewReader(other), 10000, false, nil},
		{"cut", io.MultiReader(bytes.NewReader(want[:4000]), iotest.ErrReader(cut)), 4000, true, cut},
	} {
		for _, size := range []int{1, 7, 4096, 64 << 10} {
			n, same, err := compareStream(c.r, want, make([]byte, size))
			if n != c.n || same != c.same || !errors.Is(err, c.err) {
				t.Errorf("%s, buffer %d: got (%d, %v, %v), want (%d, %v, %v)", c.name, size, n, same, err, c.n, c.same, c.err)
			}
			if s, ok := c.r.(io.Seeker); ok {
				s.Seek(0, io.SeekStart)
			} else {
				break
			}
		}
	}
}

// TestMedianOf: the middle value (the upper one of an even count), the
// input left as it was.
func TestMedianOf(t *testing.T) {
	v := []float64{3, 1, 2}
	if got := medianOf(v); got != 2 || v[0] != 3 || v[1] != 1 {
		t.Errorf("medianOf(3, 1, 2) = %v, input now %v", got, v)
	}
	if got := medianOf([]float64{4, 1, 3, 2}); got != 3 {
		t.Errorf("medianOf(4, 1, 3, 2) = %v, want 3", got)
	}
	if got := medianOf([]float64{5}); got != 5 {
		t.Errorf("medianOf(5) = %v", got)
	}
}
