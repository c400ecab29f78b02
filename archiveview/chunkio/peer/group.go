package peer

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
)

// Defaults of Config's zero values.
const (
	DefaultFirstByte    = 2 * time.Second
	DefaultMinRate      = 4 << 20 // bytes per second
	DefaultResolveEvery = 10 * time.Second
	DefaultMaxServing   = 64
	DefaultMaxFrame     = chunkio.DefaultMaxFrameBytes
	// DefaultMaxAsking is how many asks this replica has in flight to one
	// owner at once (Config.MaxAsking): each holds a connection of its
	// own, and an owner holds DefaultMaxConns connections (32 replicas'
	// 32) and answers DefaultMaxServing asks at once, so one busy replica
	// takes at most half an owner's answers and its share of the
	// connections.
	DefaultMaxAsking = 32

	resolveTimeout  = 5 * time.Second
	maxAnswerHeader = 16 << 10 // bytes of an answer's headers
	minBackoff      = time.Second
	maxBackoff      = 30 * time.Second
)

// Config configures a Group. Self, Peers and Secret are required; zero
// values of the rest take the defaults.
type Config struct {
	// Self is this replica's URL as the others reach it
	// (http://HOST:PORT or https://HOST:PORT, --peer-advertise).
	Self string
	// Peers lists every replica, this one included (--peers):
	// http(s)://HOST:PORT, or dns+http(s)://NAME:PORT for a headless
	// Service. Self must be one of them, or a dns+ entry of its scheme and
	// port must be there (ParseMembers).
	Peers []string
	// Secret is the shared secret (at least MinSecretBytes), the same on
	// every replica. It is never sent.
	Secret []byte

	// Resolver resolves dns+ members (nil: net.DefaultResolver), again
	// every ResolveEvery (default 10 s).
	Resolver     Resolver
	ResolveEvery time.Duration
	// ClientTLS verifies https peers (nil: the system's roots). The
	// listener's own TLS is the caller's (Handler is a plain handler).
	ClientTLS *tls.Config
	// FirstByte bounds the wait for an answer's headers; MinRate (bytes/s)
	// the time its body may take: FirstByte + size/MinRate in all.
	FirstByte time.Duration
	MinRate   int64
	// MaxSkew is how far a request's date may be from the owner's clock
	// (default 30 s).
	MaxSkew time.Duration
	// MaxServing bounds the answers in progress at once (default 64);
	// MaxFrame the largest frame asked or answered (default 64 MiB, the
	// giant-frame threshold).
	MaxServing int
	MaxFrame   int64
	// MaxAsking bounds this replica's asks in flight to any one owner
	// (default DefaultMaxAsking); an ask beyond it is not sent: the frame
	// is read from the backend at once (reason busy, no back-off).
	MaxAsking int
	// MaxReplay bounds the requests remembered to refuse replays
	// (default DefaultMaxReplay): each authenticated request's (sender,
	// nonce) is kept until its date leaves MaxSkew; when that many are
	// inside their window, new requests get 503 (never a forgotten
	// entry, which would let a replay in).
	MaxReplay int
	// MaxConns bounds the connections Listener holds at once (default
	// DefaultMaxConns); more are closed as soon as they are accepted.
	MaxConns int

	// Registerer receives the wharf_peer_* series (nil: not registered).
	Registerer prometheus.Registerer
	Logger     zerolog.Logger
	// Now is the clock (nil: time.Now); Transport the HTTP transport
	// asking peers (nil: one of the Group's own). Tests set them.
	Now       func() time.Time
	Transport http.RoundTripper
}

