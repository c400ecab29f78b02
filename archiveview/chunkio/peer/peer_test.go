package peer

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

func TestParseMember(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"http://10.0.0.1:7946", "http://10.0.0.1:7946", ""},
		{"https://Wharf-0.Wharf.NS.svc:7946/", "https://wharf-0.wharf.ns.svc:7946", ""},
		{"http://[::1]:7946", "http://[::1]:7946", ""},
		{"dns+http://wharf-peers.ns.svc.cluster.local:7946", "dns+http://wharf-peers.ns.svc.cluster.local:7946", ""},
		{"dns+https://wharf-peers:7946", "dns+https://wharf-peers:7946", ""},
		{"/etc/wharf/peers", "", "a path, not a URL"},
		{"./peers.txt", "", "a path, not a URL"},
		{"10.0.0.1:7946", "", "want a URL"},
		{"", "", "empty"},
		{"ftp://h:1", "", "scheme ftp"},
		{"http://h", "", "no port"},
		{"http://h:0", "", "port 0"},
		{"http://h:70000", "", "port 70000"},
		{"http://h:1/peer", "", "a path is not allowed"},
		{"http://h:1?x=1", "", "query"},
		{"http://h:1#f", "", "query or fragment"},
		{"http://u:p@h:1", "", "user information"},
		{"http://:1", "", "no host"},
		{"http://bad_host!:1", "", "not a valid host name"},
		{"dns+http://10.0.0.1:1", "", "not an address"},
		// An unspecified address is where a replica listens, not where
		// the others reach it.
		{"http://0.0.0.0:7946", "", "the unspecified address"},
		{"http://[::]:7946", "", "the unspecified address"},
		{"https://[::ffff:0.0.0.0]:7946", "", "the unspecified address"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			m, err := ParseMember(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseMember(%q) = %v, %v; want an error with %q", tc.in, m, err, tc.err)
				}
				return
			}
			if err != nil || m.String() != tc.want {
				t.Fatalf("ParseMember(%q) = %v, %v; want %s", tc.in, m, err, tc.want)
			}
		})
	}
}

func TestParseMembers(t *testing.T) {
	for _, tc := range []struct {
		name, self string
		list       []string
		err        string
	}{
		{"self listed", "http://10.0.0.1:7946", []string{"http://10.0.0.1:7946", "http://10.0.0.2:7946"}, ""},
		{"self via dns", "http://10.0.0.1:7946", []string{"dns+http://wharf-peers:7946"}, ""},
		{"self missing", "http://10.0.0.9:7946", []string{"http://10.0.0.1:7946", "http://10.0.0.2:7946"}, "not among the peers"},
		{"dns of another port", "http://10.0.0.1:7946", []string{"dns+http://wharf-peers:7000"}, "not among the peers"},
		{"twice", "http://10.0.0.1:7946", []string{"http://10.0.0.1:7946", "http://10.0.0.1:7946/"}, "listed twice"},
		{"mixed schemes", "http://10.0.0.1:7946", []string{"http://10.0.0.1:7946", "https://10.0.0.2:7946"}, "one scheme"},
		{"https self, http peers", "https://10.0.0.1:7946", []string{"http://10.0.0.1:7946"}, "one scheme"},
		{"self is dns", "dns+http://wharf-peers:7946", []string{"dns+http://wharf-peers:7946"}, "not a dns+ name"},
		{"self is a path", "/tmp/x", []string{"http://10.0.0.1:7946"}, "a path"},
		{"empty list", "http://10.0.0.1:7946", nil, "no peers"},
		// A loopback member is reached only from its own host, where a
		// remote replica reaches itself: never a fleet of several hosts.
		{"loopback self, remote peer", "http://127.0.0.1:7946", []string{"http://127.0.0.1:7946", "http://10.0.0.2:7946"}, "loopback"},
		{"remote self, loopback peer", "http://10.0.0.1:7946", []string{"http://10.0.0.1:7946", "http://[::1]:7946"}, "loopback"},
		{"localhost among remote", "http://10.0.0.1:7946", []string{"http://10.0.0.1:7946", "http://localhost:7947"}, "loopback"},
		{"all loopback (one host)", "http://127.0.0.1:7946", []string{"http://127.0.0.1:7946", "http://127.0.0.2:7946", "http://localhost:7947"}, ""},
		{"most a ring holds", "http://10.0.0.1:7946", manyPeers(MaxMembers + 1), ""},
		{"more than a ring holds", "http://10.0.0.1:7946", manyPeers(MaxMembers + 2), "a ring holds at most 256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseMembers(tc.self, tc.list)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("ParseMembers = %v; want %q", err, tc.err)
			}
		})
	}
}

