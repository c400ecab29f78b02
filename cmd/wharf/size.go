package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// parseSize parses a byte count, the one size syntax of every wharf flag and
// config key: a whole number with an optional suffix, case-insensitive:
// binary K, Ki, KiB, M, Mi, MiB, G, Gi, GiB, T, Ti, TiB (powers of 1024);
// decimal KB, MB, GB, TB (powers of 1000); or B.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("size %q: want a number with an optional KiB/MiB/GiB/TiB (or KB/MB/GB/TB) suffix", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	var mult int64
	switch strings.ToLower(strings.TrimSpace(t[i:])) {
	case "", "b":
		mult = 1
	case "k", "ki", "kib":
		mult = 1 << 10
	case "m", "mi", "mib":
		mult = 1 << 20
	case "g", "gi", "gib":
		mult = 1 << 30
	case "t", "ti", "tib":
		mult = 1 << 40
	case "kb":
		mult = 1e3
	case "mb":
		mult = 1e6
	case "gb":
		mult = 1e9
	case "tb":
		mult = 1e12
	default:
		return 0, fmt.Errorf("size %q: unknown suffix %q (want KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s, t[i:])
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n * mult, nil
}