// Group is one replica's view of its fleet: the ring, the peers' states,
// the asking side (it implements chunkio.Peers) and, with Handler, the
// answering side. It is safe for concurrent use.
type Group struct {
	cfg     Config
	members []Member
	self    string
	keys    keys
	log     zerolog.Logger
	m       *metrics
	client  *http.Client
	now     func() time.Time
	serving chan struct{}
	replay  *replayCache
	// started is the Unix second New ran in: a request dated before it
	// may have been served by this replica's previous process, whose
	// replay cache is gone, so it is not served (errBeforeStart).
	started int64
	// replayFull: the replay cache refused a request since it last had
	// room (one log line per such spell).
	replayFull atomic.Bool
	refusals   refusalLog
	// misaddressed: the log of authentic requests addressed to another
	// ring name (its own period, so a wrong --peer-advertise is said at
	// once).
	misaddressed refusalLog

	ring atomic.Pointer[ring]

	mu       sync.Mutex
	states   map[string]*peerState // by replica URL
	dnsPrev  map[string][]string   // last addresses of each dns+ member
	resolved time.Time
	resErr   string
	// dropped and selfMissing are the last resolution's (logged when
	// they change).
	dropped     int
	selfMissing bool

	// asking counts the asks in flight to each owner (under mu; an owner
	// with none has no entry).
	asking map[string]int

	stop    context.CancelFunc
	stopped chan struct{}
}

// peerState is what this replica knows of one peer (under Group.mu).
type peerState struct {
	failures  int
	downUntil time.Time
	lastErr   string
	lastOK    time.Time
	// slow: the back-off is for a slow answer, which a success of that
	// answer does not end (up).
	slow bool
}

var (
	_ chunkio.Peers         = (*Group)(nil)
	_ chunkio.PeersAccepted = (*Group)(nil)
)