// manyPeers is a static list of n replicas, 10.0.0.1 first.
func manyPeers(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("http://10.0.%d.%d:7946", i/250, i%250+1))
	}
	return out
}

// TestOwnershipStableAndBalanced: every member gets its share of frames
// (within 15% for 20,000 frames), two rings of the same members agree,
// and removing a member moves only the frames it owned.
func TestOwnershipStableAndBalanced(t *testing.T) {
	const frames = 20000
	ids := make([]chunkio.FrameID, frames)
	for i := range ids {
		ids[i] = chunkio.FrameID{Bucket: "lake", Key: fmt.Sprintf("team/uploads/u1/chunk-%04d.tar.zst", i/64), Off: int64(i%64) * 4 << 20, Size: 4 << 20}
	}
	for _, n := range []int{2, 3, 4, 8} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			var urls []string
			for i := range n {
				urls = append(urls, fmt.Sprintf("http://10.0.0.%d:7946", i+1))
			}
			slices.Sort(urls)
			a, b := newRing(urls, urls[0]), newRing(slices.Clone(urls), urls[n-1])
			count := make([]int, n)
			owners := make([]int, frames)
			for i, id := range ids {
				kh := hash64(id.OwnerKey())
				o := a.owner(kh, nil)
				if ob := b.owner(kh, nil); a.urls[o] != b.urls[ob] {
					t.Fatalf("frame %d: owner %s in one ring, %s in the other", i, a.urls[o], b.urls[ob])
				}
				owners[i] = o
				count[o]++
			}
			want := frames / n
			for i, c := range count {
				if c < want*85/100 || c > want*115/100 {
					t.Errorf("member %d owns %d frames, want about %d", i, c, want)
				}
			}
			// Remove the last member: only its frames move.
			smaller := newRing(urls[:n-1], urls[0])
			for i, id := range ids {
				o := smaller.owner(hash64(id.OwnerKey()), nil)
				if owners[i] != n-1 && smaller.urls[o] != a.urls[owners[i]] {
					t.Fatalf("frame %d moved from %s to %s though its owner stayed", i, a.urls[owners[i]], smaller.urls[o])
				}
			}
			// Skipping a member (down) is the same as removing it.
			for i, id := range ids[:2000] {
				kh := hash64(id.OwnerKey())
				if o, s := smaller.owner(kh, nil), a.owner(kh, func(j int) bool { return j == n-1 }); smaller.urls[o] != a.urls[s] {
					t.Fatalf("frame %d: skipping the member gives %s, removing it %s", i, a.urls[s], smaller.urls[o])
				}
			}
		})
	}
}

// recorder records the frames a cache asked Owner about.
type recorder struct {
	*Group
	mu  sync.Mutex
	ids []chunkio.FrameID
}

func (r *recorder) Owner(id chunkio.FrameID) (string, bool) {
	r.mu.Lock()
	r.ids = append(r.ids, id)
	r.mu.Unlock()
	return r.Group.Owner(id)
}

// someFrame reads a file on a single-replica fleet's cache and returns a
// frame id it asked about (a real frame of the open archive).
func someFrame(t *testing.T, rs []*replica, rec *recorder, files map[string][]byte) chunkio.FrameID {
	t.Helper()
	for k, b := range files {
		rs[0].readAll(t, k, b)
		break
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.ids) == 0 {
		t.Fatal("no frame was looked up")
	}
	return rec.ids[0]
}

// signed builds a request for id to u (the destination it names and
// MACs too) signed by g with a fresh nonce (mutate may break it).
func signed(t *testing.T, g *Group, u string, id chunkio.FrameID, date time.Time, mutate func(r *http.Request, q *string)) *http.Request {
	t.Helper()
	var nb [16]byte
	if _, err := rand.Read(nb[:]); err != nil {
		t.Fatal(err)
	}
	return signedNonce(t, g, u, id, date, hex.EncodeToString(nb[:]), mutate)
}

