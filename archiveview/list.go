package archiveview

import (
	"runtime"
	"strings"
)

// List returns one page of the archive's keys and, with a Delimiter, common
// prefixes, merged in byte order, in O(log n + page):
//
//   - it seeks with a binary search to the first key > After and >= Prefix;
//   - with a Delimiter, a key that holds the Delimiter after Prefix rolls up
//     to its common prefix (Prefix + text up to and including the first
//     Delimiter); the prefix is emitted once and every key under it is
//     skipped with one more binary search, never scanned;
//   - entries <= After are skipped, so a common prefix equal to After skips
//     all its keys (continuation after a rolled-up prefix);
//   - MaxKeys counts keys and prefixes; MaxKeys <= 0 gives an empty, not
//     truncated page; Truncated is set only when another entry exists, and
//     NextAfter is then the Name of the last entry returned.
func (a *Archive) List(p ListParams) ListResult {
	return a.idx.list(p)
}

func (x *index) list(p ListParams) ListResult {
	defer runtime.KeepAlive(x)
	var res ListResult
	if p.MaxKeys <= 0 {
		return res
	}
	n := x.n()
	i := x.search(p.Prefix)
	if p.After >= p.Prefix {
		i = x.searchAfter(p.After)
	}
	for i < n {
		k := x.rawKey(i)
		if !strings.HasPrefix(k, p.Prefix) {
			break
		}
		var e ListEntry
		next := i + 1
		if p.Delimiter != "" {
			if j := strings.Index(k[len(p.Prefix):], p.Delimiter); j >= 0 {
				cp := k[:len(p.Prefix)+j+len(p.Delimiter)]
				next = x.skipPrefix(i, cp)
				if cp <= p.After {
					i = next
					continue
				}
				e.Prefix = x.own(cp)
			}
		}
		if len(res.Entries) == p.MaxKeys {
			res.Truncated = true
			res.NextAfter = res.Entries[len(res.Entries)-1].Name()
			return res
		}
		if e.Prefix == "" {
			e.File = x.file(i)
		}
		res.Entries = append(res.Entries, e)
		i = next
	}
	return res
}

// skipPrefix returns the first index after i whose key does not start with
// cp. Keys starting with cp are contiguous and key i is one of them, so the
// predicate is monotone on [i, n). It gallops (1, 2, 4, ... past i) before
// the binary search, so a small directory costs O(log its size), not
// O(log n).
func (x *index) skipPrefix(i int, cp string) int {
	defer runtime.KeepAlive(x)
	n := x.n()
	lo, step := i+1, 1
	hi := lo
	for hi < n && strings.HasPrefix(x.rawKey(hi), cp) {
		lo = hi + 1
		hi += step
		step *= 2
	}
	if hi > n {
		hi = n
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if strings.HasPrefix(x.rawKey(m), cp) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}
