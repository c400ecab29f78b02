package index

import (
	"runtime"
	"strings"
)

// List returns one page of the index's keys and common prefixes
// (archiveview.Archive.List documents the contract).
func (x *Index) List(p ListParams) (res ListResult) {
	if x.mm != nil {
		x.Must(func() { res = x.list(p) })
		return res
	}
	return x.list(p)
}

func (x *Index) list(p ListParams) ListResult {
	defer runtime.KeepAlive(x)
	var res ListResult
	if p.MaxKeys <= 0 {
		return res
	}
	n := x.N()
	names := 0 // bytes of the names in res.Entries
	i := x.Search(p.Prefix)
	if p.After >= p.Prefix {
		i = x.SearchAfter(p.After)
	}
	for i < n {
		k := x.RawKey(i)
		if !strings.HasPrefix(k, p.Prefix) {
			break
		}
		var e ListEntry
		next := i + 1
		if p.Delimiter != "" {
			if j := strings.Index(k[len(p.Prefix):], p.Delimiter); j >= 0 {
				cp := k[:len(p.Prefix)+j+len(p.Delimiter)]
				next = x.SkipPrefix(i, cp)
				if cp <= p.After {
					i = next
					continue
				}
				e.Prefix = x.Own(cp)
			}
		}
		if len(res.Entries) == p.MaxKeys || p.MaxNameBytes > 0 && names >= p.MaxNameBytes {
			res.Truncated = true
			res.NextAfter = res.Entries[len(res.Entries)-1].Name()
			return res
		}
		if e.Prefix == "" {
			e.File = x.File(i)
		}
		res.Entries = append(res.Entries, e)
		names += len(e.Name())
		i = next
	}
	return res
}

// SkipPrefix returns the first index after i whose key does not start with
// cp. Keys starting with cp are contiguous and key i is one of them, so the
// predicate is monotone on [i, n). It gallops (1, 2, 4, ... past i) before
// the binary search, so a small directory costs O(log its size), not
// O(log n).
func (x *Index) SkipPrefix(i int, cp string) int {
	defer runtime.KeepAlive(x)
	n := x.N()
	lo, step := i+1, 1
	hi := lo
	for hi < n && strings.HasPrefix(x.RawKey(hi), cp) {
		lo = hi + 1
		hi += step
		step *= 2
	}
	if hi > n {
		hi = n
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if strings.HasPrefix(x.RawKey(m), cp) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}