// signedNonce is signed with the given nonce.
func signedNonce(t *testing.T, g *Group, u string, id chunkio.FrameID, date time.Time, nonce string, mutate func(r *http.Request, q *string)) *http.Request {
	t.Helper()
	q := frameQuery(id)
	ds := strconv.FormatInt(date.Unix(), 10)
	mac := g.keys.requestMAC(http.MethodGet, framePath, q, ds, nonce, g.self, u)
	sent := q
	r, err := http.NewRequest(http.MethodGet, u+framePath+"?"+q, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set(hdrDate, ds)
	r.Header.Set(hdrNonce, nonce)
	r.Header.Set(hdrFrom, g.self)
	r.Header.Set(hdrTo, u)
	r.Header.Set(hdrAuth, authPre+hex.EncodeToString(mac))
	if mutate != nil {
		mutate(r, &sent)
		if sent != q {
			r.URL.RawQuery = sent
		}
	}
	return r
}

// TestPeerRequestsRefusedWithoutAuthentication: a request without valid
// authentication (none, another secret, a stale or future date, a changed
// query, a bad nonce, a changed sender) gets 403 and no body, and costs no
// backend request; the same request signed properly gets the frame.
func TestPeerRequestsRefusedWithoutAuthentication(t *testing.T) {
	dir, key, files := testArchive(t, 4)
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	var rec *recorder
	rs := newFleet(t, 1, store, key, fleetOpts{peers: func(_ int, g *Group) chunkio.Peers {
		rec = &recorder{Group: g}
		return rec
	}})
	id := someFrame(t, rs, rec, files)
	other, err := New(Config{Self: rs[0].url, Peers: []string{rs[0].url}, Secret: []byte("another secret, also 32 bytes long!!")})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	other10 := id
	other10.Off += 10
	for _, tc := range []struct {
		name   string
		signer *Group
		date   time.Time
		mutate func(r *http.Request, q *string)
		code   int
	}{
		{"valid", rs[0].group, now, nil, http.StatusOK},
		{"no authentication", rs[0].group, now, func(r *http.Request, _ *string) {
			for _, h := range []string{hdrAuth, hdrDate, hdrNonce, hdrFrom, hdrTo} {
				r.Header.Del(h)
			}
		}, http.StatusForbidden},
		{"no MAC", rs[0].group, now, func(r *http.Request, _ *string) { r.Header.Del(hdrAuth) }, http.StatusForbidden},
		{"wrong secret", other, now, nil, http.StatusForbidden},
		{"stale date", rs[0].group, now.Add(-2 * DefaultMaxSkew), nil, http.StatusForbidden},
		{"future date", rs[0].group, now.Add(2 * DefaultMaxSkew), nil, http.StatusForbidden},
		{"query changed", rs[0].group, now, func(_ *http.Request, q *string) { *q = frameQuery(other10) }, http.StatusForbidden},
		{"nonce changed", rs[0].group, now, func(r *http.Request, _ *string) { r.Header.Set(hdrNonce, strings.Repeat("f", 32)) }, http.StatusForbidden},
		{"sender changed", rs[0].group, now, func(r *http.Request, _ *string) { r.Header.Set(hdrFrom, "http://10.9.9.9:1") }, http.StatusForbidden},
		{"destination changed", rs[0].group, now, func(r *http.Request, _ *string) { r.Header.Set(hdrTo, "http://10.9.9.9:1") }, http.StatusForbidden},
		{"no destination", rs[0].group, now, func(r *http.Request, _ *string) { r.Header.Del(hdrTo) }, http.StatusForbidden},
		{"MAC garbled", rs[0].group, now, func(r *http.Request, _ *string) { r.Header.Set(hdrAuth, authPre+"zz") }, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := store.Requests("")
			r := signed(t, tc.signer, rs[0].url, id, tc.date, tc.mutate)
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.code)
			}
			if tc.code != http.StatusOK {
				if len(body) != 0 {
					t.Errorf("refused request got %d bytes of body", len(body))
				}
				if n := store.Requests("") - before; n != 0 {
					t.Errorf("refused request cost %d backend requests", n)
				}
				if resp.Header.Get(hdrAnswer) != "" {
					t.Error("refused request got an answer MAC")
				}
				return
			}
			if int64(len(body)) != id.Size {
				t.Fatalf("valid request got %d bytes, want %d", len(body), id.Size)
			}
		})
	}
}

