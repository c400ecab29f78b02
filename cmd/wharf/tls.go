package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// TLS on serve's listeners.
//
// Each certificate pair (certSource) is held by a certReloader whose
// GetCertificate hands every new TLS handshake the pair loaded last, swapped
// atomically: a reload never touches an established connection, so a
// rotation drops none. The files are re-read on SIGHUP and every
// --tls-reload-interval; a pair that fails to load (unreadable, not
// matching, expired, not yet valid, a chain that does not verify or a PEM
// block cut off) is logged and the old one kept. A pair expiring within
// expiryWarning is warned about when loaded and then once a day.

// expiryWarning is how close to its expiry a certificate is warned about.
const expiryWarning = 7 * 24 * time.Hour

// maxPEMFile bounds a certificate or key file.
const maxPEMFile = 1 << 20

// certSource names one certificate pair: the listener it serves and the
// flags and files it comes from (named in every error).
type certSource struct {
	listener          string // "s3" or "admin": the metric label
	certFlag, keyFlag string // "--tls-cert", "--tls-key"
	certFile, keyFile string
	// accept, when set, is a listener's own check of a pair that passed
	// the others (the peer listener's: a certificate the other replicas
	// accept), applied at start and at every reload alike.
	accept func(*keyPair) error
}

// keyPair is a loaded certificate pair.
type keyPair struct {
	cert     *tls.Certificate
	leaf     *x509.Certificate
	sum      [sha256.Size]byte // of both files' bytes: what a reload compares
	notAfter time.Time
}

// readKeyPair reads and checks src's files at now.
func readKeyPair(src certSource, now time.Time) (*keyPair, error) {
	certPEM, keyPEM, sum, err := readPairFiles(src)
	if err != nil {
		return nil, err
	}
	return parseKeyPair(src, certPEM, keyPEM, sum, now)
}

// readPairFiles reads both files of src and their joint sum.
func readPairFiles(src certSource) (certPEM, keyPEM []byte, sum [sha256.Size]byte, err error) {
	if certPEM, err = readPEMFile(src.certFlag, src.certFile); err != nil {
		return nil, nil, sum, err
	}
	if keyPEM, err = readPEMFile(src.keyFlag, src.keyFile); err != nil {
		return nil, nil, sum, err
	}
	h := sha256.New()
	h.Write(certPEM)
	h.Write([]byte{0})
	h.Write(keyPEM)
	copy(sum[:], h.Sum(nil))
	return certPEM, keyPEM, sum, nil
}

// readPEMFile reads a certificate or key file, naming it in every error.
func readPEMFile(flagName, path string) ([]byte, error) {
	data, _, err := readLocalFile(flagName, path, maxPEMFile)
	return data, err
}

