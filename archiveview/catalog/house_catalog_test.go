package catalog

import "testing"

// TestCappedLog pins cappedLog's contract: the first max lines are
// logged one by one, the rest counted in quiet.
func TestCappedLog(t *testing.T) {
	for _, tc := range []struct {
		max, lines, logged, quiet int
	}{
		{max: 3, lines: 0, logged: 0, quiet: 0},
		{max: 3, lines: 2, logged: 2, quiet: 0},
		{max: 3, lines: 3, logged: 3, quiet: 0},
		{max: 3, lines: 7, logged: 3, quiet: 4},
		{max: 0, lines: 2, logged: 0, quiet: 2},
	} {
		c := cappedLog{max: tc.max}
		logged := 0
		for range tc.lines {
			if c.take() {
				logged++
			}
		}
		if logged != tc.logged || c.quiet != tc.quiet {
			t.Errorf("max %d, %d lines: %d logged, %d quiet; want %d, %d", tc.max, tc.lines, logged, c.quiet, tc.logged, tc.quiet)
		}
	}
}

// TestHistoryOfOne pins the two cases in which a history is its one
// version, shared by BuildHistory and HistoryChain.
func TestHistoryOfOne(t *testing.T) {
	for _, tc := range []struct {
		previous string
		limit    int
		want     string
	}{
		{"", 100, "the version served has no previous version"},
		{"", 1, "the version served has no previous version"},
		{"v1", 1, "the history limit (1 version)"},
		{"v1", 2, ""},
	} {
		if got := historyOfOne(tc.previous, tc.limit); got != tc.want {
			t.Errorf("historyOfOne(%q, %d) = %q, want %q", tc.previous, tc.limit, got, tc.want)
		}
	}
}