// TestPeerServesOnlyOpenArchives: a well-authenticated request for bytes
// that are no frame of an open archive (another key, another span, another
// sum, another bucket) gets 404 with no body and no backend request.
func TestPeerServesOnlyOpenArchives(t *testing.T) {
	dir, key, files := testArchive(t, 4)
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	var rec *recorder
	rs := newFleet(t, 1, store, key, fleetOpts{peers: func(_ int, g *Group) chunkio.Peers {
		rec = &recorder{Group: g}
		return rec
	}})
	id := someFrame(t, rs, rec, files)
	for _, tc := range []struct {
		name string
		edit func(*chunkio.FrameID)
	}{
		{"manifest key", func(f *chunkio.FrameID) { f.Key = key }},
		{"other key", func(f *chunkio.FrameID) { f.Key = "team/secret.bin" }},
		{"other bucket", func(f *chunkio.FrameID) { f.Bucket = "other" }},
		{"other offset", func(f *chunkio.FrameID) { f.Off++ }},
		{"other size", func(f *chunkio.FrameID) { f.Size-- }},
		{"other sum", func(f *chunkio.FrameID) { f.Sum[0] ^= 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := id
			tc.edit(&f)
			before := store.Requests("")
			resp, err := http.DefaultClient.Do(signed(t, rs[0].group, rs[0].url, f, time.Now(), nil))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound || len(body) != 0 {
				t.Fatalf("status %d with %d bytes, want 404 and none", resp.StatusCode, len(body))
			}
			if n := store.Requests("") - before; n != 0 {
				t.Errorf("cost %d backend requests", n)
			}
		})
	}
}

// flipper relays a handler's answers with one byte of every body flipped
// (a lying peer, or a proxy in between).
type flipper struct {
	h      http.Handler
	header bool // flip a byte of the answer MAC instead
}

func (f flipper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, r)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	body := rec.Body.Bytes()
	if f.header {
		if v := w.Header().Get(hdrAnswer); len(v) > 20 {
			b := []byte(v)
			b[20] ^= 1
			w.Header().Set(hdrAnswer, string(b))
		}
	} else if len(body) > 0 {
		body[len(body)/2] ^= 0x40
	}
	w.WriteHeader(rec.Code)
	w.Write(body)
}

// TestLyingPeer: every peer answer passes through a proxy that flips a
// byte of the body (or of the answer's MAC). Every file still reads back
// exactly, every lie is counted in wharf_peer_verify_failures_total with
// the peer's URL, and each costs one backend fetch instead.
func TestLyingPeer(t *testing.T) {
	dir, key, files := testArchive(t, 12)
	for _, tc := range []struct {
		name   string
		header bool
	}{{"body", false}, {"answer MAC", true}} {
		t.Run(tc.name, func(t *testing.T) {
			store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
			rs := newFleet(t, 3, store, key, fleetOpts{wrap: func(_ int, h http.Handler) http.Handler { return flipper{h: h, header: tc.header} }})
			for _, r := range rs {
				for k, b := range files {
					r.readAll(t, k, b)
				}
			}
			var lies, fallbacks, hits float64
			for _, r := range rs {
				for _, o := range rs {
					lies += testutil.ToFloat64(r.group.m.verifyFailures.WithLabelValues(o.url))
				}
				fallbacks += testutil.ToFloat64(r.group.m.fallbacks.WithLabelValues(reasonVerify))
				hits += testutil.ToFloat64(r.group.m.hits)
			}
			if lies == 0 || lies != fallbacks {
				t.Errorf("%v verify failures counted by peer, %v fallbacks for verification; want the same, above 0", lies, fallbacks)
			}
			if hits != 0 {
				t.Errorf("%v peer hits, though every answer was a lie", hits)
			}
			t.Logf("%v lies caught", lies)
		})
	}
}

