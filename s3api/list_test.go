package s3api_test

import (
	"encoding/xml"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
)

type listResult struct {
	Name                  string
	Prefix                string
	Marker                string
	NextMarker            string
	StartAfter            string
	ContinuationToken     string
	NextContinuationToken string
	KeyCount              *int
	MaxKeys               int
	Delimiter             string
	IsTruncated           bool
	EncodingType          string
	Contents              []struct {
		Key          string
		LastModified string
		ETag         string
		Size         int64
		StorageClass string
		Owner        *struct{ ID string }
	}
	CommonPrefixes []struct{ Prefix string }
}

func (f *fixture) list(t testing.TB, q url.Values) listResult {
	t.Helper()
	resp, body := f.do(t, "GET", "/"+f.bucket+"?"+q.Encode(), nil)
	mustStatus(t, resp, body, 200)
	var r listResult
	if err := xml.Unmarshal(body, &r); err != nil {
		t.Fatalf("listing XML: %v\n%s", err, body)
	}
	return r
}

// refList is the brute-force reference: the full ordered sequence of keys
// and common prefixes for prefix/delimiter.
func refList(keys []string, prefix, delim string) []string {
	sort.Strings(keys)
	var out []string
	seen := map[string]bool{}
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if delim != "" {
			if i := strings.Index(k[len(prefix):], delim); i >= 0 {
				cp := k[:len(prefix)+i+len(delim)]
				if !seen[cp] {
					seen[cp] = true
					out = append(out, cp)
				}
				continue
			}
		}
		out = append(out, k)
	}
	return out
}

func pagingFiles() map[string][]byte {
	m := map[string][]byte{}
	for i := 0; i < 2500; i++ {
		var k string
		switch {
		case i%10 == 0:
			k = fmt.Sprintf("top-%04d", i) // top-level keys interleave with prefixes
		default:
			k = fmt.Sprintf("d%02d/f%04d", i%37, i)
		}
		m[k] = []byte(k)
	}
	return m
}

// Checklist 5, 6, 7, 9: v1 and v2, merged order, paging to the end returns
// every entry exactly once (2,500 keys; max-keys 1, 7, 1000).
func Test05to09Paging(t *testing.T) {
	files := pagingFiles()
	f := newFixture(t, files, fixtureOpts{anonymous: true})
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	for _, v2 := range []bool{false, true} {
		for _, delim := range []string{"", "/", "f00"} {
			for _, prefix := range []string{"", "d0"} {
				for _, mk := range []int{1, 7, 1000} {
					if mk == 1 && (prefix == "" && delim == "") && !v2 {
						// still run: 2,500 requests
					}
					name := fmt.Sprintf("v2=%v/delim=%q/prefix=%q/max=%d", v2, delim, prefix, mk)
					t.Run(name, func(t *testing.T) {
						want := refList(keys, prefix, delim)
						var got []string
						after := ""
						for page := 0; ; page++ {
							q := url.Values{"max-keys": {fmt.Sprint(mk)}, "prefix": {prefix}, "delimiter": {delim}}
							if v2 {
								q.Set("list-type", "2")
								if after != "" {
									q.Set("continuation-token", after)
								}
							} else if after != "" {
								q.Set("marker", after)
							}
							r := f.list(t, q)
							n := len(r.Contents) + len(r.CommonPrefixes)
							if n > mk {
								t.Fatalf("page %d has %d entries > max-keys %d", page, n, mk)
							}
							// Contents and CommonPrefixes merged in byte order.
							var pg []string
							for _, c := range r.Contents {
								pg = append(pg, c.Key)
							}
							for _, c := range r.CommonPrefixes {
								pg = append(pg, c.Prefix)
							}
							sort.Strings(pg)
							got = append(got, pg...)
							if v2 && (r.KeyCount == nil || *r.KeyCount != n) {
								t.Fatalf("KeyCount %v, want %d", r.KeyCount, n)
							}
							if !r.IsTruncated {
								if r.NextContinuationToken != "" || r.NextMarker != "" {
									t.Fatalf("last page carries a next token/marker")
								}
								break
							}
							if v2 {
								if r.NextContinuationToken == "" {
									t.Fatal("truncated v2 page without NextContinuationToken")
								}
								after = r.NextContinuationToken
							} else {
								if r.NextMarker == "" {
									t.Fatal("truncated v1 page without NextMarker")
								}
								if r.NextMarker != pg[len(pg)-1] {
									t.Fatalf("NextMarker %q, last entry %q", r.NextMarker, pg[len(pg)-1])
								}
								after = r.NextMarker
							}
							if page > len(keys)+1 {
								t.Fatal("paging does not terminate")
							}
						}
						if strings.Join(got, "\n") != strings.Join(want, "\n") {
							t.Fatalf("paged listing differs from reference: got %d entries, want %d", len(got), len(want))
						}
					})
				}
			}
		}
	}
	// Checklist 6: an empty delimiter and prefix behave as absent.
	all := f.list(t, url.Values{"delimiter": {""}, "prefix": {""}, "max-keys": {"1000"}})
	if len(all.CommonPrefixes) != 0 || len(all.Contents) != 1000 || all.Contents[0].Key != "d00/f0037" {
		t.Fatalf("empty delimiter: %d contents, %d prefixes, first %q", len(all.Contents), len(all.CommonPrefixes), all.Contents[0].Key)
	}
	byDir := f.list(t, url.Values{"delimiter": {"/"}, "list-type": {"2"}})
	for _, cp := range byDir.CommonPrefixes {
		if !strings.HasSuffix(cp.Prefix, "/") {
			t.Errorf("common prefix %q without trailing /", cp.Prefix)
		}
	}
	if len(byDir.CommonPrefixes) != 37 || len(byDir.Contents) != 250 {
		t.Errorf("delimiter=/: %d prefixes, %d keys", len(byDir.CommonPrefixes), len(byDir.Contents))
	}
}

