package peer

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// lockedBuffer is a log sink safe for the handlers' goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sentTo is r (headers and all, its MAC untouched) sent to the replica at
// base instead.
func sentTo(t *testing.T, r *http.Request, base string) *http.Request {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Clone(context.Background())
	c.URL.Scheme, c.URL.Host, c.Host = u.Scheme, u.Host, ""
	return c
}

// TestPeerRequestBoundToOwner: a request's MAC names the owner it is
// addressed to, so a request captured on its way to replica A is served
// by A once and refused by every other replica. Three replicas: the
// sender, A and B, all with the archive open. Before the destination was
// MAC'd (each owner's replay cache is its own), the capture replayed to
// B got 200 and the whole frame.
func TestPeerRequestBoundToOwner(t *testing.T) {
	dir, key, files := testArchive(t, 4)
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	logs := make([]*lockedBuffer, 3)
	var rec *recorder
	rs := newFleet(t, 3, store, key, fleetOpts{
		cfg: func(i int, c *Config) {
			logs[i] = &lockedBuffer{}
			c.Logger = zerolog.New(logs[i])
		},
		peers: func(i int, g *Group) chunkio.Peers {
			if i != 0 {
				return g
			}
			rec = &recorder{Group: g}
			return rec
		}})
	id := someFrame(t, rs, rec, files)
	sender, a, b := rs[0], rs[1], rs[2]
	captured := signedNonce(t, sender.group, a.url, id, time.Now(), "0123456789abcdef0123456789abcdef", nil)
	rewritten := sentTo(t, captured, b.url)
	rewritten.Header.Set(hdrTo, b.url) // the MAC still names A
	for _, st := range []struct {
		name string
		to   *replica
		req  *http.Request
		code int
		// replays and misaddressed: what the receiving replica counts
		// in wharf_peer_replays_total and wharf_peer_misaddressed_total.
		replays, misaddressed float64
	}{
		{"to A", a, captured, http.StatusOK, 0, 0},
		{"replayed to A", a, captured, http.StatusForbidden, 1, 0},
		{"replayed to B", b, sentTo(t, captured, b.url), http.StatusForbidden, 0, 1},
		{"replayed to B again", b, sentTo(t, captured, b.url), http.StatusForbidden, 0, 1},
		{"replayed to B, destination rewritten to B", b, rewritten, http.StatusForbidden, 0, 0},
		{"replayed to the sender", sender, sentTo(t, captured, sender.url), http.StatusForbidden, 0, 1},
		{"a fresh request to B", b, signed(t, sender.group, b.url, id, time.Now(), nil), http.StatusOK, 0, 0},
	} {
		m := st.to.group.m
		replays, mis := testutil.ToFloat64(m.replays), testutil.ToFloat64(m.misaddressed)
		served := testutil.ToFloat64(m.served.WithLabelValues(itoa(st.code)))
		before := store.Requests("")
		code, n := send(t, st.req)
		if code != st.code {
			t.Fatalf("%s: %d with %d bytes, want %d", st.name, code, n, st.code)
		}
		if code == http.StatusOK && int64(n) != id.Size || code != http.StatusOK && n != 0 {
			t.Errorf("%s: %d with %d bytes (the frame is %d)", st.name, code, n, id.Size)
		}
		if code != http.StatusOK {
			if d := store.Requests("") - before; d != 0 {
				t.Errorf("%s: the refusal cost %d backend requests", st.name, d)
			}
		}
		if d := testutil.ToFloat64(m.served.WithLabelValues(itoa(st.code))) - served; d != 1 {
			t.Errorf("%s: wharf_peer_requests_served_total{code=%d} grew by %v, want 1", st.name, st.code, d)
		}
		if d := testutil.ToFloat64(m.replays) - replays; d != st.replays {
			t.Errorf("%s: wharf_peer_replays_total grew by %v, want %v", st.name, d, st.replays)
		}
		if d := testutil.ToFloat64(m.misaddressed) - mis; d != st.misaddressed {
			t.Errorf("%s: wharf_peer_misaddressed_total grew by %v, want %v", st.name, d, st.misaddressed)
		}
	}
	// B says at once why, naming both names (the next refusals within
	// the period are counted, not logged).
	if want := "request addressed to " + a.url + ", this replica is " + b.url; strings.Count(logs[2].String(), want) != 1 {
		t.Errorf("B's log: want one line saying %q:\n%s", want, logs[2].String())
	}
	if logs[1].String() != "" && strings.Contains(logs[1].String(), "addressed to") {
		t.Errorf("A logged a misaddressed request:\n%s", logs[1].String())
	}
}

// handlerTransport answers every request with h, whatever its URL (so an
// asker can address an owner by any name, https and dns+ members too,
// without TLS or DNS).
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, r)
	return w.Result(), nil
}