// TestDownAndHangingPeer: a member that refuses connections, or one that
// never answers, costs a fallback to the backend within its deadline,
// never a failed read; after the first failures the member is in its
// back-off and its frames go to the next owner without waiting.
func TestDownAndHangingPeer(t *testing.T) {
	dir, key, files := testArchive(t, 30)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String()
	dead.Close() // nothing listens there now
	for _, tc := range []struct {
		name   string
		extra  []string
		hang   bool
		reason string
	}{
		{"down", []string{deadURL}, false, reasonConnect},
		{"hanging", nil, true, reasonTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
			release := make(chan struct{})
			defer close(release)
			rs := newFleet(t, 2, store, key, fleetOpts{
				extra: tc.extra,
				cfg:   func(_ int, c *Config) { c.FirstByte = 200 * time.Millisecond },
				wrap: func(i int, h http.Handler) http.Handler {
					if !tc.hang || i != 1 {
						return h
					}
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						select { // hang until the asker gives up
						case <-r.Context().Done():
						case <-release:
						}
					})
				},
			})
			start := time.Now()
			for k, b := range files {
				rs[0].readAll(t, k, b)
			}
			took := time.Since(start)
			fb := testutil.ToFloat64(rs[0].group.m.fallbacks.WithLabelValues(tc.reason))
			if fb == 0 {
				t.Fatalf("no fallback for %s", tc.reason)
			}
			// The back-off keeps the failures few: those asked at once
			// before the first failed (a read's window, at most
			// DefaultStreamParts); without it every frame the member
			// owns, about 25 here, would pay one. Each costs at most its
			// deadline (generous slack for a busy machine: the reads
			// themselves take milliseconds).
			if fb > chunkio.DefaultStreamParts {
				t.Errorf("%v fallbacks: the back-off did not keep the member out", fb)
			}
			if limit := 3*time.Second + time.Duration(fb)*400*time.Millisecond; took > limit {
				t.Errorf("reads took %v with %v fallbacks, want under %v", took, fb, limit)
			}
			page := rs[0].group.Page()
			var down bool
			for _, m := range page.Ring {
				down = down || m.State == "down"
			}
			if !down {
				t.Errorf("no member shown down: %+v", page.Ring)
			}
			t.Logf("%v fallbacks (%s) in %v", fb, tc.reason, took)
		})
	}
}

// fakeResolver answers from a map that the test changes.
type fakeResolver struct {
	mu    sync.Mutex
	addrs map[string][]string
	err   error
}

func (f *fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return f.addrs[host], nil
}

func (f *fakeResolver) set(addrs []string, err error) {
	f.mu.Lock()
	f.addrs, f.err = map[string][]string{"wharf-peers.ns.svc": addrs}, err
	f.mu.Unlock()
}

