package s3api

// Request limits applied by ServeHTTP around the handlers:
//
//   - a per-key concurrency limit: at most Config.MaxInflightPerKey requests
//     of one caller (limitKey: an access key; a presigning key per client
//     address; an anonymous client address) are served at a time; the next one is answered
//     503 SlowDown at once (never queued), which every S3 SDK retries with
//     backoff. The slot is taken after authentication and authorization and
//     held until the handler returns, that is until the response body has
//     been streamed (or the stream aborted).
//   - connection hygiene: a request with a body (which wharf never reads,
//     and whose framing a proxy in front of wharf might read differently)
//     is answered with "Connection: close", so bytes after the refused
//     request are never parsed as another request.

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/auth"
)

// errClientThrottled is wrapped by the cause of every refusal the
// client's own rate caused: 503 SlowDown over --max-inflight-per-key or
// over its key's restore budget (restorebudget.go). The access line (finish)
// logs such a request at info, not as wharf's failure, so that one client
// asking again and again cannot flood the warnings.
var errClientThrottled = errors.New("throttled for the client's own rate")

// keyLimiter admits at most max concurrent requests per limit key. Its map
// holds only keys with requests in flight, so it is bounded by the number of
// concurrent requests, not by the number of callers ever seen.
type keyLimiter struct {
	max       int // 0 = unlimited
	throttled prometheus.Counter

	mu       sync.Mutex
	inflight map[string]int
}

// newKeyLimiter returns a limiter of max requests per key (0 = unlimited)
// whose rejections are counted by wharf_throttled_requests_total on reg
// (nil = not registered). The counter exists, at zero, also when unlimited.
func newKeyLimiter(max int, reg prometheus.Registerer) (*keyLimiter, error) {
	l := &keyLimiter{
		max:      max,
		inflight: map[string]int{},
		throttled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_throttled_requests_total",
			Help: "Requests answered 503 SlowDown because their access key (or anonymous client address) had --max-inflight-per-key requests in flight.",
		}),
	}
	if reg != nil {
		if err := reg.Register(l.throttled); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// acquire takes a slot for key. It never blocks: ok is false when key has
// max requests in flight. release must be called exactly once when ok.
func (l *keyLimiter) acquire(key string) (release func(), ok bool) {
	if l.max <= 0 {
		return func() {}, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[key] >= l.max {
		l.throttled.Inc()
		return nil, false
	}
	l.inflight[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if n := l.inflight[key] - 1; n > 0 {
				l.inflight[key] = n
			} else {
				delete(l.inflight, key)
			}
		})
	}, true
}

// inflightFor reports the requests in flight for key (tests, debugging).
func (l *keyLimiter) inflightFor(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight[key]
}

// limitKey is the key a request's concurrency is counted under:
//
//   - a request signed in its Authorization header: the access key (one
//     key is one client: an SDK, a tool);
//   - a presigned request (signed in its query, no Authorization header):
//     the access key AND the client's IP address, because a portal that
//     signs URLs with one key hands them to many browsers, which must not
//     share one budget; one address still cannot take more than the
//     limit of that key;
//   - an anonymous request: the client's IP address, so that one anonymous
//     client cannot take every other anonymous client's slots.
//
// The address is RemoteAddr as the listener saw it (X-Forwarded-For is not
// trusted), an IPv6 one taken as its /64 (clientAddr): behind a reverse
// proxy every client shares the proxy's address, and so one budget per key. The prefixes keep the spaces apart
// (an access key cannot contain ':' or '/').
func limitKey(id auth.Identity, r *http.Request) string {
	host := clientAddr(r.RemoteAddr)
	switch {
	case id.Anonymous():
		return "anon/" + host
	case r.Header.Get("Authorization") == "":
		return "presigned:" + id.AccessKey + "/" + host
	}
	return "key:" + id.AccessKey
}

// ClientKey is the client a request of identity id counts as for the
// per-key limits and the read-memory share (limitKey): the console
// charges its visitors' reads to it (chunkio.WithClient), so a visitor
// and its S3 requests are one client.
func ClientKey(id auth.Identity, r *http.Request) string { return limitKey(id, r) }

// Admit takes one of client's --max-inflight-per-key slots
// (Config.MaxInflightPerKey) of h, a handler New returned, for a request
// served beside the S3 handlers (the console), so that a client's console
// and S3 requests share one limit. ok is false when client has the limit
// in flight (answer 503 with Retry-After); release must then not be
// called, and otherwise exactly once. A handler New did not return admits
// everything.
func Admit(h http.Handler, client string) (release func(), ok bool) {
	s, isServer := h.(*server)
	if !isServer {
		return func() {}, true
	}
	return s.limit.acquire(client)
}

// clientAddr is the client a remote address counts as: an IPv4 address
// (also IPv4-mapped IPv6) itself, an IPv6 address its /64 (one host holds
// a whole /64 and may pick any address in it: counted per address, one
// machine would have as many budgets as it liked), anything else as it is.
func clientAddr(remote string) string {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, err := ip.WithZone("").Prefix(64)
	if err != nil {
		return host
	}
	return p.String()
}

// carriesBody reports whether r has a request body (a non-zero
// Content-Length or any Transfer-Encoding). wharf never reads one: GET and
// HEAD with a body are refused by authentication (400 InvalidRequest), writes
// with AccessDenied. Such a connection is closed after the response, because
// a proxy in front of wharf may frame the body differently from net/http
// (which, given both Transfer-Encoding and Content-Length, drops the latter
// and reads chunked): whatever follows the refused request on that
// connection is never parsed as another request.
func carriesBody(r *http.Request) bool {
	return r.ContentLength != 0 || len(r.TransferEncoding) > 0
}
