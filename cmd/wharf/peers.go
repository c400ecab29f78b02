package main

// Peers (issue 23): the replicas of a fleet share verified compressed
// frames over their own listener (package archiveview/chunkio/peer). This
// file is the flags, their validation at start and the wiring.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/chunkio/peer"
)

// peerConfig is serve's peer options. It is embedded in serveConfig and,
// with its YAML names, inlined in the config file's layout (fileConfig).
type peerConfig struct {
	// PeerListen is the peer listener HOST:PORT (never the S3 or admin
	// one); required with Peers.
	PeerListen string `yaml:"peer_listen"`
	// Peers lists every replica, this one included: http(s)://HOST:PORT
	// or dns+http(s)://NAME:PORT (a headless Service). Empty = no peers.
	Peers []string `yaml:"peers"`
	// PeerAdvertise is this replica's URL as the others reach it; default
	// http:// (https:// with PeerTLSCert) plus PeerListen.
	PeerAdvertise string `yaml:"peer_advertise"`
	// PeerSecretFile holds the shared secret (at least 32 bytes, not
	// readable by other users); required with Peers.
	PeerSecretFile string `yaml:"peer_secret_file"`
	// PeerTLSCert and PeerTLSKey serve the peer listener over TLS (then the
	// advertised URL and every peer are https://); PeerTLSCA is the PEM
	// bundle that verifies the other replicas' certificates (default: the
	// system's roots).
	PeerTLSCert string `yaml:"peer_tls_cert"`
	PeerTLSKey  string `yaml:"peer_tls_key"`
	PeerTLSCA   string `yaml:"peer_tls_ca"`
	// PeerCacheBytes is how much of --cache-bytes holds compressed frames
	// this replica owns, for the others (0 = an eighth).
	PeerCacheBytes yamlBytes `yaml:"peer_cache_bytes"`
}

// peerFlags defines the peer flags on fs.
func peerFlags(fs *flag.FlagSet, pc *peerConfig) {
	fs.StringVar(&pc.PeerListen, "peer-listen", pc.PeerListen, "peer listener HOST:PORT: other replicas fetch the verified frames this one owns from here (its own port, never the S3 one; needs --peers)")
	fs.Var(&listFlag[string]{list: &pc.Peers, parse: parsePeersValue, show: func(s string) string { return s }},
		"peers", "URL,URL,...: every replica of the fleet, this one included (http://HOST:PORT, https://HOST:PORT, or dns+http://NAME:PORT for a headless Service, re-resolved every 10s); each frame is owned by one of them and fetched from S3 once per fleet")
	fs.StringVar(&pc.PeerAdvertise, "peer-advertise", pc.PeerAdvertise, "this replica's URL as the other replicas reach it, one of --peers (default http://, or https:// with --peer-tls-cert, plus --peer-listen)")
	fs.StringVar(&pc.PeerSecretFile, "peer-secret-file", pc.PeerSecretFile, "`FILE` holding the secret every replica shares (at least 32 bytes, not readable by other users): each peer request carries an HMAC with it, and one without is refused; required with --peers")
	fs.StringVar(&pc.PeerTLSCert, "peer-tls-cert", pc.PeerTLSCert, "PEM certificate chain `FILE` of the peer listener: peers speak https (needs --peer-tls-key; reloaded like --tls-cert)")
	fs.StringVar(&pc.PeerTLSKey, "peer-tls-key", pc.PeerTLSKey, "PEM private key `FILE` of --peer-tls-cert")
	fs.StringVar(&pc.PeerTLSCA, "peer-tls-ca", pc.PeerTLSCA, "PEM `FILE` of the CA certificates that verify the other replicas' peer certificates (default: the system's roots)")
	fs.Var((*byteSize)(&pc.PeerCacheBytes), "peer-cache-bytes", "part of --cache-bytes that holds compressed frames this replica owns, for the other replicas (default: an eighth)")
}

// parsePeersValue reads one --peers value: a comma-separated list (each
// entry checked here; the list as a whole at start).
func parsePeersValue(v string) (string, error) {
	for _, e := range strings.Split(v, ",") {
		if _, err := peer.ParseMember(strings.TrimSpace(e)); err != nil {
			return "", err
		}
	}
	return v, nil
}

// peerList is the members as given, comma lists split.
func (pc *peerConfig) peerList() []string {
	var out []string
	for _, v := range pc.Peers {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				out = append(out, e)
			}
		}
	}
	return out
}

func (pc *peerConfig) enabled() bool { return len(pc.peerList()) > 0 }

