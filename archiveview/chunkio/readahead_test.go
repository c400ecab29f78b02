package chunkio

import "testing"

// TestStreamEvidence: reads earn a readahead window only by tiling
// (starting where a recent read ended, within maxTileGap), each read
// continuing its own stream's run; random windows, adjacent or not, and
// backward runs earn none.
func TestStreamEvidence(t *testing.T) {
	const M = 1 << 20
	for _, tc := range []struct {
		name  string
		reads [][2]int64
		runs  []int // the run each read gets
	}{
		{"tree walk with tar headers", [][2]int64{{512, 1000}, {2048, 5000}, {5632, 9000}, {10240, 20000}},
			[]int{1, 2, 3, 4}},
		{"consecutive ranges", [][2]int64{{3 * M, 4 * M}, {4 * M, 5 * M}, {5 * M, 6 * M}, {6 * M, 7 * M}},
			[]int{0, 1, 2, 3}},
		{"concurrent ranges out of order", [][2]int64{{0, 8 * M}, {16 * M, 24 * M}, {8 * M, 16 * M}, {24 * M, 32 * M}, {32 * M, 40 * M}},
			[]int{1, 0, 2, 1, 2}},
		{"random windows", [][2]int64{{0, 16 << 10}, {100 * M, 100*M + 512<<10}, {30 * M, 30*M + 512<<10}, {47 * M, 47*M + 512<<10}, {48 * M, 48*M + 512<<10}},
			[]int{1, 0, 0, 0, 0}},
		{"backwards", [][2]int64{{9 * M, 10 * M}, {8 * M, 9 * M}, {7 * M, 8 * M}, {6 * M, 7 * M}},
			[]int{0, 0, 0, 0}},
		{"gap past maxTileGap", [][2]int64{{M, 2 * M}, {2*M + maxTileGap + 1, 3 * M}, {3*M + maxTileGap, 4 * M}},
			[]int{0, 0, 1}},
		{"two interleaved streams", [][2]int64{{10 * M, 11 * M}, {50 * M, 51 * M}, {11 * M, 12 * M}, {51 * M, 52 * M}, {12 * M, 13 * M}, {52 * M, 53 * M}},
			[]int{0, 0, 1, 1, 2, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e streamEvidence
			for i, r := range tc.reads {
				if got := e.record(r[0], r[1]); got != tc.runs[i] {
					t.Errorf("read %d [%d,%d): run %d, want %d", i, r[0], r[1], got, tc.runs[i])
				}
			}
		})
	}
}

func TestReadaheadFor(t *testing.T) {
	for _, tc := range []struct{ run, limit, want int }{
		{0, 8, 0}, {1, 8, 0}, {2, 8, 2}, {3, 8, 4}, {4, 8, 8}, {5, 8, 8}, {maxRun, 8, 8}, {3, 0, 0}, {3, 3, 3},
	} {
		if got := readaheadFor(tc.run, tc.limit); got != tc.want {
			t.Errorf("readaheadFor(%d, %d) = %d, want %d", tc.run, tc.limit, got, tc.want)
		}
	}
}
