package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/chunkio/peer"
)

// ---------------------------------------------------------------------------
// Peers.

// fleetSecret is the peers' shared secret file of a test.
func fleetSecret(t *testing.T, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "peer-secret")
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	fleetSecretA = "7d2c9e41b0a85f36c4e17d9a20b3f58e6c1a4d7092b5e8f3a6c0d4e7b1a2f5c8"
	fleetSecretB = "another fleet's secret, long enough: 0c9f3e7a1b5d2468ace13579bdf02468"
)

// freePorts reserves n loopback ports for peer listeners, which every
// replica must know before any starts (--peers lists them all). The
// listeners are closed just before use; a port taken in between fails
// the start, not the measure.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var lns []net.Listener
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return addrs
}

// peerArgs is the peer flags of a replica listening on listen, with the
// member list peers (self included) and the secret file.
func peerArgs(listen string, peers []string, secretFile string) []string {
	return []string{"--peer-listen", listen, "--peers", strings.Join(peers, ","), "--peer-secret-file", secretFile}
}

func peerURLs(addrs []string) []string {
	var u []string
	for _, a := range addrs {
		u = append(u, "http://"+a)
	}
	return u
}

// relayed is one peer exchange a peerProxy relayed.
type relayed struct {
	method, path string
	header       http.Header
	status       int
	bodyBytes    int64
	flipped      bool
}

// peerProxy relays peer traffic to target, logging every exchange; with
// flip set it flips the first byte of every response body it relays (a
// lying peer, or a network that damages bytes), only of the answers to
// flipFrom's requests when that is set (the sender's X-Wharf-Peer-From).
// The replicas know the target by the proxy's URL (the target advertises
// it): a request names the owner it is addressed to, and the owner
// refuses one addressed to another name.
type peerProxy struct {
	srv      *httptest.Server
	flip     bool
	flipFrom string
	mu       sync.Mutex
	log      []*relayed
}

func newPeerProxy(t *testing.T, target string, flip bool) *peerProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &peerProxy{flip: flip}
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport: tr,
		ModifyResponse: func(resp *http.Response) error {
			rec := &relayed{method: resp.Request.Method, path: resp.Request.URL.RequestURI(), header: resp.Request.Header.Clone(), status: resp.StatusCode}
			p.mu.Lock()
			p.log = append(p.log, rec)
			p.mu.Unlock()
			resp.Body = &relayBody{ReadCloser: resp.Body, rec: rec, p: p}
			return nil
		},
	}
	p.srv = httptest.NewServer(rp)
	t.Cleanup(p.srv.Close)
	return p
}

// exchanges returns a copy of the log so far.
func (p *peerProxy) exchanges() []relayed {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []relayed
	for _, r := range p.log {
		out = append(out, *r)
	}
	return out
}

type relayBody struct {
	io.ReadCloser
	rec *relayed
	p   *peerProxy
}

func (b *relayBody) Read(q []byte) (int, error) {
	n, err := b.ReadCloser.Read(q)
	b.p.mu.Lock()
	if n > 0 && b.p.flip && !b.rec.flipped && (b.p.flipFrom == "" || b.rec.header.Get("X-Wharf-Peer-From") == b.p.flipFrom) {
		q[0] ^= 0x01
		b.rec.flipped = true
	}
	b.rec.bodyBytes += int64(n)
	b.p.mu.Unlock()
	return n, err
}

// checkExact fails the test on any failed or wrong read of r.
func checkExact(t *testing.T, r *fleetRun) {
	t.Helper()
	if n := len(r.load.failures); n > 0 {
		t.Fatalf("%s: %d of %d reads failed or were wrong; first: %s", r.name, n, r.load.reads, r.load.failures[0])
	}
}

// fleetMetric sums metric name over replicas rs (all label sets).
func fleetMetric(t *testing.T, rs []*wharfServer, name string) float64 {
	t.Helper()
	var sum float64
	for _, s := range rs {
		v, _ := metricSum(scrape(t, s), name)
		sum += v
	}
	return sum
}

// peerFleetArgs is the args of replica i of a peer fleet whose peer
// listeners are addrs (self included), with secretFile.
func peerFleetArgs(a *fleetArchive, addrs []string, secretFile string) func(i int, m *fleetModel) []string {
	return func(i int, m *fleetModel) []string {
		return replicaArgs(m, a, i, peerArgs(addrs[i], peerURLs(addrs), secretFile)...)
	}
}