// advertise is the advertised URL, defaulted from the listen address.
func (pc *peerConfig) advertise() string {
	if pc.PeerAdvertise != "" {
		return pc.PeerAdvertise
	}
	scheme := "http://"
	if pc.PeerTLSCert != "" {
		scheme = "https://"
	}
	return scheme + pc.PeerListen
}

// validate checks the peer options at start (listen and admin: the other
// listeners, which the peer one must not be; cacheBytes: --cache-bytes).
func (pc *peerConfig) validate(listen, admin string, cacheBytes int64) error {
	if !pc.enabled() {
		for _, f := range []struct{ name, v string }{
			{"--peer-listen", pc.PeerListen}, {"--peer-advertise", pc.PeerAdvertise}, {"--peer-secret-file", pc.PeerSecretFile},
			{"--peer-tls-cert", pc.PeerTLSCert}, {"--peer-tls-key", pc.PeerTLSKey}, {"--peer-tls-ca", pc.PeerTLSCA},
		} {
			if f.v != "" {
				return fmt.Errorf("%s %s: given without --peers", f.name, f.v)
			}
		}
		if pc.PeerCacheBytes != 0 {
			return errors.New("--peer-cache-bytes: given without --peers")
		}
		return nil
	}
	if pc.PeerListen == "" {
		return errors.New("--peers: needs --peer-listen HOST:PORT, the peer listener (its own port, never the S3 one)")
	}
	host, port, err := net.SplitHostPort(pc.PeerListen)
	if err != nil {
		return fmt.Errorf("--peer-listen %q: want HOST:PORT: %w", pc.PeerListen, err)
	}
	// The other replicas list this port, so it is a fixed one (they
	// cannot list 0, a random port); a bad one is said at start, not only
	// when serve listens.
	if n, err := net.LookupPort("tcp", port); err != nil || n == 0 {
		return fmt.Errorf("--peer-listen %q: port %q: want 1 to 65535 (the port the other replicas list)", pc.PeerListen, port)
	}
	for _, other := range []struct{ name, addr string }{{"--listen", listen}, {"--admin-listen", admin}} {
		if other.addr != "" && sameListen(other.addr, pc.PeerListen) {
			return fmt.Errorf("--peer-listen %s: the same address as %s; peer traffic has its own listener", pc.PeerListen, other.name)
		}
	}
	if pc.PeerAdvertise == "" {
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			return fmt.Errorf("--peer-listen %s listens on every interface: give --peer-advertise with the URL the other replicas reach this one at (in Kubernetes: http://$(POD_IP):PORT)", pc.PeerListen)
		}
	}
	if pc.PeerSecretFile == "" {
		return errors.New("--peers: needs --peer-secret-file FILE, the secret every replica shares (peer requests are authenticated with it)")
	}
	if _, err := readPeerSecret(pc.PeerSecretFile); err != nil {
		return err
	}
	if (pc.PeerTLSCert == "") != (pc.PeerTLSKey == "") {
		return errors.New("--peer-tls-cert and --peer-tls-key go together")
	}
	var pair *keyPair
	if pc.PeerTLSCert != "" {
		// The pair alone first; whether the others accept it once the
		// advertised URL is known to be right.
		src := pc.certSource()
		src.accept = nil
		if pair, err = readKeyPair(src, time.Now()); err != nil {
			return err
		}
	}
	adv := pc.advertise()
	if pc.PeerTLSCert != "" && !strings.HasPrefix(adv, "https://") {
		return fmt.Errorf("--peer-advertise %s: the peer listener speaks TLS (--peer-tls-cert), so the URL is https://", adv)
	}
	if pc.PeerTLSCert == "" && strings.HasPrefix(adv, "https://") {
		return fmt.Errorf("--peer-advertise %s: an https URL needs --peer-tls-cert and --peer-tls-key for the peer listener", adv)
	}
	var ctls *tls.Config // --peer-tls-ca, read once: the pair's check below uses it too
	if pc.PeerTLSCA != "" {
		if ctls, err = pc.clientTLS(); err != nil {
			return err
		}
		if pc.PeerTLSCert == "" {
			return errors.New("--peer-tls-ca: given without --peer-tls-cert (peers speak plain http)")
		}
	}
	if _, _, err := peer.ParseMembers(adv, pc.peerList()); err != nil {
		return fmt.Errorf("--peers: %w", err)
	}
	if pair != nil {
		if err := pc.acceptPeerPairWith(pair, func() (*tls.Config, error) { return ctls, nil }); err != nil {
			return err
		}
	}
	if n := int64(pc.PeerCacheBytes); n < 0 || (n != 0 && (n < 1<<20 || n > cacheBytes/2)) {
		return fmt.Errorf("--peer-cache-bytes %d: want 1MiB to half of --cache-bytes (%d); 0 = an eighth", n, cacheBytes/2)
	}
	return nil
}