// TestDNSMembership: dns+ members are resolved by Start and re-resolved;
// a failed resolution keeps the last addresses; self is always a member.
func TestDNSMembership(t *testing.T) {
	res := &fakeResolver{}
	res.set([]string{"10.0.0.2", "10.0.0.1"}, nil)
	g, err := New(Config{Self: "http://10.0.0.1:7946", Peers: []string{"dns+http://wharf-peers.ns.svc:7946", "http://10.0.9.9:7946"},
		Secret: testSecret, Resolver: res, ResolveEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if got := g.Members(); !slices.Equal(got, []string{"http://10.0.0.1:7946", "http://10.0.9.9:7946"}) {
		t.Errorf("before Start: %v", got)
	}
	g.Start(context.Background()) // resolves in the background
	for deadline := time.Now().Add(5 * time.Second); len(g.Members()) == 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	steps := []struct {
		name  string
		addrs []string
		err   error
		want  []string
	}{
		{"first", nil, nil, []string{"http://10.0.0.1:7946", "http://10.0.0.2:7946", "http://10.0.9.9:7946"}},
		{"scaled up", []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, nil, []string{"http://10.0.0.1:7946", "http://10.0.0.2:7946", "http://10.0.0.3:7946", "http://10.0.9.9:7946"}},
		{"lookup fails: kept", nil, errors.New("SERVFAIL"), []string{"http://10.0.0.1:7946", "http://10.0.0.2:7946", "http://10.0.0.3:7946", "http://10.0.9.9:7946"}},
		{"replica gone", []string{"10.0.0.3", "10.0.0.1"}, nil, []string{"http://10.0.0.1:7946", "http://10.0.0.3:7946", "http://10.0.9.9:7946"}},
		{"self not resolved: still a member", []string{"10.0.0.3"}, nil, []string{"http://10.0.0.1:7946", "http://10.0.0.3:7946", "http://10.0.9.9:7946"}},
		{"names, not addresses: ignored", []string{"evil.example", "10.0.0.3"}, nil, []string{"http://10.0.0.1:7946", "http://10.0.0.3:7946", "http://10.0.9.9:7946"}},
		{"unspecified addresses: ignored", []string{"0.0.0.0", "::", "10.0.0.3"}, nil, []string{"http://10.0.0.1:7946", "http://10.0.0.3:7946", "http://10.0.9.9:7946"}},
	}
	for i, st := range steps {
		if i > 0 {
			res.set(st.addrs, st.err)
			g.Resolve(context.Background())
		}
		if got := g.Members(); !slices.Equal(got, st.want) {
			t.Errorf("%s: members %v, want %v", st.name, got, st.want)
		}
		p := g.Page()
		if (st.err != nil) != (p.ResolveErr != "") {
			t.Errorf("%s: page resolve error %q", st.name, p.ResolveErr)
		}
	}
}

// TestTLSFleet: peers over https (the listener's certificate verified by
// ClientTLS) share frames like plain ones.
func TestTLSFleet(t *testing.T) {
	dir, key, files := testArchive(t, 12)
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	total := compressedTotal(t, dir, backend.NewFileStore(dir), key)
	// Two TLS listeners with httptest's certificate.
	srvs := make([]*httptest.Server, 2)
	handlers := make([]http.Handler, 2)
	var urls []string
	for i := range srvs {
		i := i
		srvs[i] = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handlers[i].ServeHTTP(w, r) }))
		srvs[i].StartTLS()
		defer srvs[i].Close()
		urls = append(urls, strings.Replace(srvs[i].URL, "https://127.0.0.1", "https://127.0.0.1", 1))
	}
	pool := x509.NewCertPool()
	pool.AddCert(srvs[0].Certificate())
	var reps []*replica
	for i := range srvs {
		g, err := New(Config{Self: urls[i], Peers: urls, Secret: testSecret, ClientTLS: &tls.Config{RootCAs: pool}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		cache := chunkio.NewFrameCache(64<<20, chunkio.WithPeers(g))
		handlers[i] = g.Handler(cache)
		a := openArchive(t, store, key, cache)
		reps = append(reps, &replica{url: urls[i], group: g, cache: cache, arch: a})
	}
	base := store.BytesReturned()
	for _, r := range reps {
		for k, b := range files {
			r.readAll(t, k, b)
		}
	}
	ratio := float64(store.BytesReturned()-base) / float64(total)
	hits := testutil.ToFloat64(reps[0].group.m.hits) + testutil.ToFloat64(reps[1].group.m.hits)
	if ratio > 1.1 || hits == 0 {
		t.Errorf("over TLS: backend bytes %.2fx, %v peer hits", ratio, hits)
	}
}

// TestFetchChecksItsInput: Fetch refuses a buffer that is not the frame's
// size and a frame larger than MaxFrame, without a request.
func TestFetchChecksItsInput(t *testing.T) {
	g, err := New(Config{Self: "http://127.0.0.1:1", Peers: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}, Secret: testSecret, MaxFrame: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		size int64
		dst  int
	}{{100, 99}, {0, 0}, {2 << 20, 2 << 20}} {
		if err := g.Fetch(context.Background(), "http://127.0.0.1:2", chunkio.FrameID{Bucket: "b", Key: "k", Size: tc.size}, make([]byte, tc.dst)); err == nil {
			t.Errorf("Fetch of %d bytes into %d: no error", tc.size, tc.dst)
		}
	}
	if _, err := New(Config{Self: "http://127.0.0.1:1", Peers: []string{"http://127.0.0.1:1"}, Secret: []byte("short")}); err == nil {
		t.Error("a short secret was accepted")
	}
}

func FuzzParseFrameQuery(f *testing.F) {
	f.Add(frameQuery(chunkio.FrameID{Bucket: "lake", Key: "a/b c.tar.zst", ETag: `"abc"`, Off: 10, Size: 100}))
	f.Add("b=x&k=y&e=&o=0&n=1&s=" + strings.Repeat("0", 64))
	f.Add("b=x&b=x&k=y&e=&o=0&n=1&s=00")
	f.Add("b=%00&k=y&e=&o=-1&n=99999999999&s=zz")
	f.Fuzz(func(t *testing.T, raw string) {
		id, err := parseFrameQuery(raw, 64<<20)
		if err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("error %v does not wrap errBadRequest", err)
			}
			return
		}
		if id.Size < 1 || id.Size > 64<<20 || id.Off < 0 || id.Bucket == "" || id.Key == "" || hasControl(id.Key+id.Bucket+id.ETag) {
			t.Fatalf("accepted %+v from %q", id, raw)
		}
		// What is accepted is what the asker would have written.
		again, err := parseFrameQuery(frameQuery(id), 64<<20)
		if err != nil || again != id {
			t.Fatalf("round trip of %+v: %+v, %v", id, again, err)
		}
	})
}