// TestPeerRingNamesAgree: in every supported configuration the name the
// asker's ring gives an owner (a static --peers entry, or a dns+ member's
// resolved address) is the owner's own name (its --peer-advertise as
// parsed), however each is spelled, so the owner takes the asker's
// requests as addressed to it: authenticated, then 404 for a frame of no
// open archive. An owner advertising a name its dns+ address does not
// give refuses them (403) and says both names.
func TestPeerRingNamesAgree(t *testing.T) {
	const svc = "dns+http://wharf-peers.ns.svc:7946"
	for _, tc := range []struct {
		name string
		// asker and owner are the replicas' --peer-advertise; peers
		// their (common) --peers; addrs what the Service resolves to.
		asker, owner string
		peers        []string
		addrs        []string
		// want is the asker's ring name of the owner.
		want    string
		refused bool
	}{
		{name: "http, addresses", asker: "http://10.0.0.1:7946", owner: "http://10.0.0.2:7946",
			peers: []string{"http://10.0.0.1:7946", "http://10.0.0.2:7946"}, want: "http://10.0.0.2:7946"},
		{name: "https, host names spelled differently", asker: "https://wharf-0.peers.example:7946", owner: "HTTPS://WHARF-1.peers.example:7946/",
			peers: []string{"https://wharf-0.peers.example:7946", "https://Wharf-1.Peers.Example:7946"}, want: "https://wharf-1.peers.example:7946"},
		{name: "http, IPv6 spelled differently", asker: "http://[fd00::1]:7946", owner: "http://[fd00:0:0:0::2]:7946",
			peers: []string{"http://[fd00::1]:7946", "http://[FD00::2]:7946"}, want: "http://[fd00::2]:7946"},
		{name: "http, IPv4-mapped advertise", asker: "http://10.0.0.1:7946", owner: "http://[::ffff:10.0.0.2]:7946",
			peers: []string{"http://10.0.0.1:7946", "http://10.0.0.2:7946"}, want: "http://10.0.0.2:7946"},
		{name: "dns+http, advertise http://POD_IP:PORT", asker: "http://10.0.0.1:7946", owner: "http://10.0.0.2:7946",
			peers: []string{svc}, addrs: []string{"10.0.0.2", "10.0.0.1"}, want: "http://10.0.0.2:7946"},
		{name: "dns+https, IPv6 pods", asker: "https://[fd00::1]:7946", owner: "https://[FD00::2]:7946",
			peers: []string{"dns+https://wharf-peers.ns.svc:7946"}, addrs: []string{"fd00::1", "fd00:0:0::2"}, want: "https://[fd00::2]:7946"},
		{name: "dns+http and a static member", asker: "http://10.0.0.1:7946", owner: "http://10.0.9.9:7946",
			peers: []string{svc, "http://10.0.9.9:7946"}, addrs: []string{"10.0.0.1"}, want: "http://10.0.9.9:7946"},
		{name: "dns+http, advertise a pod name (misconfigured)", asker: "http://10.0.0.1:7946", owner: "http://wharf-1.wharf-peers.ns.svc:7946",
			peers: []string{svc}, addrs: []string{"10.0.0.1", "10.0.0.2"}, want: "http://10.0.0.2:7946", refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &fakeResolver{}
			res.set(tc.addrs, nil)
			var logs lockedBuffer
			owner, err := New(Config{Self: tc.owner, Peers: tc.peers, Secret: testSecret, Resolver: res, Logger: zerolog.New(&logs)})
			if err != nil {
				t.Fatal(err)
			}
			defer owner.Close()
			asker, err := New(Config{Self: tc.asker, Peers: tc.peers, Secret: testSecret, Resolver: res,
				Transport: handlerTransport{owner.Handler(chunkio.NewFrameCache(1 << 20))}})
			if err != nil {
				t.Fatal(err)
			}
			defer asker.Close()
			owner.Resolve(context.Background())
			asker.Resolve(context.Background())
			if !slices.Contains(asker.Members(), tc.want) {
				t.Fatalf("the asker's ring %v has no %s", asker.Members(), tc.want)
			}
			if same := owner.Self() == tc.want; same == tc.refused {
				t.Fatalf("the owner's own name %s, the asker's name for it %s", owner.Self(), tc.want)
			}
			id := chunkio.FrameID{Bucket: "b", Key: "k", Off: 0, Size: 10}
			err = asker.Fetch(context.Background(), tc.want, id, make([]byte, 10))
			var fe *fetchError
			if !errors.As(err, &fe) {
				t.Fatalf("fetch: %v, want a fallback", err)
			}
			reason, mis := reasonMissing, 0.0
			if tc.refused {
				reason, mis = reasonRefused, 1
			}
			if fe.reason != reason {
				t.Errorf("fetch: %v (%s), want the fallback %s", err, fe.reason, reason)
			}
			if got := testutil.ToFloat64(owner.m.misaddressed); got != mis {
				t.Errorf("wharf_peer_misaddressed_total %v, want %v", got, mis)
			}
			if say := "request addressed to " + tc.want + ", this replica is " + owner.Self(); tc.refused != strings.Contains(logs.String(), say) {
				t.Errorf("owner's log (want %q: %v):\n%s", say, tc.refused, logs.String())
			}
		})
	}
}
