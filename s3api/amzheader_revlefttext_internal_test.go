package s3api

import (
	"net/http"
	"slices"
	"testing"

	"github.com/wharf-s3/wharf/auth"
)

// TestAmzHeaderAllocs: amzHeader built a one-entry http.Header per
// request (an empty one when the request had no such parameter), so
// every listing request allocated a map to read
// x-amz-optional-object-attributes, which almost none sends. A request
// whose parameter is in its headers only (or nowhere) now reads them in
// place: no allocation. Only a presigned URL carrying it in its query
// gets a merged header. The values are those of amzValues in every case.
func TestAmzHeaderAllocs(t *testing.T) {
	const name = "x-amz-optional-object-attributes"
	plain := http.Header{"Authorization": {"AWS4-HMAC-SHA256 ..."}, "X-Amz-Date": {"20261202T000000Z"}}
	withHeader := plain.Clone()
	withHeader.Set(name, "RestoreStatus")
	listQuery := auth.Query{{Key: "list-type", Value: "2"}, {Key: "prefix", Value: "a/"}}
	presigned := append(slices.Clone(listQuery), auth.Param{Key: name, Value: "RestoreStatus"})
	for _, tc := range []struct {
		name      string
		h         http.Header
		q         auth.Query
		maxAllocs float64
	}{
		{"no such parameter", plain, listQuery, 0},
		{"in a header", withHeader, listQuery, 0},
		{"in a presigned query", plain, presigned, 5}, // as before: rare
		{"in both", withHeader, presigned, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := amzHeader(tc.h, tc.q, name).Values(name)
			if want := amzValues(tc.h, tc.q, name); !slices.Equal(got, want) {
				t.Errorf("amzHeader's values %q, want amzValues' %q", got, want)
			}
			n := testing.AllocsPerRun(1000, func() { _ = amzHeader(tc.h, tc.q, name) })
			t.Logf("amzHeader: %.0f allocations per request", n)
			if n > tc.maxAllocs {
				t.Errorf("amzHeader: %.0f allocations per request, want at most %.0f", n, tc.maxAllocs)
			}
		})
	}
}