// Checklist 8: max-keys default, cap, zero and invalid values.
func Test08MaxKeys(t *testing.T) {
	f := newFixture(t, pagingFiles(), fixtureOpts{anonymous: true})
	for _, v2 := range []string{"", "2"} {
		r := f.list(t, url.Values{"list-type": {v2}})
		if r.MaxKeys != 1000 || len(r.Contents) != 1000 || !r.IsTruncated {
			t.Errorf("default: MaxKeys %d, %d keys, truncated %v", r.MaxKeys, len(r.Contents), r.IsTruncated)
		}
		r = f.list(t, url.Values{"list-type": {v2}, "max-keys": {"5000"}})
		if r.MaxKeys != 1000 || len(r.Contents) != 1000 {
			t.Errorf("capped: MaxKeys %d, %d keys", r.MaxKeys, len(r.Contents))
		}
		r = f.list(t, url.Values{"list-type": {v2}, "max-keys": {"0"}})
		if r.MaxKeys != 0 || len(r.Contents) != 0 || len(r.CommonPrefixes) != 0 || r.IsTruncated {
			t.Errorf("max-keys=0: %+v", r)
		}
		for _, bad := range []string{"-1", "abc", "1.5", "99999999999999999999999"} {
			resp, body := f.do(t, "GET", "/bkt?list-type="+v2+"&max-keys="+bad, nil)
			wantError(t, resp, body, 400, "InvalidArgument")
		}
	}
	resp, body := f.do(t, "GET", "/bkt?encoding-type=gzip", nil)
	wantError(t, resp, body, 400, "InvalidArgument")
}

// Checklist 10: start-after, token precedence, garbage token.
func Test10StartAfterAndTokens(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	r := f.list(t, url.Values{"list-type": {"2"}, "start-after": {"dir/a.bin0"}}) // not a key
	if len(r.Contents) == 0 || r.Contents[0].Key != "dir/sub/b.json" || r.StartAfter != "dir/a.bin0" {
		t.Fatalf("start-after: first %q, StartAfter %q", r.Contents[0].Key, r.StartAfter)
	}
	p1 := f.list(t, url.Values{"list-type": {"2"}, "max-keys": {"2"}})
	if !p1.IsTruncated || p1.NextContinuationToken == "" {
		t.Fatal("page 1 not truncated")
	}
	// Token wins over start-after.
	p2 := f.list(t, url.Values{"list-type": {"2"}, "max-keys": {"2"}, "continuation-token": {p1.NextContinuationToken}, "start-after": {"zzz"}})
	if len(p2.Contents) != 2 || p2.Contents[0].Key <= p1.Contents[1].Key || p2.ContinuationToken != p1.NextContinuationToken {
		t.Fatalf("token did not win: %+v", p2)
	}
	// Marker (v1) past a non-existent key.
	v1 := f.list(t, url.Values{"marker": {"dir/sub/b"}})
	if v1.Contents[0].Key != "dir/sub/b.json" || v1.Marker != "dir/sub/b" {
		t.Fatalf("marker: %+v", v1.Contents[0])
	}
	for _, tok := range []string{"garbage", "%%%", "AAAAAAAA", p1.NextContinuationToken + "x"} {
		resp, body := f.do(t, "GET", "/bkt?list-type=2&continuation-token="+url.QueryEscape(tok), nil)
		e := wantError(t, resp, body, 400, "InvalidArgument")
		if e.Message != "The continuation token provided is incorrect" {
			t.Errorf("token %q: message %q", tok, e.Message)
		}
	}
}

