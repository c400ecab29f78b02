package s3api_test

import (
	"encoding/xml"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
)

// A key longer than S3's 1024 bytes can be in an archive (a tar path has no
// such limit; a manifest path may have 4096 bytes). Paging past it with the
// NextContinuationToken wharf itself handed out must work: the token of a
// 3500-byte key was refused as "incorrect" (400) by the old code.
func TestListV2PagesPastLongKey(t *testing.T) {
	long := strings.Repeat("seg"+strings.Repeat("x", 96)+"/", 35) + "leaf" // 3504 bytes
	files := map[string][]byte{
		"a":  []byte("a"),
		long: []byte("long"),
		"z":  []byte("z"),
	}
	f := newFixture(t, files, fixtureOpts{anonymous: true})
	var got []string
	q := url.Values{"list-type": {"2"}, "max-keys": {"1"}}
	for i := 0; i < 10; i++ {
		r := f.list(t, q)
		for _, c := range r.Contents {
			got = append(got, c.Key)
		}
		if !r.IsTruncated {
			break
		}
		q.Set("continuation-token", r.NextContinuationToken)
	}
	want := []string{"a", long, "z"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("paged keys = %q, want %q", got, want)
	}
}

// A page of long keys is bounded in bytes: 600 keys of 4000 bytes (2.4 MB
// of names, 7 MB URL-encoded) are listed in pages whose names total about
// 1 MiB, truncated with the markers to continue; paging through them gives
// every key once, in order, in ListObjectsV2 (plain and URL-encoded),
// ListObjects and ListObjectVersions, and with a delimiter that rolls the
// long keys into long common prefixes. Before, one page held all 600 (the
// URL-encoded page was 7 MB, built in memory).
func TestListPageBoundedInBytes(t *testing.T) {
	const n, keyLen = 600, 4000
	files := map[string][]byte{}
	var keys, prefixes []string
	for i := 0; i < n; i++ {
		dir := fmt.Sprintf("%04d", i) + strings.Repeat("é", (keyLen-16)/2) // é is 2 bytes, 6 URL-encoded
		k := dir + "/leaf"
		files[k] = []byte{byte(i)}
		keys = append(keys, k)
		prefixes = append(prefixes, dir+"/")
	}
	sort.Strings(keys)
	sort.Strings(prefixes)
	f := newFixture(t, files, fixtureOpts{anonymous: true})

	type page struct {
		IsTruncated                        bool
		NextContinuationToken, NextMarker  string
		NextKeyMarker, NextVersionIdMarker string
		Contents, Version                  []struct{ Key string }
		CommonPrefixes                     []struct{ Prefix string }
	}
	for _, tc := range []struct {
		name  string
		q     url.Values
		next  func(q url.Values, p page)
		want  []string
		names func(p page) []string
	}{
		{"v2", url.Values{"list-type": {"2"}}, func(q url.Values, p page) { q.Set("continuation-token", p.NextContinuationToken) }, keys, nil},
		{"v2 url-encoded", url.Values{"list-type": {"2"}, "encoding-type": {"url"}}, func(q url.Values, p page) { q.Set("continuation-token", p.NextContinuationToken) }, keys, nil},
		{"v1", url.Values{}, func(q url.Values, p page) { q.Set("marker", p.NextMarker) }, keys, nil},
		{"versions", url.Values{"versions": {""}}, func(q url.Values, p page) {
			q.Set("key-marker", p.NextKeyMarker)
			q.Set("version-id-marker", p.NextVersionIdMarker)
		}, keys, nil},
		{"v2 delimiter", url.Values{"list-type": {"2"}, "delimiter": {"/"}}, func(q url.Values, p page) { q.Set("continuation-token", p.NextContinuationToken) }, prefixes, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			pages := 0
			for q := tc.q; pages < 20; pages++ {
				resp, body := f.do(t, "GET", "/"+f.bucket+"?"+q.Encode(), nil)
				mustStatus(t, resp, body, 200)
				if len(body) > 4<<20 {
					t.Fatalf("page %d is %d bytes", pages, len(body))
				}
				var p page
				if err := xml.Unmarshal(body, &p); err != nil {
					t.Fatal(err)
				}
				names := 0
				for _, c := range append(p.Contents, p.Version...) {
					k := c.Key
					if q.Get("encoding-type") == "url" {
						var err error
						if k, err = url.QueryUnescape(k); err != nil {
							t.Fatal(err)
						}
					}
					got = append(got, k)
					names += len(k)
				}
				for _, c := range p.CommonPrefixes {
					got = append(got, c.Prefix)
					names += len(c.Prefix)
				}
				if names > 1<<20+keyLen {
					t.Fatalf("page %d holds %d bytes of names, want at most 1 MiB and one key", pages, names)
				}
				if !p.IsTruncated {
					break
				}
				tc.next(q, p)
			}
			if pages < 2 {
				t.Errorf("%d page(s) for 2.4 MB of names, want at least 3", pages+1)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("paged %d names, want the %d in order", len(got), len(tc.want))
			}
		})
	}
}
