package s3api_test

import (
	"net/url"
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