// parseKeyPair checks a certificate chain and its key:
//   - the certificate file holds one or more PEM CERTIFICATE blocks, the
//     first the server's own (the leaf), all parseable;
//   - the key file holds a PEM private key (PKCS #8, PKCS #1 RSA or SEC 1
//     EC), not encrypted, whose public half is the leaf's;
//   - no PEM block is cut off (a file written half, or a chain torn
//     inside a certificate: pem.Decode would silently stop there and the
//     rest of the chain would be lost);
//   - the chain verifies from the leaf to the last certificate given:
//     each one is signed by the next (which must be a CA), and every one
//     is valid at now;
//   - the leaf is valid at now: not expired, and not before its NotBefore
//     (clients refuse a certificate not yet valid, so serving one is an
//     outage; a reload keeps the previous pair and the poll picks the new
//     one up once its time has come);
//   - src.accept, when set, accepts it (the peer listener's: it covers
//     the advertised host and --peer-tls-ca verifies it).
//
// Every error names the file at fault.
func parseKeyPair(src certSource, certPEM, keyPEM []byte, sum [sha256.Size]byte, now time.Time) (*keyPair, error) {
	var leaf *x509.Certificate
	var chain []*x509.Certificate
	rest := certPEM
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			if bytes.Contains(rest, []byte("-----BEGIN")) {
				return nil, fmt.Errorf("%s %s: a PEM block is cut off after certificate %d (a partly written file, or a chain torn inside a certificate)", src.certFlag, src.certFile, len(chain))
			}
			break
		}
		if b.Type != "CERTIFICATE" {
			if strings.Contains(b.Type, "PRIVATE KEY") {
				return nil, fmt.Errorf("%s %s: holds a private key; the certificate goes here and the key in %s", src.certFlag, src.certFile, src.keyFlag)
			}
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", src.certFlag, src.certFile, err)
		}
		if leaf == nil {
			leaf = c
		}
		chain = append(chain, c)
	}
	if leaf == nil {
		return nil, fmt.Errorf("%s %s: no PEM CERTIFICATE block", src.certFlag, src.certFile)
	}
	if err := checkChain(chain, now); err != nil {
		return nil, fmt.Errorf("%s %s: %w", src.certFlag, src.certFile, err)
	}
	key, err := parsePEMKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", src.keyFlag, src.keyFile, err)
	}
	pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return nil, fmt.Errorf("%s %s: the private key does not match the certificate in %s %s", src.keyFlag, src.keyFile, src.certFlag, src.certFile)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s %s, %s %s: %w", src.certFlag, src.certFile, src.keyFlag, src.keyFile, err)
	}
	pair.Leaf = leaf
	kp := &keyPair{cert: &pair, leaf: leaf, sum: sum, notAfter: leaf.NotAfter}
	if src.accept != nil {
		if err := src.accept(kp); err != nil {
			return nil, err
		}
	}
	return kp, nil
}

// checkChain checks a certificate chain, leaf first, at now: every
// certificate is within its validity window, and each one is signed by the
// next (its issuer's name and signature, the next being a CA). The last one
// is not checked against any root: that is the client's trust.
func checkChain(chain []*x509.Certificate, now time.Time) error {
	for i, c := range chain {
		what := "the certificate"
		if i > 0 {
			what = fmt.Sprintf("chain certificate %d", i+1)
		}
		switch {
		case now.After(c.NotAfter):
			return fmt.Errorf("%s (%s) expired at %s", what, c.Subject, c.NotAfter.UTC().Format(time.RFC3339))
		case now.Before(c.NotBefore):
			return fmt.Errorf("%s (%s) is not valid before %s (not yet valid; now is %s)", what, c.Subject,
				c.NotBefore.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
		if i+1 == len(chain) {
			break
		}
		parent := chain[i+1]
		if !bytes.Equal(c.RawIssuer, parent.RawSubject) {
			return fmt.Errorf("the chain does not verify: certificate %d (%s) is issued by %s, but certificate %d is %s", i+1, c.Subject, c.Issuer, i+2, parent.Subject)
		}
		if err := c.CheckSignatureFrom(parent); err != nil {
			return fmt.Errorf("the chain does not verify: certificate %d (%s) is not signed by certificate %d (%s): %w", i+1, c.Subject, i+2, parent.Subject, err)
		}
	}
	return nil
}

// parsePEMKey finds the private key in a PEM file.
func parsePEMKey(data []byte) (crypto.Signer, error) {
	rest := data
	sawCert := false
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch {
		case b.Type == "CERTIFICATE":
			sawCert = true
			continue
		case b.Type == "ENCRYPTED PRIVATE KEY" || b.Headers["Proc-Type"] != "":
			return nil, errors.New("the private key is encrypted; wharf needs it unencrypted")
		case !strings.HasSuffix(b.Type, "PRIVATE KEY"):
			continue
		}
		var k any
		var err error
		switch b.Type {
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		default:
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		}
		if err != nil {
			return nil, fmt.Errorf("%s block: %w", b.Type, err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("unsupported private key type %T", k)
		}
		return s, nil
	}
	if sawCert {
		return nil, errors.New("holds a certificate but no PEM private key block")
	}
	return nil, errors.New("no PEM private key block")
}

// tlsMetrics are the certificate gauges and reload counters.
type tlsMetrics struct {
	notAfter *prometheus.GaugeVec
	reloads  *prometheus.CounterVec
}

func newTLSMetrics(reg prometheus.Registerer) (*tlsMetrics, error) {
	m := &tlsMetrics{
		notAfter: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wharf_tls_certificate_not_after_seconds",
			Help: "Expiry (Unix time) of the certificate a listener serves."}, []string{"listener"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wharf_tls_reloads_total",
			Help: "Certificate reloads by listener and result (ok: a new pair is served; error: the old one is kept)."}, []string{"listener", "result"}),
	}
	for _, c := range []prometheus.Collector{m.notAfter, m.reloads} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register TLS metrics: %w", err)
		}
	}
	return m, nil
}

