package faults

import "net/http"

// IgnorePutConditions is an S3 server (next) that does not enforce
// conditional writes: the If-None-Match and If-Match headers of every PUT
// are dropped before next sees the request, so a conditional PUT always
// overwrites, as on a store or proxy that ignores the condition. wharf must
// refuse such a store as a shared index cache (cmd/wharf probes it).
func IgnorePutConditions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			r = r.Clone(r.Context())
			r.Header.Del("If-None-Match")
			r.Header.Del("If-Match")
		}
		next.ServeHTTP(w, r)
	})
}