// TestFleetPeers (issue 23, "Done when" 1): four replicas behind a random
// balancer over an S3 model with S3's costs, 1,200 random reads of small
// files in 4 MiB frames, every byte checked, by two fleets with cold
// caches at the same time (8 clients, each sending every read to one
// fleet, then the other): one without peers, one as peers. Without peers the fleet
// fetches one copy of the touched frames per replica (about 4x:
// checkOneCopyPerReplica); as peers at most 1.25x, with the median
// latency at most 1.5x that of the fleet without peers, and the peers'
// counters say the frames moved between them, none refused.
func TestFleetPeers(t *testing.T) {
	a := getFleetArchive(t)
	base := startFleet(t, "no peers", a, fleetSize, func(i int, m *fleetModel) []string { return replicaArgs(m, a, i) })
	addrs := freePorts(t, fleetSize)
	peers := startFleet(t, "peers", a, fleetSize, peerFleetArgs(a, addrs, fleetSecret(t, fleetSecretA)))
	// Both fleets read at once, each read sent to one then the other: the
	// latencies compared are measured under the same machine load, not at
	// two moments of it.
	loads := runLoads(t, []*balancer{base.bal, peers.bal}, a, fleetSize, randomKeys(a.keys, fleetReads, 1), fleetConc, nil)
	base.load, peers.load = loads[0], loads[1]
	t.Log(base.summary(a))
	t.Log(peers.summary(a))
	checkOneCopyPerReplica(t, a, base)
	checkExact(t, peers)
	if r := peers.ratio(a); r > 1.25 {
		t.Errorf("as peers the fleet fetched %.2fx the touched frames, want at most 1.25x", r)
	}
	if b, p := base.load.median(), peers.load.median(); float64(p) > 1.5*float64(b) {
		t.Errorf("median latency as peers %v, without %v: want at most 1.5x", p, b)
	}
	hits := fleetMetric(t, peers.replicas, "wharf_peer_hits_total")
	in := fleetMetric(t, peers.replicas, "wharf_peer_bytes_in_total")
	out := fleetMetric(t, peers.replicas, "wharf_peer_bytes_out_total")
	bad := fleetMetric(t, peers.replicas, "wharf_peer_verify_failures_total")
	fallbacks := fleetMetric(t, peers.replicas, "wharf_peer_fallbacks_total")
	t.Logf("peers: %.0f hits, %.1f MB in, %.1f MB out, %.0f fallbacks, %.0f verify failures", hits, in/1e6, out/1e6, fallbacks, bad)
	if hits < 1 || in < 1 || in != out {
		t.Errorf("peer counters: %.0f hits, %.0f bytes in, %.0f bytes out: want frames moved between the replicas, every byte sent received", hits, in, out)
	}
	if bad != 0 {
		t.Errorf("%.0f verify failures among honest peers", bad)
	}
}

// TestFleetLyingPeer (issue 23, "Done when" 2): replica 0 reaches replica
// 1's peer listener through a proxy that flips a byte of every body it
// relays. No client gets a wrong byte (replica 0 checks each frame's
// sha256 and reads S3 instead), and replica 0 counts the lie in
// wharf_peer_verify_failures_total, labelled with the peer it asked.
func TestFleetLyingPeer(t *testing.T) {
	a := getFleetArchive(t)
	addrs := freePorts(t, fleetSize)
	// Replica 1 is known to every replica by the proxy's URL (it
	// advertises it), and the proxy lies only to replica 0. The liar must
	// own some frames in the ring (its URL is part of the hash): one that
	// owns none is replaced by another.
	var liar *peerProxy
	for try := 0; liar == nil; try++ {
		p := newPeerProxy(t, "http://"+addrs[1], true)
		p.flipFrom = "http://" + addrs[0]
		peers := peerURLs(addrs)
		peers[1] = p.srv.URL
		if owned := a.ownedBy(t, peers[0], peers, p.srv.URL); owned > 0 {
			t.Logf("the lying proxy owns %d of the archive's %d frames in replica 0's ring", owned, len(a.frameSize))
			liar = p
		} else if try == 10 {
			t.Fatal("no proxy address owns a frame in replica 0's ring")
		}
	}
	secret := fleetSecret(t, fleetSecretA)
	r := runFleet(t, "lying peer", a, fleetSize, func(i int, m *fleetModel) []string {
		peers := peerURLs(addrs)
		peers[1] = liar.srv.URL
		args := peerArgs(addrs[i], peers, secret)
		if i == 1 {
			args = append(args, "--peer-advertise", liar.srv.URL)
		}
		return replicaArgs(m, a, i, args...)
	}, nil)
	checkExact(t, r)
	flipped := 0
	for _, x := range liar.exchanges() {
		if x.flipped && x.status == http.StatusOK {
			flipped++
		}
	}
	if flipped == 0 {
		t.Fatalf("the lying proxy relayed no frame (%d exchanges): replica 0 never asked replica 1", len(liar.exchanges()))
	}
	text := scrape(t, r.replicas[0])
	lies, _ := metricSum(text, "wharf_peer_verify_failures_total")
	labelled := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "wharf_peer_verify_failures_total{") && strings.Contains(line, strings.TrimPrefix(liar.srv.URL, "http://")) {
			labelled = true
		}
	}
	t.Logf("lying peer: %d damaged frames relayed, replica 0 counted %.0f verify failures", flipped, lies)
	if lies < 1 || lies > float64(flipped) || !labelled {
		t.Errorf("replica 0 counted %.0f verify failures (labelled with the proxy %s: %v) for %d damaged frames: want 1 to %d, labelled\n%s",
			lies, liar.srv.URL, labelled, flipped, flipped, grepLines(text, "wharf_peer_"))
	}
	if others := fleetMetric(t, r.replicas[1:], "wharf_peer_verify_failures_total"); others != 0 {
		t.Errorf("the honest replicas counted %.0f verify failures", others)
	}
	if !strings.Contains(r.replicas[0].Logs(), liar.srv.URL[len("http://"):]) {
		t.Errorf("replica 0 logs no line naming the lying peer %s", liar.srv.URL)
	}
}