func FuzzParseMember(f *testing.F) {
	for _, s := range []string{"http://10.0.0.1:7946", "dns+https://a.b:1", "/etc/x", "http://[::1]:80/", "HTTP://A:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		m, err := ParseMember(v)
		if err != nil {
			return
		}
		again, err := ParseMember(m.String())
		if err != nil || again != m {
			t.Fatalf("%q parses to %v, which parses to %v, %v", v, m, again, err)
		}
		if m.Port < 1 || m.Port > 65535 || m.Host == "" || bytes.ContainsAny([]byte(m.Host), "/?#@ ") {
			t.Fatalf("%q accepted as %+v", v, m)
		}
	})
}

// TestOwnerFetchesOnce: concurrent peer requests for one frame the owner
// does not hold cost one backend fetch of it (one flight), and later ones
// none (its compressed-frame cache).
func TestOwnerFetchesOnce(t *testing.T) {
	dir, key, files := testArchive(t, 4)
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Latency: 30 * time.Millisecond})
	var rec *recorder
	rs := newFleet(t, 2, store, key, fleetOpts{peers: func(i int, g *Group) chunkio.Peers {
		if i > 0 {
			return g
		}
		rec = &recorder{Group: g}
		return rec
	}})
	// A frame replica 0 read and owns: replica 1 never held it.
	for k, b := range files {
		rs[0].readAll(t, k, b)
	}
	var id chunkio.FrameID
	rec.mu.Lock()
	for _, f := range rec.ids {
		if _, remote := rs[0].group.Owner(f); !remote {
			id = f
		}
	}
	rec.mu.Unlock()
	if id.Size == 0 {
		t.Fatal("replica 0 owns no frame it read")
	}
	for round, want := range []int64{id.Size, 0} {
		before := store.BytesReturned()
		askConcurrently(t, rs[1], id, 8)
		if got := store.BytesReturned() - before; got != want {
			t.Errorf("round %d: 8 concurrent asks cost %d backend bytes, want %d", round, got, want)
		}
	}
}

// askConcurrently sends n signed requests for id to r at once; each must
// get the frame's bytes.
func askConcurrently(t *testing.T, r *replica, id chunkio.FrameID, n int) {
	t.Helper()
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.DefaultClient.Do(signed(t, r.group, r.url, id, time.Now(), nil))
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
			if int64(len(b)) != id.Size {
				t.Errorf("answer of %d bytes, want %d", len(b), id.Size)
			}
		}()
	}
	wg.Wait()
	for _, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("codes %v", codes)
		}
	}
}

// fakePeers answers every ask from a function, with no HTTP: chunkio's
// own checks are what is tested.
type fakePeers struct {
	owner    string
	answer   func(id chunkio.FrameID, dst []byte) error
	mu       sync.Mutex
	asked    int
	rejected int
}

func (f *fakePeers) Owner(chunkio.FrameID) (string, bool) { return f.owner, true }
func (f *fakePeers) Fetch(_ context.Context, _ string, id chunkio.FrameID, dst []byte) error {
	f.mu.Lock()
	f.asked++
	f.mu.Unlock()
	return f.answer(id, dst)
}
func (f *fakePeers) Rejected(string, chunkio.FrameID, error) {
	f.mu.Lock()
	f.rejected++
	f.mu.Unlock()
}