// certReloader serves one certificate pair and reloads it.
type certReloader struct {
	src certSource
	log zerolog.Logger
	m   *tlsMetrics
	now func() time.Time
	cur atomic.Pointer[keyPair]
	// Owned by the reload goroutine: the last failure logged (files' sum
	// and error), and when the expiry was last warned about.
	lastFailure string
	warned      time.Time
}

// newCertReloader loads src; an error is the startup failure.
func newCertReloader(src certSource, log zerolog.Logger, m *tlsMetrics, now func() time.Time) (*certReloader, error) {
	r := &certReloader{src: src, log: log.With().Str("listener", src.listener).Str("cert", src.certFile).Logger(), m: m, now: now}
	// Both results exist at zero from the start (an alert on the rate of
	// errors needs the series before the first one).
	m.reloads.WithLabelValues(src.listener, "ok")
	m.reloads.WithLabelValues(src.listener, "error")
	kp, err := readKeyPair(src, now())
	if err != nil {
		return nil, err
	}
	r.install(kp, "start")
	return r, nil
}

// getCertificate is the tls.Config hook: the pair loaded last.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cur.Load().cert, nil
}

func (r *certReloader) install(kp *keyPair, why string) {
	r.cur.Store(kp)
	r.m.notAfter.WithLabelValues(r.src.listener).Set(float64(kp.notAfter.Unix()))
	r.log.Info().Str("reason", why).Str("subject", kp.leaf.Subject.String()).Str("serial", kp.leaf.SerialNumber.Text(16)).
		Time("not_after", kp.notAfter).Strs("dns_names", kp.leaf.DNSNames).Msg("TLS certificate loaded")
	r.warned = time.Time{}
	r.warnExpiry()
}

// warnExpiry warns, at most once a day, while the served certificate
// expires within expiryWarning, and logs an error once it has expired
// (a certificate is checked at load, but it can expire while served).
func (r *certReloader) warnExpiry() {
	now := r.now()
	kp := r.cur.Load()
	left := kp.notAfter.Sub(now)
	if left > expiryWarning || (!r.warned.IsZero() && now.Sub(r.warned) < 24*time.Hour) {
		return
	}
	r.warned = now
	if left <= 0 {
		r.log.Error().Time("not_after", kp.notAfter).
			Msgf("TLS certificate %s has expired: clients refuse it; renew it (the new files are picked up without a restart)", r.src.certFile)
		return
	}
	r.log.Warn().Time("not_after", kp.notAfter).Dur("left", left.Round(time.Second)).
		Msgf("TLS certificate %s expires in %s; renew it (the new files are picked up without a restart)", r.src.certFile, left.Round(time.Minute))
}

// check re-reads the files: an unchanged pair is kept; a changed one is
// loaded and served, or logged and the old one kept when it fails. A poll
// logs a failure once until the files change, or for files it cannot
// read until the error changes (a rotation that writes the certificate
// and the key one after the other fails for a moment; a pair not valid
// yet fails until its time comes); force (SIGHUP) always logs the outcome.
func (r *certReloader) check(force bool, why string) {
	defer r.warnExpiry()
	certPEM, keyPEM, sum, err := readPairFiles(r.src)
	if err == nil && sum == r.cur.Load().sum {
		r.lastFailure = ""
		if force {
			r.log.Info().Str("reason", why).Msg("TLS certificate files unchanged")
		}
		return
	}
	var kp *keyPair
	var failure string // what a repeated failure is recognised by
	if err == nil {
		kp, err = parseKeyPair(r.src, certPEM, keyPEM, sum, r.now())
		// The same bytes always fail the same way but for the clock a
		// validity error names ("now is ..."): the files' sum is the
		// failure, so a pair not valid yet is logged once, not every
		// second until it is.
		failure = fmt.Sprintf("%x", sum)
	} else {
		failure = err.Error()
	}
	if err != nil {
		if force || failure != r.lastFailure {
			r.log.Error().Err(err).Str("reason", why).Msg("TLS certificate reload failed; still serving the previous certificate")
			r.m.reloads.WithLabelValues(r.src.listener, "error").Inc()
		}
		r.lastFailure = failure
		return
	}
	r.lastFailure = ""
	r.m.reloads.WithLabelValues(r.src.listener, "ok").Inc()
	r.install(kp, why)
}