// sameListen reports whether two listen addresses are the same port on an
// overlapping address (":9000" and "127.0.0.1:9000" are).
func sameListen(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb || pa == "0" {
		return false
	}
	wild := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "" || (ip != nil && ip.IsUnspecified())
	}
	return ha == hb || wild(ha) || wild(hb)
}

// readPeerSecret reads the shared peer secret: the file's bytes without
// trailing whitespace, at least peer.MinSecretBytes of them, from a regular
// file other users cannot read (as --index-cache-secret-file).
func readPeerSecret(path string) ([]byte, error) {
	return readSecretFile("--peer-secret-file", path, peer.MinSecretBytes)
}

// certSource names the peer listener's certificate pair, which must be
// one the other replicas accept (acceptPeerPair), at start and at every
// reload: a rotation to a certificate for another host, or from another
// CA, is refused and the previous one kept, as a pair that does not load.
func (pc *peerConfig) certSource() certSource {
	return certSource{listener: "peer", certFlag: "--peer-tls-cert", keyFlag: "--peer-tls-key", certFile: pc.PeerTLSCert, keyFile: pc.PeerTLSKey,
		accept: pc.acceptPeerPair}
}

// acceptPeerPair checks that the other replicas accept pair: every one
// verifies this one's certificate against the host of its advertised URL
// (a pod address under dns+), and with its --peer-tls-ca, the same bundle
// as this one's (the file read now). A certificate one of them refuses
// would make every ask of it a connection failure, and no frame shared.
func (pc *peerConfig) acceptPeerPair(pair *keyPair) error {
	return pc.acceptPeerPairWith(pair, pc.clientTLS)
}

// acceptPeerPairWith is acceptPeerPair with the bundle from clientTLS
// (called only with --peer-tls-ca): validate passes the one it read.
func (pc *peerConfig) acceptPeerPairWith(pair *keyPair, clientTLS func() (*tls.Config, error)) error {
	adv := pc.advertise()
	me, err := peer.ParseMember(adv)
	if err != nil {
		return fmt.Errorf("--peer-advertise %s: %w", adv, err)
	}
	if err := pair.leaf.VerifyHostname(me.Host); err != nil {
		return fmt.Errorf("--peer-tls-cert %s does not cover %s, the host of the advertised URL %s that the other replicas verify it against (%w)", pc.PeerTLSCert, me.Host, adv, err)
	}
	if pc.PeerTLSCA == "" {
		return nil
	}
	ctls, err := clientTLS()
	if err != nil {
		return err
	}
	inter := x509.NewCertPool()
	for _, der := range pair.cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := pair.leaf.Verify(x509.VerifyOptions{Roots: ctls.RootCAs, Intermediates: inter, DNSName: me.Host}); err != nil {
		return fmt.Errorf("--peer-tls-cert %s is not verified by --peer-tls-ca %s, the bundle the other replicas verify it with (%w)", pc.PeerTLSCert, pc.PeerTLSCA, err)
	}
	return nil
}

// clientTLS is the TLS configuration that verifies other replicas (nil:
// plain http, or the system's roots without --peer-tls-ca).
func (pc *peerConfig) clientTLS() (*tls.Config, error) {
	if pc.PeerTLSCert == "" && pc.PeerTLSCA == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if pc.PeerTLSCA != "" {
		data, err := readPEMFile("--peer-tls-ca", pc.PeerTLSCA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("--peer-tls-ca %s: no PEM certificate in it", pc.PeerTLSCA)
		}
		c.RootCAs = pool
	}
	return c, nil
}

// peerSide is a running peer setup: the group, its listener and server.
type peerSide struct {
	group *peer.Group
	ln    net.Listener
	srv   *http.Server
	cert  *certReloader // nil: plain http
}

// newPeerGroup builds the Group from validated options (nil without
// --peers).
func (pc *peerConfig) newPeerGroup(maxFrame int64, reg prometheus.Registerer, log zerolog.Logger) (*peer.Group, error) {
	if !pc.enabled() {
		return nil, nil
	}
	secret, err := readPeerSecret(pc.PeerSecretFile)
	if err != nil {
		return nil, err
	}
	ctls, err := pc.clientTLS()
	if err != nil {
		return nil, err
	}
	g, err := peer.New(peer.Config{
		Self: pc.advertise(), Peers: pc.peerList(), Secret: secret, ClientTLS: ctls, MaxFrame: maxFrame,
		Registerer: reg, Logger: log.With().Str("component", "peers").Logger(),
	})
	if err != nil {
		return nil, fmt.Errorf("--peers: %w", err)
	}
	return g, nil
}

