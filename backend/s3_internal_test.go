package backend

import (
	"regexp"
	"testing"
	"time"
)

func TestParseContentRange(t *testing.T) {
	tests := []struct {
		in        string
		s, e, tot int64
		ok        bool
	}{
		{"bytes 0-9/10", 0, 9, 10, true},
		{"bytes 5-5/100", 5, 5, 100, true},
		{"bytes 0-9/9", 0, 0, 0, false},
		{"bytes 9-0/10", 0, 0, 0, false},
		{"bytes */10", 0, 0, 0, false},
		{"bytes 0-9/*", 0, 0, 0, false},
		{"bytes +1-9/10", 0, 0, 0, false},
		{"bytes 0-9 /10", 0, 0, 0, false},
		{"0-9/10", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	}
	for _, tc := range tests {
		s, e, tot, ok := parseContentRange(tc.in)
		if ok != tc.ok || (ok && (s != tc.s || e != tc.e || tot != tc.tot)) {
			t.Errorf("parseContentRange(%q) = %d %d %d %v", tc.in, s, e, tot, ok)
		}
	}
}

var contentRangeRE = regexp.MustCompile(`^bytes [0-9]+-[0-9]+/[0-9]+$`)

func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-9/10", "bytes 1-1/2", "bytes */10", "bytes 9223372036854775806-9223372036854775806/9223372036854775807", "bytes -1-2/3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, e, tot, ok := parseContentRange(in)
		if !ok {
			return
		}
		if s < 0 || e < s || tot <= e {
			t.Fatalf("%q: accepted inconsistent %d-%d/%d", in, s, e, tot)
		}
		if !contentRangeRE.MatchString(in) {
			t.Fatalf("%q accepted but is not bytes DIGITS-DIGITS/DIGITS", in)
		}
	})
}

func TestFullJitterBounds(t *testing.T) {
	j := fullJitter{base: 100 * time.Millisecond, max: 5 * time.Second}
	tests := []struct {
		attempt int
		ceil    time.Duration
	}{{0, 100 * time.Millisecond}, {1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {4, 800 * time.Millisecond},
		{6, 3200 * time.Millisecond}, {7, 5 * time.Second}, {40, 5 * time.Second}, {1000, 5 * time.Second}}
	for _, tc := range tests {
		var top time.Duration
		for range 200 {
			d, err := j.BackoffDelay(tc.attempt, nil)
			if err != nil || d < 0 || d > tc.ceil {
				t.Fatalf("attempt %d: delay %v (err %v), want within [0, %v]", tc.attempt, d, err, tc.ceil)
			}
			top = max(top, d)
		}
		if top < tc.ceil/4 {
			t.Fatalf("attempt %d: 200 delays all below %v: no spread", tc.attempt, top)
		}
	}
}