// frontDoor is the TLS state of serve's listeners.
type frontDoor struct {
	s3, admin *certReloader // nil = plain HTTP
	reloaders []*certReloader
	cfg       *frontDoorConfig
}

// newFrontDoor loads the certificates cfg names. hasAdmin says whether
// there is an admin listener.
func newFrontDoor(cfg *frontDoorConfig, hasAdmin bool, log zerolog.Logger, reg prometheus.Registerer) (*frontDoor, error) {
	fd := &frontDoor{cfg: cfg}
	srcs := cfg.certSources()
	if len(srcs) == 0 {
		return fd, nil
	}
	m, err := newTLSMetrics(reg)
	if err != nil {
		return nil, err
	}
	for _, src := range srcs {
		r, err := newCertReloader(src, log, m, time.Now)
		if err != nil {
			return nil, err
		}
		fd.reloaders = append(fd.reloaders, r)
		if src.listener == "s3" {
			fd.s3 = r
		} else {
			fd.admin = r
		}
	}
	if on, own := cfg.adminTLS(); hasAdmin && on && !own {
		fd.admin = fd.s3
	}
	return fd, nil
}

// configure sets srv up for r: TLS 1.2 or newer with Go's cipher choices,
// the certificate from r at every handshake, HTTP/2 and HTTP/1.1 offered by
// ALPN (serveOn then serves TLS). r nil leaves srv plain HTTP. Either way
// the server's own error lines (TLS handshake failures, ...) go to log.
func (fd *frontDoor) configure(srv *http.Server, r *certReloader, log zerolog.Logger) {
	srv.ErrorLog = newHTTPErrorLog(log)
	if r == nil {
		return
	}
	srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.getCertificate}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	srv.Protocols = &p
}

// run reloads the certificates on SIGHUP, on the test trigger and every
// TLSReloadInterval until ctx ends.
func (fd *frontDoor) run(ctx context.Context) {
	if len(fd.reloaders) == 0 {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var tick <-chan time.Time
	if d := fd.cfg.TLSReloadInterval; d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		tick = t.C
	}
	for {
		force, why := false, ""
		select {
		case <-ctx.Done():
			return
		case <-hup:
			force, why = true, "SIGHUP"
		case <-fd.cfg.tlsReloadNow:
			force, why = true, "trigger"
		case <-tick:
			why = "poll"
		}
		for _, r := range fd.reloaders {
			r.check(force, why)
		}
		if fd.cfg.tlsChecked != nil {
			fd.cfg.tlsChecked()
		}
	}
}

// newHTTPErrorLog routes net/http's own error lines to log: TLS handshake
// failures (a client that does not trust the certificate, a scanner) at
// Info, the rest at Warn. Anything that reaches a listener can cause one
// per connection, so they pass the peer listener's limit
// (peerErrorWriter: the first, then at most one per 30 s counting those
// left out).
func newHTTPErrorLog(l zerolog.Logger) *log.Logger {
	return log.New(&peerErrorWriter{next: httpErrorWriter{l}, now: time.Now}, "", 0)
}

type httpErrorWriter struct{ log zerolog.Logger }

func (w httpErrorWriter) Write(p []byte) (int, error) {
	msg := string(bytes.TrimRight(p, "\n"))
	ev := w.log.Warn()
	if strings.Contains(msg, "TLS handshake error") {
		ev = w.log.Info()
	}
	ev.Str("source", "net/http").Msg(msg)
	return len(p), nil
}