// Checklist 11: encoding-type=url encodes every field AWS encodes.
func Test11EncodingType(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	special := []string{"a b", "a%41", "a+b", "ü"} // "x\ty" is refused by archiveview (C0 control byte); auth.URIEncode covers it in auth/uriencode_test.go
	for _, v2 := range []string{"", "2"} {
		raw := f.list(t, url.Values{"list-type": {v2}})
		enc := f.list(t, url.Values{"list-type": {v2}, "encoding-type": {"url"}})
		if raw.EncodingType != "" || enc.EncodingType != "url" {
			t.Fatalf("EncodingType raw %q enc %q", raw.EncodingType, enc.EncodingType)
		}
		if len(raw.Contents) != len(enc.Contents) {
			t.Fatal("encoded listing differs in length")
		}
		rawKeys := map[string]bool{}
		for i := range raw.Contents {
			rk, ek := raw.Contents[i].Key, enc.Contents[i].Key
			rawKeys[rk] = true
			if strings.ContainsAny(ek, " +\t") {
				t.Errorf("encoded key %q contains a raw space, plus or tab", ek)
			}
			// botocore decodes with unquote_plus; QueryUnescape is the same.
			dec, err := url.QueryUnescape(ek)
			if err != nil || dec != rk {
				t.Errorf("unquote_plus(%q) = %q, want %q", ek, dec, rk)
			}
		}
		for _, k := range special {
			if !rawKeys[k] {
				t.Errorf("key %q missing from listing", k)
			}
		}
		// Prefix, Delimiter, StartAfter/Marker and CommonPrefixes are encoded.
		q := url.Values{"list-type": {v2}, "encoding-type": {"url"}, "prefix": {"a "}, "delimiter": {" "}}
		if v2 == "2" {
			q.Set("start-after", "a +")
		} else {
			q.Set("marker", "a +")
		}
		r := f.list(t, q)
		if r.Prefix != "a%20" || r.Delimiter != "%20" {
			t.Errorf("Prefix %q Delimiter %q", r.Prefix, r.Delimiter)
		}
		if v2 == "2" && r.StartAfter != "a%20%2B" {
			t.Errorf("StartAfter %q", r.StartAfter)
		}
		if v2 == "" && r.Marker != "a%20%2B" {
			t.Errorf("Marker %q", r.Marker)
		}
		r = f.list(t, url.Values{"list-type": {v2}, "encoding-type": {"url"}, "delimiter": {"b"}, "max-keys": {"1"}})
		if len(r.CommonPrefixes) != 1 || r.CommonPrefixes[0].Prefix != "a%20b" {
			t.Errorf("encoded CommonPrefixes %+v", r.CommonPrefixes)
		}
		if v2 == "" && r.NextMarker != "a%20b" {
			t.Errorf("encoded NextMarker %q", r.NextMarker)
		}
	}
}

// Checklist 12: fetch-owner, KeyCount, StorageClass, ETag quoting.
func Test12FetchOwnerAndFields(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	for _, tc := range []struct {
		q     url.Values
		owner bool
	}{
		{url.Values{"list-type": {"2"}}, false},
		{url.Values{"list-type": {"2"}, "fetch-owner": {"false"}}, false},
		{url.Values{"list-type": {"2"}, "fetch-owner": {"true"}}, true},
		{url.Values{}, true}, // v1 always has Owner
	} {
		r := f.list(t, tc.q)
		for _, c := range r.Contents {
			if (c.Owner != nil) != tc.owner {
				t.Fatalf("%v: Owner present = %v", tc.q, c.Owner != nil)
			}
			if c.StorageClass != "STANDARD" || !strings.HasPrefix(c.ETag, `"`) || !strings.HasSuffix(c.ETag, `"`) || len(c.ETag) < 3 {
				t.Fatalf("entry %+v", c)
			}
			if len(c.LastModified) != len("2006-01-02T15:04:05.000Z") || !strings.HasSuffix(c.LastModified, ".000Z") {
				t.Fatalf("LastModified %q", c.LastModified)
			}
		}
	}
	r := f.list(t, url.Values{"list-type": {"2"}, "delimiter": {"/"}})
	if r.KeyCount == nil || *r.KeyCount != len(r.Contents)+len(r.CommonPrefixes) || len(r.CommonPrefixes) != 2 {
		t.Fatalf("KeyCount %v, %d contents, %d prefixes", r.KeyCount, len(r.Contents), len(r.CommonPrefixes))
	}
}
