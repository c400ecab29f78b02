package s3api

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/auth"
)

func TestKeyLimiter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		max   int
		takes int // acquisitions attempted for key "a" without release
		admit int // how many of them must succeed
	}{
		{"unlimited", 0, 100, 100},
		{"one", 1, 3, 1},
		{"four", 4, 4, 4},
		{"four of six", 4, 6, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			l, err := newKeyLimiter(tc.max, reg)
			if err != nil {
				t.Fatal(err)
			}
			var rels []func()
			for i := 0; i < tc.takes; i++ {
				rel, ok := l.acquire("a")
				if ok != (i < tc.admit) {
					t.Fatalf("acquire %d: ok=%v, want %v", i, ok, i < tc.admit)
				}
				if ok {
					rels = append(rels, rel)
				}
			}
			if got := throttledCount(t, reg); got != float64(tc.takes-tc.admit) {
				t.Errorf("throttled counter %v, want %d", got, tc.takes-tc.admit)
			}
			// Another key has its own budget.
			if rel, ok := l.acquire("b"); !ok {
				t.Error("key b refused while only key a is busy")
			} else {
				rel()
			}
			// One release frees exactly one slot; a second call of the same
			// release is a no-op.
			if tc.max > 0 {
				rels[0]()
				rels[0]()
				if got := l.inflightFor("a"); got != tc.admit-1 {
					t.Errorf("in flight after one release: %d, want %d", got, tc.admit-1)
				}
				rel, ok := l.acquire("a")
				if !ok {
					t.Fatal("slot not freed by release")
				}
				rels[0] = rel
			}
			for _, r := range rels {
				r()
			}
			l.mu.Lock()
			n := len(l.inflight)
			l.mu.Unlock()
			if n != 0 {
				t.Errorf("limiter map keeps %d idle keys", n)
			}
		})
	}
}

func TestKeyLimiterMetricRegisteredAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := newKeyLimiter(0, reg); err != nil {
		t.Fatal(err)
	}
	if got := throttledCount(t, reg); got != 0 {
		t.Fatalf("wharf_throttled_requests_total = %v at start", got)
	}
	if _, err := newKeyLimiter(1, reg); err == nil {
		t.Fatal("registering twice on one registry did not fail")
	}
}

func TestLimitKey(t *testing.T) {
	v, err := auth.New(auth.Config{Keys: []auth.Key{{AccessKey: "AK1", SecretKey: "s"}}, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	anon := func(remote string) string {
		r, _ := http.NewRequest("GET", "http://x/b/k", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		id, err := v.Authenticate(r)
		if err != nil {
			t.Fatal(err)
		}
		return limitKey(id, r)
	}
	for _, tc := range []struct{ remote, want string }{
		{"192.0.2.1:5000", "anon/192.0.2.1"},
		{"192.0.2.1:6000", "anon/192.0.2.1"}, // same client, other connection: same budget
		// One IPv6 host holds a whole /64 (SLAAC privacy addresses rotate
		// within it): the /64 is one client, or one machine could take a
		// budget per address it picks.
		{"[2001:db8::1]:443", "anon/2001:db8::/64"},
		{"[2001:db8::ffff:1234]:443", "anon/2001:db8::/64"},
		{"[2001:db8:0:1::1]:443", "anon/2001:db8:0:1::/64"},
		{"[::ffff:192.0.2.1]:443", "anon/192.0.2.1"}, // IPv4-mapped: the IPv4 client
		{"[fe80::1%eth0]:443", "anon/fe80::/64"},
		{"weird", "anon/weird"},
	} {
		if got := anon(tc.remote); got != tc.want {
			t.Errorf("limitKey(anonymous from %s) = %q, want %q", tc.remote, got, tc.want)
		}
	}
	signed := func(ak string) auth.Identity {
		// Identities of signed requests come only from Authenticate; the
		// access key is all limitKey reads.
		return auth.Identity{AccessKey: ak}
	}
	r, _ := http.NewRequest("GET", "http://x/b/k", nil)
	r.RemoteAddr = "192.0.2.1:5000"
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AK1/...")
	if got := limitKey(signed("AK1"), r); got != "key:AK1" {
		t.Errorf("limitKey(AK1) = %q", got)
	}
	// Presigned (signed in the query, no Authorization header): per key
	// and client address, so a portal's browsers do not share one budget,
	// and one address is still held to the key's limit.
	for _, tc := range []struct{ remote, want string }{
		{"192.0.2.1:5000", "presigned:AK1/192.0.2.1"},
		{"192.0.2.1:6000", "presigned:AK1/192.0.2.1"},
		{"192.0.2.2:5000", "presigned:AK1/192.0.2.2"},
		{"[2001:db8::1]:443", "presigned:AK1/2001:db8::/64"},
		{"[2001:db8::2]:443", "presigned:AK1/2001:db8::/64"},
	} {
		r, _ := http.NewRequest("GET", "http://x/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=00", nil)
		r.RemoteAddr = tc.remote
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		if got := limitKey(signed("AK1"), r); got != tc.want {
			t.Errorf("limitKey(presigned AK1 from %s) = %q, want %q", tc.remote, got, tc.want)
		}
	}
}

func TestCarriesBody(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		cl     int64
		te     []string
		want   bool
	}{
		{"plain GET", "GET", 0, nil, false},
		{"GET with Content-Length", "GET", 5, nil, true},
		{"GET chunked", "GET", -1, []string{"chunked"}, true},
		{"HEAD chunked", "HEAD", -1, []string{"chunked"}, true},
		{"PUT with body", "PUT", 10, nil, true},
		{"DELETE without body", "DELETE", 0, nil, false},
	} {
		r, _ := http.NewRequest(tc.method, "http://x/", nil)
		r.ContentLength, r.TransferEncoding = tc.cl, tc.te
		if got := carriesBody(r); got != tc.want {
			t.Errorf("%s: carriesBody = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// throttledCount gathers wharf_throttled_requests_total from reg; it fails
// the test if the series is not there.
func throttledCount(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "wharf_throttled_requests_total" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("wharf_throttled_requests_total not registered")
	return 0
}