// ownedBy is how many frames of the archive member owns in the ring of
// the replica self whose member list is peers (computed as every replica
// computes it: peer.Group.Owner).
func (a *fleetArchive) ownedBy(t *testing.T, self string, peers []string, member string) int {
	t.Helper()
	ring, err := peer.New(peer.Config{Self: self, Peers: peers, Secret: []byte(fleetSecretA)})
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Close()
	n := 0
	for f := range a.frameSize {
		if owner, _ := ring.Owner(a.frameID(f)); owner == member {
			n++
		}
	}
	return n
}

// frameID is frame f as the peers name it.
func (a *fleetArchive) frameID(f frameID) chunkio.FrameID {
	return chunkio.FrameID{Bucket: srcBucket, Key: a.objectKey[f.chunk], Off: a.frameOff[f], Size: a.frameSize[f]}
}

// grepLines is the lines of text containing sub.
func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestFleetKilledReplica (issue 23, "Done when" 3): four peers under load;
// halfway through, one replica leaves the balancer and is killed
// (SIGKILL) while the first half's last reads are in flight. The first
// half of the reads are of files in the archive's first frames, the
// second half of files in the others, which no replica has fetched when
// it dies; the victim is the replica that owns the most of those (the
// owners computed as every replica computes them, peer.Group.Owner). No
// request answered by the other replicas fails or is wrong, the
// survivors count the dead owner as fallbacks and show its failures on
// /-/peers, and every frame it owned is fetched from S3 after its death
// (by the asker, or by a new owner).
func TestFleetKilledReplica(t *testing.T) {
	a := getFleetArchive(t)
	early, late := a.splitByFrames()
	keys := append(randomKeys(early, fleetReads/2, 3), randomKeys(late, fleetReads/2, 4)...)
	addrs := freePorts(t, fleetSize)
	urls := peerURLs(addrs)
	ring, err := peer.New(peer.Config{Self: urls[0], Peers: urls, Secret: []byte(fleetSecretA)})
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Close()
	owned := make([][]frameID, fleetSize) // late frames by owner
	lateFrames := map[frameID]bool{}
	for _, k := range keys[fleetReads/2:] {
		for _, f := range a.frames[k] {
			lateFrames[f] = true
		}
	}
	for f := range lateFrames {
		owner, _ := ring.Owner(a.frameID(f))
		owned[slices.Index(urls, owner)] = append(owned[slices.Index(urls, owner)], f)
	}
	victim := 0
	for i := range owned {
		if len(owned[i]) > len(owned[victim]) {
			victim = i
		}
	}
	t.Logf("late frames: %d; owned by replica: %d/%d/%d/%d; the victim is replica %d", len(lateFrames),
		len(owned[0]), len(owned[1]), len(owned[2]), len(owned[3]), victim)
	var logAtKill int
	r := runFleetKeys(t, "killed replica", a, fleetSize, keys, peerFleetArgs(a, addrs, fleetSecret(t, fleetSecretA)), func(r *fleetRun) {
		r.bal.remove(victim)
		s := r.replicas[victim]
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
		r.model.mu.Lock()
		logAtKill = len(r.model.log)
		r.model.mu.Unlock()
	})
	for i, n := range r.load.failedBy {
		if i != victim && n > 0 {
			t.Errorf("replica %d (alive) failed %d requests", i, n)
		}
	}
	var unattributed []string
	for _, f := range r.load.failures {
		if !strings.Contains(f, fmt.Sprintf("(replica %d)", victim)) {
			unattributed = append(unattributed, f)
		}
	}
	if len(unattributed) > 0 {
		t.Errorf("%d failures not at the killed replica; first: %s", len(unattributed), unattributed[0])
	}
	var alive []*wharfServer
	for i, s := range r.replicas {
		if i != victim {
			alive = append(alive, s)
		}
	}
	fallbacks := fleetMetric(t, alive, "wharf_peer_fallbacks_total")
	hits := fleetMetric(t, alive, "wharf_peer_hits_total")
	t.Logf("killed replica %d: %d requests in flight at it failed (allowed); survivors: %.0f peer hits, %.0f fallbacks to S3",
		victim, r.load.failedBy[victim], hits, fallbacks)
	if fallbacks < 1 {
		t.Errorf("the survivors counted no fallback, yet replica %d owned %d frames nobody had fetched when it died:\n%s",
			victim, len(owned[victim]), grepLines(scrape(t, alive[0]), "wharf_peer_"))
	}
	// The survivors' /-/peers pages show the dead replica's failures.
	failedOn := 0
	for _, s := range alive {
		resp, err := http.Get(s.adminURL + "/-/peers")
		if err != nil {
			t.Fatalf("%s: /-/peers: %v", s.name, err)
		}
		var page struct {
			Ring []struct {
				URL       string `json:"url"`
				State     string `json:"state"`
				Failures  int    `json:"failures"`
				LastError string `json:"last_error"`
			} `json:"ring"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: /-/peers: %v", s.name, err)
		}
		for _, m := range page.Ring {
			if m.URL == urls[victim] && m.Failures > 0 && m.LastError != "" {
				failedOn++
				t.Logf("%s's /-/peers: the dead replica %s, %d failures, last: %s", s.name, m.State, m.Failures, m.LastError)
			}
		}
	}
	if failedOn == 0 {
		t.Errorf("no survivor's /-/peers page shows a failure of the dead replica %s", urls[victim])
	}
	// Every frame the dead replica owned was read from S3 after its death.
	r.model.mu.Lock()
	after := slices.Clone(r.model.log[logAtKill:])
	r.model.mu.Unlock()
	for _, f := range owned[victim] {
		path := "/" + srcBucket + "/" + a.objectKey[f.chunk]
		lo, hi := a.frameOff[f], a.frameOff[f]+a.frameSize[f]
		found := false
		for _, g := range after {
			var x, y int64
			if g.path == path && g.replica != victim {
				if _, err := fmt.Sscanf(g.rng, "bytes=%d-%d", &x, &y); err == nil && x < hi && y >= lo {
					found = true
					break
				}
			}
		}
		if !found {
			t.Errorf("frame %s #%d (owned by the dead replica %d) was not fetched from S3 by a survivor after the kill", f.chunk, f.index, victim)
		}
	}
}

// splitByFrames splits the keys into those whose frames all lie in the
// first half of the archive's frames and those whose frames all lie in
// the second half (a key across the middle is in neither).
func (a *fleetArchive) splitByFrames() (early, late []string) {
	var all []frameID
	for f := range a.frameSize {
		all = append(all, f)
	}
	slices.SortFunc(all, func(x, y frameID) int {
		if c := strings.Compare(x.chunk, y.chunk); c != 0 {
			return c
		}
		return x.index - y.index
	})
	half := map[frameID]bool{}
	for _, f := range all[:len(all)/2] {
		half[f] = true
	}
	for _, k := range a.keys {
		in, out := 0, 0
		for _, f := range a.frames[k] {
			if half[f] {
				in++
			} else {
				out++
			}
		}
		switch {
		case out == 0:
			early = append(early, k)
		case in == 0:
			late = append(late, k)
		}
	}
	return early, late
}

// TestFleetPeerAuth (issue 23, "Done when" 4): peer requests without the
// fleet's secret get nothing. Two peers serve; a recording proxy in front
// of replica 1 (which advertises the proxy's URL) captures replica 0's
// signed requests. Then a plain GET of a captured path (no
// authentication), the captured request aimed at another path, and every
// request of a third replica holding another secret are refused with no
// body; the third replica's clients still get exact bytes (from S3). The
// captured request replayed to replica 0, which has the archive open too,
// is refused (it is addressed to replica 1) and counted in replica 0's
// wharf_peer_misaddressed_total.
func TestFleetPeerAuth(t *testing.T) {
	a := getFleetArchive(t)
	model := newFleetModel(t, a)
	addrs := freePorts(t, 3)
	rec := newPeerProxy(t, "http://"+addrs[1], false)
	good := fleetSecret(t, fleetSecretA)
	rs := startReplicas(t, 2, func(i int) []string {
		peers := peerURLs(addrs[:2])
		peers[1] = rec.srv.URL
		args := peerArgs(addrs[i], peers, good)
		if i == 1 {
			args = append(args, "--peer-advertise", rec.srv.URL)
		}
		return replicaArgs(model, a, i, args...)
	})
	// Reads at replica 0 until it has asked replica 1 for a frame.
	read := func(s *wharfServer, key string) {
		t.Helper()
		resp, err := http.Get(s.url + "/" + a.bucket + "/" + key)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || string(body) != string(a.data[key]) {
			t.Fatalf("%s: GET %s: %d, %d bytes, %v: want the source's %d bytes", s.name, key, resp.StatusCode, len(body), err, len(a.data[key]))
		}
	}
	var captured *relayed
	for _, k := range a.keys {
		read(rs[0], k)
		for _, x := range rec.exchanges() {
			if x.status == http.StatusOK && x.bodyBytes > 0 {
				captured = &x
				break
			}
		}
		if captured != nil {
			break
		}
	}
	if captured == nil {
		t.Fatalf("replica 0 never asked replica 1 for a frame (%d exchanges)", len(rec.exchanges()))
	}
	t.Logf("captured peer request: %s %s", captured.method, captured.path)

	refused := func(name string, req *http.Request) {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %d, want the request refused (401, 403 or 400)", name, resp.StatusCode)
		}
		if len(body) != 0 {
			t.Errorf("%s: %d body bytes, want none", name, len(body))
		}
	}
	target := "http://" + addrs[1]
	plain, _ := http.NewRequest(captured.method, target+captured.path, nil)
	refused("plain GET, no authentication", plain)
	root, _ := http.NewRequest(http.MethodGet, target+"/", nil)
	refused("plain GET /", root)
	// The captured request's signature, aimed at another frame: the
	// path with its last character changed.
	other := []byte(captured.path)
	other[len(other)-1] ^= 0x01
	moved, _ := http.NewRequest(captured.method, target+string(other), nil)
	moved.Header = captured.header.Clone()
	refused("the signed request aimed at another path", moved)
	// The captured request as it was, replayed to replica 0's peer port.
	replayed, _ := http.NewRequest(captured.method, "http://"+addrs[0]+captured.path, nil)
	replayed.Header = captured.header.Clone()
	refused("the captured request replayed to replica 0", replayed)
	if n, _ := metricSum(scrape(t, rs[0]), "wharf_peer_misaddressed_total"); n != 1 {
		t.Errorf("replica 0 counted %.0f misaddressed peer requests, want 1 (the replay)", n)
	}

	// A replica holding another secret: every request it sends to replica
	// 1 (through a second recorder) is refused, no body; its own clients
	// get exact bytes from S3.
	rec2 := newPeerProxy(t, "http://"+addrs[1], false)
	stranger := startReplicas(t, 1, func(int) []string {
		return replicaArgs(model, a, 2, peerArgs(addrs[2], []string{"http://" + addrs[0], rec2.srv.URL, "http://" + addrs[2]}, fleetSecret(t, fleetSecretB))...)
	})[0]
	stranger.name = "replica-wrong-secret"
	for i, k := range a.keys {
		read(stranger, k)
		if i >= 60 && len(rec2.exchanges()) > 0 {
			break
		}
	}
	ex := rec2.exchanges()
	if len(ex) == 0 {
		t.Fatal("the replica with another secret never asked replica 1")
	}
	for _, x := range ex {
		if x.status == http.StatusOK || x.bodyBytes != 0 {
			t.Errorf("a request signed with another secret: %s %s answered %d with %d body bytes, want refused with none", x.method, x.path, x.status, x.bodyBytes)
		}
	}
	t.Logf("another secret: %d requests, all refused", len(ex))
	// Replica 1 counted every refusal: the three above and the stranger's.
	text := scrape(t, rs[1])
	var n403 float64
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, `wharf_peer_requests_served_total{code="403"} `) {
			fmt.Sscanf(strings.TrimPrefix(line, `wharf_peer_requests_served_total{code="403"} `), "%g", &n403)
		}
	}
	if want := float64(3 + len(ex)); n403 != want {
		t.Errorf("replica 1 counted %.0f refused peer requests (403), want %.0f\n%s", n403, want, grepLines(text, "wharf_peer_requests_served"))
	}
}