// TestChunkioChecksEveryAnswer: whatever a Peers implementation answers,
// chunkio uses only bytes that match the frame's sha256: garbage and
// errors cost a backend fetch (garbage is reported as Rejected), the true
// bytes cost none.
func TestChunkioChecksEveryAnswer(t *testing.T) {
	dir, key, files := testArchive(t, 10)
	fs := backend.NewFileStore(dir)
	truth := func(id chunkio.FrameID, dst []byte) error {
		rc, _, err := fs.ReadRange(context.Background(), id.Bucket, id.Key, id.Off, id.Size, "")
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.ReadFull(rc, dst)
		return err
	}
	for _, tc := range []struct {
		name     string
		answer   func(id chunkio.FrameID, dst []byte) error
		rejected bool // every ask is rejected
		backend  bool // frames come from the backend
	}{
		{"true bytes", truth, false, false},
		{"garbage", func(_ chunkio.FrameID, dst []byte) error {
			for i := range dst {
				dst[i] = byte(i)
			}
			return nil
		}, true, true},
		{"one flipped byte", func(id chunkio.FrameID, dst []byte) error {
			err := truth(id, dst)
			dst[len(dst)-1] ^= 1
			return err
		}, true, true},
		{"error", func(chunkio.FrameID, []byte) error { return errors.New("peer exploded") }, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := faults.NewFaulty(fs, faults.FaultConfig{})
			fp := &fakePeers{owner: "http://10.0.0.2:1", answer: tc.answer}
			cache := chunkio.NewFrameCache(64<<20, chunkio.WithPeers(fp))
			a := openArchive(t, store, key, cache)
			r := &replica{url: "fake", arch: a}
			base := store.BytesReturned()
			for k, b := range files {
				r.readAll(t, k, b)
			}
			got := store.BytesReturned() - base
			if fp.asked == 0 {
				t.Fatal("no frame was asked of the peer")
			}
			if tc.rejected != (fp.rejected == fp.asked) || (!tc.rejected && fp.rejected != 0) {
				t.Errorf("%d of %d answers rejected", fp.rejected, fp.asked)
			}
			if tc.backend != (got > 0) {
				t.Errorf("%d backend bytes", got)
			}
		})
	}
}

// TestMetricsFromStart: every wharf_peer_* series is there at zero before
// any traffic, the verify failures of each member included.
func TestMetricsFromStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(Config{Self: "http://10.0.0.1:1", Peers: []string{"http://10.0.0.1:1", "http://10.0.0.2:1"}, Secret: testSecret, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, mf := range mfs {
		got[mf.GetName()] = len(mf.GetMetric())
	}
	for name, n := range map[string]int{
		"wharf_peer_hits_total": 1, "wharf_peer_misses_total": 1, "wharf_peer_bytes_in_total": 1, "wharf_peer_bytes_out_total": 1,
		"wharf_peer_fallbacks_total": len(fallbackReasons), "wharf_peer_verify_failures_total": 1,
		"wharf_peer_requests_served_total": 7, "wharf_peer_members": 1, "wharf_peer_replays_total": 1, "wharf_peer_misaddressed_total": 1, "wharf_peer_connections_refused_total": 1,
	} {
		if got[name] != n {
			t.Errorf("%s: %d series, want %d", name, got[name], n)
		}
	}
}

// FuzzPeerHandler: whatever a request carries (query, date, nonce, sender,
// destination, authorization), one not signed with the secret gets no 200
// and no body.
func FuzzPeerHandler(f *testing.F) {
	g, err := New(Config{Self: "http://10.0.0.1:1", Peers: []string{"http://10.0.0.1:1"}, Secret: testSecret})
	if err != nil {
		f.Fatal(err)
	}
	h := g.Handler(chunkio.NewFrameCache(1<<20, chunkio.WithPeers(g)))
	now := strconv.FormatInt(time.Now().Unix(), 10)
	id := chunkio.FrameID{Bucket: "b", Key: "k", Off: 0, Size: 10}
	f.Add(frameQuery(id), now, strings.Repeat("a", 32), "http://10.0.0.2:1", "http://10.0.0.1:1", authPre+strings.Repeat("0", 64))
	f.Add("b=&k=", "0", "", "", "", "")
	f.Add(frameQuery(id), now, "0123456789abcdef0123456789abcdef", "x\ny", "http://10.0.0.1:1", authPre+hex.EncodeToString(g.keys.requestMAC("GET", framePath, frameQuery(id), now, "0", "x", "http://10.0.0.1:1")))
	f.Fuzz(func(t *testing.T, query, date, nonce, from, to, auth string) {
		r := httptest.NewRequest(http.MethodGet, "http://10.0.0.1:1"+framePath, nil)
		r.URL.RawQuery = query
		for k, v := range map[string]string{hdrDate: date, hdrNonce: nonce, hdrFrom: from, hdrTo: to, hdrAuth: auth} {
			r.Header[k] = []string{v}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code == http.StatusOK || w.Body.Len() != 0 {
			t.Fatalf("unsigned request answered %d with %d bytes", w.Code, w.Body.Len())
		}
	})
}