// New checks cfg and returns the Group. Static members are in the ring
// at once; dns+ members join when Start resolves them. No network is used.
func New(cfg Config) (*Group, error) {
	if len(cfg.Secret) < MinSecretBytes {
		return nil, fmt.Errorf("peer secret: %d bytes, want at least %d", len(cfg.Secret), MinSecretBytes)
	}
	members, me, err := ParseMembers(cfg.Self, cfg.Peers)
	if err != nil {
		return nil, err
	}
	if cfg.FirstByte <= 0 {
		cfg.FirstByte = DefaultFirstByte
	}
	if cfg.MinRate <= 0 {
		cfg.MinRate = DefaultMinRate
	}
	if cfg.ResolveEvery <= 0 {
		cfg.ResolveEvery = DefaultResolveEvery
	}
	if cfg.MaxSkew <= 0 {
		cfg.MaxSkew = DefaultMaxSkew
	}
	if cfg.MaxServing <= 0 {
		cfg.MaxServing = DefaultMaxServing
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	if cfg.MaxAsking <= 0 {
		cfg.MaxAsking = DefaultMaxAsking
	}
	if cfg.MaxReplay <= 0 {
		cfg.MaxReplay = DefaultMaxReplay
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	rt := cfg.Transport
	if rt == nil {
		rt = &http.Transport{
			DialContext:           (&net.Dialer{Timeout: cfg.FirstByte, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:       cfg.ClientTLS,
			TLSHandshakeTimeout:   cfg.FirstByte,
			ResponseHeaderTimeout: cfg.FirstByte,
			// An answer's headers are a few short lines; net/http's
			// default would take 10 MB from a peer per ask.
			MaxResponseHeaderBytes: maxAnswerHeader,
			MaxIdleConnsPerHost:    32,
			IdleConnTimeout:        90 * time.Second,
			DisableCompression:     true,
		}
	}
	g := &Group{
		cfg: cfg, members: members, self: me.String(), keys: deriveKeys(cfg.Secret),
		log: cfg.Logger, client: &http.Client{Transport: rt, CheckRedirect: noRedirects},
		now: cfg.Now, serving: make(chan struct{}, cfg.MaxServing), replay: newReplayCache(cfg.MaxReplay),
		states: make(map[string]*peerState), dnsPrev: make(map[string][]string), asking: make(map[string]int),
	}
	g.started = g.now().Unix()
	g.m = newMetrics(cfg.Registerer, func() float64 { return float64(len(g.ring.Load().urls)) })
	urls, _, _, _ := resolve(context.Background(), noDNS{}, g.staticOnly(), g.self, nil)
	g.install(newRing(urls, g.self))
	return g, nil
}

// install makes r the ring, with every peer's verify-failure series
// emitted (at zero) from the moment it is a member. What this replica
// kept of members that left (their state, their series) goes with them:
// a fleet whose replicas come and go (new pod addresses) does not grow
// either without bound.
func (g *Group) install(r *ring) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if old := g.ring.Load(); old != nil {
		for _, u := range old.urls {
			if !r.has(u) {
				g.m.verifyFailures.DeleteLabelValues(u)
			}
		}
	}
	for u := range g.states {
		if !r.has(u) {
			delete(g.states, u)
		}
	}
	for i, u := range r.urls {
		if i != r.self {
			g.m.verifyFailures.WithLabelValues(u)
		}
	}
	g.ring.Store(r)
}

// failedVerify counts a failed answer of owner, unless owner has left the
// ring meanwhile (its series is gone with it).
func (g *Group) failedVerify(owner string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ring.Load().has(owner) {
		g.m.verifyFailures.WithLabelValues(owner).Inc()
	}
}

// noRedirects: a peer answers, it never sends the asker elsewhere.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// noDNS resolves nothing (New's first ring holds the static members).
type noDNS struct{}

func (noDNS) LookupHost(context.Context, string) ([]string, error) {
	return nil, errors.New("not resolved yet")
}

func (g *Group) staticOnly() []Member {
	var out []Member
	for _, m := range g.members {
		if !m.DNS {
			out = append(out, m)
		}
	}
	return out
}

func (g *Group) hasDNS() bool { return len(g.staticOnly()) != len(g.members) }

// Self is this replica's URL in the ring.
func (g *Group) Self() string { return g.self }

// Members is the ring's replica URLs now, sorted, this one included.
func (g *Group) Members() []string { return append([]string(nil), g.ring.Load().urls...) }

// Start resolves the dns+ members in the background, at once and then
// every ResolveEvery, until ctx ends or Close; it returns at once (until
// the first resolution, each within 5 s, the ring holds the static
// members and this replica: frames they do not own are read from the
// backend). A failed resolution is logged, not fatal. Without dns+
// members it does nothing. Call it once, before Close.
func (g *Group) Start(ctx context.Context) {
	if !g.hasDNS() {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	g.stop, g.stopped = cancel, make(chan struct{})
	go func() {
		defer close(g.stopped)
		g.Resolve(ctx)
		t := time.NewTicker(g.cfg.ResolveEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				g.Resolve(ctx)
			}
		}
	}()
}

// Resolve resolves the dns+ members once now and installs the new ring
// (Start calls it periodically; tests call it directly).
func (g *Group) Resolve(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	g.mu.Lock()
	prev := g.dnsPrev
	g.mu.Unlock()
	urls, next, errs, dropped := resolve(ctx, g.cfg.Resolver, g.members, g.self, prev)
	missing := g.selfUnresolved(next)
	g.mu.Lock()
	// Each of these is logged when it starts (or changes), not at every
	// resolution.
	if dropped > 0 && dropped != g.dropped {
		g.log.Warn().Int("dropped", dropped).Int("max", MaxMembers).Msg("peers: the member lists name more replicas than a ring holds; the lowest URLs are kept")
	}
	if missing && !g.selfMissing {
		g.log.Warn().Str("advertise", g.self).Strs("members", urls).Msg("peers: this replica's advertised URL is not among the addresses its dns+ members resolve to, so the other replicas do not see it under that URL (give --peer-advertise http://POD_IP:PORT, the address the name resolves to)")
	}
	g.dropped, g.selfMissing = dropped, missing
	g.dnsPrev, g.resolved, g.resErr = next, g.now(), ""
	if len(errs) > 0 {
		g.resErr = errors.Join(errs...).Error()
	}
	g.mu.Unlock()
	for _, err := range errs {
		g.log.Warn().Err(err).Msg("peers: resolution failed; keeping the addresses it had")
	}
	old := g.ring.Load()
	if !equalStrings(old.urls, urls) {
		g.install(newRing(urls, g.self))
		g.log.Info().Strs("members", urls).Int("was", len(old.urls)).Msg("peers: ring changed")
	}
}

// selfUnresolved reports whether dns+ members of this replica's scheme
// and port resolved to addresses (next) none of which is this replica's
// advertised host: the others then know it under another URL, or not
// at all.
func (g *Group) selfUnresolved(next map[string][]string) bool {
	me, err := ParseMember(g.self)
	if err != nil {
		return false
	}
	resolvedAny := false
	for _, m := range g.members {
		if !m.DNS || m.Scheme != me.Scheme || m.Port != me.Port {
			continue
		}
		addrs := next[m.String()]
		if slices.Contains(addrs, me.Host) {
			return false
		}
		resolvedAny = resolvedAny || len(addrs) > 0
	}
	return resolvedAny
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Close stops the re-resolution and closes idle connections.
func (g *Group) Close() {
	if g.stop != nil {
		g.stop()
		<-g.stopped
	}
	g.client.CloseIdleConnections()
}

// Owner implements chunkio.Peers: the member with the highest rendezvous
// score for id, skipping peers in their back-off.
func (g *Group) Owner(id chunkio.FrameID) (string, bool) {
	r := g.ring.Load()
	now := g.now()
	g.mu.Lock()
	i := r.owner(hash64(id.OwnerKey()), func(i int) bool {
		if i == r.self {
			return false
		}
		st := g.states[r.urls[i]]
		return st != nil && now.Before(st.downUntil)
	})
	g.mu.Unlock()
	if i < 0 || i == r.self {
		return g.self, false
	}
	return r.urls[i], true
}

// fetchError is a failed Fetch with its fallback reason.
type fetchError struct {
	reason string
	err    error
	// frameOnly: an answer about this frame or this moment (404, 409,
	// 502, 503), which puts no back-off on the peer when it came quickly.
	frameOnly bool
}

func (e *fetchError) Error() string { return e.err.Error() }
func (e *fetchError) Unwrap() error { return e.err }

// Fetch implements chunkio.Peers: one authenticated GET of frame id from
// owner, within FirstByte + size/MinRate (and ctx). Every failure but
// ctx's own end counts as a fallback by reason; connection failures,
// deadlines, refusals, failed answers, statuses no wharf peer answers,
// and 404s, 409s, 502s or 503s that took more than half the first-byte
// deadline also put owner in its back-off.
func (g *Group) Fetch(ctx context.Context, owner string, id chunkio.FrameID, dst []byte) error {
	if int64(len(dst)) != id.Size || id.Size <= 0 || id.Size > g.cfg.MaxFrame {
		return fmt.Errorf("peer fetch of %s into %d bytes: not a shareable frame", id, len(dst))
	}
	var err error
	var took time.Duration
	if _, qerr := parseFrameQuery(frameQuery(id), g.cfg.MaxFrame); qerr != nil {
		// A name the owner's rules refuse (a hostile manifest's chunk
		// key): its 400 would back the owner off for every other frame.
		// Not asked; read from the backend.
		err = &fetchError{reasonError, fmt.Errorf("peer fetch of %s: not asked, the owner would refuse its name: %w", id, qerr), true}
	} else if g.startAsk(owner) {
		start := time.Now() // the real wait, whatever cfg.Now says
		err = g.fetch(ctx, owner, id, dst)
		took = time.Since(start)
		g.endAsk(owner)
	} else {
		err = &fetchError{reasonBusy, fmt.Errorf("peer %s: %d asks of this replica in flight to it already", owner, g.cfg.MaxAsking), true}
	}
	if err == nil {
		// Not a success yet: that is bytes that pass the frame's sha256
		// (Accepted ends the back-off, Rejected lengthens it), so a peer
		// whose answers pass their MAC but not the sha256 is not counted
		// up again at each lie. An answer that took over half its
		// deadline is used, but a peer answering so every time (a
		// hostile or sick one, just within the deadline) would make every
		// read of its frames wait that long: a back-off, which Accepted
		// does not end.
		if limit := g.answerLimit(id.Size); took > limit/2 && g.slowDown(owner, took, limit) {
			g.log.Warn().Str("peer", owner).Dur("took", took).Dur("deadline", limit).Msg("peer answered slowly (over half its deadline): its frames go to their next owner during its back-off")
		}
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err() // the reader left: no fallback follows
	}
	var fe *fetchError
	if !errors.As(err, &fe) {
		fe = &fetchError{reasonError, err, true} // this replica's own failure, not the peer's
	}
	g.m.fallbacks.WithLabelValues(fe.reason).Inc()
	switch fe.reason {
	case reasonConnect, reasonTimeout:
		if g.down(owner, err) {
			g.log.Warn().Str("peer", owner).Err(err).Msg("peer unreachable: its frames go to their next owner during its back-off")
		}
	case reasonVerify:
		g.failedVerify(owner)
		g.down(owner, err)
		g.log.Warn().Str("peer", owner).Str("frame", id.String()).Err(err).Msg("peer answer failed its check: not used, fetched from the backend instead; the peer is skipped during its back-off")
	case reasonRefused:
		if g.down(owner, err) {
			g.log.Warn().Str("peer", owner).Msg("peer refused our authentication: do the replicas hold the same --peer-secret-file, are their clocks within 30s, and does the peer advertise (--peer-advertise) the URL this replica knows it by? It is skipped during its back-off")
		}
	case reasonError, reasonMissing, reasonBusy:
		// A quick 404, 409, 502 or 503 is about this frame or this moment
		// (the archive not open there, the frame not readable there, no
		// room just now): the next ask may be answered. One that took half
		// the first-byte deadline made this read wait for nothing and
		// would make every read wait so (a hostile or sick peer), and any
		// other status is no wharf peer's answer: a back-off. (took is 0
		// for asks not sent, MaxAsking in flight.)
		if fe.frameOnly && took <= g.cfg.FirstByte/2 {
			break
		}
		if g.down(owner, fmt.Errorf("%w (after %v)", err, took.Round(time.Millisecond))) {
			g.log.Warn().Str("peer", owner).Err(err).Dur("took", took).Msg("peer answered an error, or a refusal slowly: its frames go to their next owner during its back-off")
		}
	}
	return err
}

// startAsk counts one more ask in flight to owner, unless MaxAsking are.
func (g *Group) startAsk(owner string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.asking[owner] >= g.cfg.MaxAsking {
		return false
	}
	g.asking[owner]++
	return true
}

// endAsk counts an ask to owner done.
func (g *Group) endAsk(owner string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.asking[owner]--; g.asking[owner] <= 0 {
		delete(g.asking, owner)
	}
}

func (g *Group) fetch(ctx context.Context, owner string, id chunkio.FrameID, dst []byte) error {
	fctx, cancel := context.WithTimeout(ctx, g.answerLimit(id.Size))
	defer cancel()
	q := frameQuery(id)
	var nb [16]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return err
	}
	nonce := hex.EncodeToString(nb[:])
	date := strconv.FormatInt(g.now().Unix(), 10)
	req, err := http.NewRequestWithContext(fctx, http.MethodGet, owner+framePath+"?"+q, nil)
	if err != nil {
		return &fetchError{reason: reasonError, err: err, frameOnly: true}
	}
	req.Header.Set(hdrDate, date)
	req.Header.Set(hdrNonce, nonce)
	req.Header.Set(hdrFrom, g.self)
	// owner is the ring's name for it, which is the owner's own name in
	// its ring (its advertised URL): the owner refuses a request
	// addressed to any other.
	req.Header.Set(hdrTo, owner)
	req.Header.Set(hdrAuth, authPre+hex.EncodeToString(g.keys.requestMAC(http.MethodGet, framePath, q, date, nonce, g.self, owner)))
	resp, err := g.client.Do(req)
	if err != nil {
		return g.transportErr(fctx, owner, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusForbidden:
		return &fetchError{reason: reasonRefused, err: fmt.Errorf("peer %s refused the request (403)", owner)}
	case http.StatusNotFound, http.StatusConflict:
		return &fetchError{reasonMissing, fmt.Errorf("peer %s has no open archive with %s (%d)", owner, id, resp.StatusCode), true}
	case http.StatusServiceUnavailable:
		return &fetchError{reasonBusy, fmt.Errorf("peer %s is busy (503)", owner), true}
	case http.StatusBadGateway: // the owner could not read the frame from its backend
		return &fetchError{reasonError, fmt.Errorf("peer %s could not read %s (502)", owner, id), true}
	default:
		return &fetchError{reasonError, fmt.Errorf("peer %s answered %s", owner, resp.Status), false}
	}
	mac, ok := macFromHeader(resp.Header.Get(hdrAnswer))
	if !ok || resp.ContentLength != id.Size || !hmac.Equal(mac, g.keys.answerMAC(nonce, id.Size, id.Sum)) {
		return &fetchError{reason: reasonVerify, err: fmt.Errorf("peer %s: answer for %s without a valid MAC or of the wrong length (%d bytes)", owner, id, resp.ContentLength)}
	}
	n, err := io.ReadFull(resp.Body, dst)
	g.m.bytesIn.Add(float64(n))
	if err != nil {
		return g.transportErr(fctx, owner, fmt.Errorf("body ended after %d of %d bytes: %w", n, id.Size, err))
	}
	return nil
}

// answerLimit is the time an answer of size bytes may take: FirstByte +
// size/MinRate. The asker waits that long for it; the owner waits that
// long for the bytes, and again that long to write them.
func (g *Group) answerLimit(size int64) time.Duration {
	return g.cfg.FirstByte + time.Duration(float64(size)/float64(g.cfg.MinRate)*float64(time.Second))
}

// transportErr classifies an error of the connection or the body.
func (g *Group) transportErr(fctx context.Context, owner string, err error) error {
	var ne net.Error
	if errors.Is(fctx.Err(), context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return &fetchError{reason: reasonTimeout, err: fmt.Errorf("peer %s: deadline: %w", owner, err)}
	}
	return &fetchError{reason: reasonConnect, err: fmt.Errorf("peer %s: %w", owner, err)}
}

// Accepted implements chunkio.PeersAccepted: owner's bytes for id passed
// the frame's sha256 (a hit, and a success of owner: its back-off ends).
func (g *Group) Accepted(owner string, _ chunkio.FrameID) {
	g.m.hits.Inc()
	g.up(owner)
}

// Rejected implements chunkio.Peers: owner's bytes for id failed the
// frame's sha256.
func (g *Group) Rejected(owner string, id chunkio.FrameID, err error) {
	g.failedVerify(owner)
	g.m.fallbacks.WithLabelValues(reasonVerify).Inc()
	g.down(owner, err)
	g.log.Warn().Str("peer", owner).Str("frame", id.String()).Err(err).Msg("peer answered a frame that fails its sha256: not used, fetched from the backend instead; the peer is skipped during its back-off")
}

// down puts owner in its back-off: 1 s after its first failure, doubling
// up to 30 s while it keeps failing. A failure while owner is in its
// back-off already (an ask sent before it began) is the same incident and
// changes nothing but the last error. It reports whether owner was not in
// a back-off already (the first failure of a series: worth a log line).
func (g *Group) down(owner string, err error) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.states[owner]
	if st == nil {
		if !g.ring.Load().has(owner) {
			return false // it left the ring meanwhile
		}
		st = &peerState{}
		g.states[owner] = st
	}
	st.lastErr = err.Error()
	if g.now().Before(st.downUntil) {
		return false
	}
	st.failures++
	st.slow = false // slowDown sets it for its own
	d := minBackoff << min(st.failures-1, 5)
	st.downUntil = g.now().Add(min(d, maxBackoff))
	return true
}

// slowDown puts owner in its back-off for an answer that took took of
// its deadline limit (its bytes are used: the back-off outlasts their
// Accepted). It reports whether this began a back-off.
func (g *Group) slowDown(owner string, took, limit time.Duration) bool {
	if !g.down(owner, fmt.Errorf("peer %s answered in %v, over half its deadline %v", owner, took.Round(time.Millisecond), limit.Round(time.Millisecond))) {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if st := g.states[owner]; st != nil {
		st.slow = true
	}
	return true
}

// up records a success of owner: its back-off ends, unless it is one for
// slowness (slowDown), which the slow answer's own success does not end.
func (g *Group) up(owner string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.states[owner]
	if st == nil {
		if !g.ring.Load().has(owner) {
			return // it left the ring meanwhile
		}
		st = &peerState{}
		g.states[owner] = st
	}
	now := g.now()
	if st.slow && now.Before(st.downUntil) {
		st.lastOK = now
		return
	}
	st.failures, st.downUntil, st.lastOK, st.slow = 0, time.Time{}, now, false
}