// cacheOptions are the frame cache's peer options.
func (pc *peerConfig) cacheOptions(g *peer.Group) []chunkio.CacheOption {
	if g == nil {
		return nil
	}
	return []chunkio.CacheOption{chunkio.WithPeers(g), chunkio.WithPeerCache(int64(pc.PeerCacheBytes))}
}

// startPeerSide listens on --peer-listen and serves g's handler over
// cache there (TLS with --peer-tls-cert, its certificate reloaded with
// the front door's).
func (cfg *serveConfig) startPeerSide(g *peer.Group, cache *chunkio.FrameCache, front *frontDoor, reg prometheus.Registerer, lg zerolog.Logger) (*peerSide, error) {
	if g == nil {
		return nil, nil
	}
	ps := &peerSide{group: g}
	if cfg.PeerTLSCert != "" {
		m := front.tlsMetrics()
		if m == nil {
			var err error
			if m, err = newTLSMetrics(reg); err != nil {
				return nil, err
			}
		}
		r, err := newCertReloader(cfg.peerConfig.certSource(), lg, m, time.Now)
		if err != nil {
			return nil, err
		}
		ps.cert = r
		front.reloaders = append(front.reloaders, r)
	}
	ln, err := net.Listen("tcp", cfg.PeerListen)
	if err != nil {
		return nil, fmt.Errorf("peer listen %s: %w", cfg.PeerListen, err)
	}
	ps.ln = g.Listener(ln) // at most peer.DefaultMaxConns connections at once
	ps.srv = &http.Server{
		Handler:           g.Handler(cache),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	front.configure(ps.srv, ps.cert, lg)
	ps.srv.ErrorLog = log.New(&peerErrorWriter{next: httpErrorWriter{lg.With().Str("listener", "peer").Logger()}, now: time.Now}, "", 0)
	// Peers ask over HTTP/1.1 only (peer.Group's transport): offering
	// HTTP/2 here would only add its streams and their attacks to a port
	// anyone who reaches it can speak to before authentication.
	var p1 http.Protocols
	p1.SetHTTP1(true)
	ps.srv.Protocols = &p1
	return ps, nil
}

// tlsMetrics is the TLS metrics the front door registered (nil: none).
func (fd *frontDoor) tlsMetrics() *tlsMetrics {
	if len(fd.reloaders) == 0 {
		return nil
	}
	return fd.reloaders[0].m
}

// run serves the peer listener until the server is shut down.
func (ps *peerSide) run(ctx context.Context, errc chan<- error) {
	ps.group.Start(ctx)
	go func() { errc <- serveOn(ps.srv, ps.ln) }()
}

// peerShutdownGrace bounds the wait for peer answers in progress at
// shutdown: an asker whose answer is cut reads the backend instead, so
// there is nothing to wait for long (and a peer's idle connection, which
// net/http's Shutdown would wait 5 s for, is just closed).
const peerShutdownGrace = time.Second

// shutdown stops the peer listener: answers in progress get
// peerShutdownGrace, then every connection is closed; this replica's own
// connections to its peers are closed too.
func (ps *peerSide) shutdown(log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), peerShutdownGrace)
	defer cancel()
	if err := ps.srv.Shutdown(ctx); err != nil {
		log.Info().Err(err).Msg("peer listener: closing the remaining connections")
	}
	ps.srv.Close()
	ps.group.Close()
}

// peerErrorLogEvery is the least time between two of net/http's error
// lines about the peer listener.
const peerErrorLogEvery = 30 * time.Second

// peerErrorWriter passes net/http's error lines about the peer listener
// on to next (httpErrorWriter), at most one per peerErrorLogEvery, the
// next one saying how many were left out: anything that reaches the peer
// port can cause one per connection (a failed TLS handshake, a malformed
// request), and must not be able to flood the log.
type peerErrorWriter struct {
	next io.Writer
	now  func() time.Time

	mu      sync.Mutex
	last    time.Time
	pending int // lines since the last one written, this one included
}

func (w *peerErrorWriter) Write(p []byte) (int, error) {
	now := w.now()
	w.mu.Lock()
	w.pending++
	if !w.last.IsZero() && now.Sub(w.last) < peerErrorLogEvery {
		w.mu.Unlock()
		return len(p), nil
	}
	left := w.pending - 1
	w.last, w.pending = now, 0
	w.mu.Unlock()
	line := bytes.TrimRight(p, "\n")
	if left > 0 {
		line = fmt.Appendf(append([]byte(nil), line...), " (and %d more such lines since the last one, not logged)", left)
	}
	if _, err := w.next.Write(line); err != nil {
		return 0, err
	}
	return len(p), nil
}
