package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// testPKI is a private CA for the TLS tests, with its files in a temp dir.
type testPKI struct {
	ca  *devCA
	dir string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	now := time.Now()
	ca, err := newDevCA("wharf test CA", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{ca: ca, dir: t.TempDir()}
}

// Certificate validity windows, from now.
func validNow(now time.Time) (time.Time, time.Time) {
	return now.Add(-time.Hour), now.Add(90 * 24 * time.Hour)
}
func expired(now time.Time) (time.Time, time.Time) {
	return now.Add(-48 * time.Hour), now.Add(-time.Hour)
}
func notYetValid(now time.Time) (time.Time, time.Time) {
	return now.Add(time.Hour), now.Add(90 * 24 * time.Hour)
}
func expiresSoon(now time.Time) (time.Time, time.Time) {
	return now.Add(-time.Hour), now.Add(50 * time.Hour)
}

// pair issues a certificate for localhost, 127.0.0.1 and ::1 and writes
// NAME.crt and NAME.key.
func (p *testPKI) pair(t *testing.T, name string, window func(time.Time) (time.Time, time.Time)) (certFile, keyFile string) {
	t.Helper()
	nb, na := window(time.Now())
	certPEM, keyPEM, err := p.ca.issue([]string{"localhost", "127.0.0.1", "::1"}, nb, na)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	writeAtomic(t, certFile, certPEM)
	writeAtomic(t, keyFile, keyPEM)
	return certFile, keyFile
}

// pool trusts the CA.
func (p *testPKI) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.cert)
	return pool
}

// client is an HTTPS client trusting the CA; h2 false forces HTTP/1.1.
func (p *testPKI) client(h2 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.pool()}, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// writeAtomic replaces path with data by rename, as cert-manager and
// Kubernetes secret volumes do.
func writeAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// serialOf is the serial number of the certificate a response came with.
func serialOf(resp *http.Response) string {
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
		return ""
	}
	return resp.TLS.PeerCertificates[0].SerialNumber.Text(16)
}

func fileSerial(t *testing.T, certFile string) string {
	t.Helper()
	data, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.Text(16)
}

// TestReadKeyPair: every broken certificate pair is refused with an error
// naming the file at fault and saying what is wrong.
func TestReadKeyPair(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "good", validNow)
	otherCert, otherKey := pki.pair(t, "other", validNow)
	oldCert, oldKey := pki.pair(t, "old", expired)
	soonCert, soonKey := pki.pair(t, "soon", expiresSoon)
	dir := t.TempDir()
	garbage := writeFile(t, "garbage.pem", "this is not PEM\n")
	keyPEM, _ := os.ReadFile(key)
	certPEM, _ := os.ReadFile(cert)
	fifo := filepath.Join(t.TempDir(), "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	futureCert, futureKey := pki.pair(t, "future", notYetValid)
	strangerCA, err := newDevCA("another CA", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	caPEM := string(pki.ca.certPEM)
	torn := writeFile(t, "torn.pem", string(certPEM)+caPEM[:len(caPEM)/2])
	wrongChain := writeFile(t, "wrong-chain.pem", string(certPEM)+string(strangerCA.certPEM))
	encrypted := writeFile(t, "enc.key", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n")
	src := func(c, k string) certSource {
		return certSource{listener: "s3", certFlag: "--tls-cert", keyFlag: "--tls-key", certFile: c, keyFile: k}
	}
	for _, tc := range []struct {
		name       string
		cert, key  string
		want       []string // substrings of the error; nil = loads
		wantSerial string
	}{
		{"good", cert, key, nil, fileSerial(t, cert)},
		{"chain with the CA after the leaf", writeFile(t, "chain.pem", string(certPEM)+string(pki.ca.certPEM)), key, nil, fileSerial(t, cert)},
		{"expiring soon still loads", soonCert, soonKey, nil, fileSerial(t, soonCert)},
		{"missing certificate", "/nonexistent/tls.crt", key, []string{"--tls-cert /nonexistent/tls.crt", "no such file"}, ""},
		{"missing key", cert, "/nonexistent/tls.key", []string{"--tls-key /nonexistent/tls.key", "no such file"}, ""},
		{"certificate is a directory", dir, key, []string{"--tls-cert " + dir, "not a regular file"}, ""},
		{"key is a FIFO (never opened: it would block)", cert, fifo, []string{"--tls-key " + fifo, "not a regular file"}, ""},
		{"certificate is not PEM", garbage, key, []string{"--tls-cert " + garbage, "no PEM CERTIFICATE"}, ""},
		{"key is not PEM", cert, garbage, []string{"--tls-key " + garbage, "no PEM private key"}, ""},
		{"key file holds the certificate", cert, cert, []string{"--tls-key " + cert, "holds a certificate but no PEM private key"}, ""},
		{"certificate file holds the key", key, key, []string{"--tls-cert " + key, "holds a private key"}, ""},
		{"encrypted key", cert, encrypted, []string{"--tls-key " + encrypted, "encrypted"}, ""},
		{"key of another certificate", cert, otherKey, []string{"--tls-key " + otherKey, "does not match the certificate in --tls-cert " + cert}, ""},
		{"certificate of another key", otherCert, key, []string{"--tls-key " + key, "does not match", otherCert}, ""},
		{"expired", oldCert, oldKey, []string{"--tls-cert " + oldCert, "expired at"}, ""},
		{"not yet valid", futureCert, futureKey, []string{"--tls-cert " + futureCert, "not valid before", "not yet valid"}, ""},
		{"chain torn inside the intermediate", torn, key, []string{"--tls-cert " + torn, "cut off after certificate 1"}, ""},
		{"chain of another CA", wrongChain, key, []string{"--tls-cert " + wrongChain, "the chain does not verify", "certificate 2 is CN=another CA"}, ""},
		{"key PEM damaged", cert, writeFile(t, "bad.key", strings.Replace(string(keyPEM), "\n", "\nAAAA", 2)), []string{"--tls-key", "PRIVATE KEY block"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kp, err := readKeyPair(src(tc.cert, tc.key), time.Now())
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := kp.leaf.SerialNumber.Text(16); got != tc.wantSerial {
					t.Errorf("leaf serial %s, want %s", got, tc.wantSerial)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// startTLSServe serves a small archive over TLS in-process.
func startTLSServe(t *testing.T, fd frontDoorConfig, admin bool) (addr, adminAddr string, logs *lockedBuffer, stop func() error, data []byte) {
	t.Helper()
	data = bytes.Repeat([]byte("wharf over TLS "), 20000)
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n"), "big.bin": data})
	cfg := serveConfig{Listen: "127.0.0.1:0", StoreURL: store, Archives: []serveArchive{{Name: "data", ManifestURL: man}},
		Anonymous: true, CacheBytes: 16 << 20, LogFormat: "json", frontDoorConfig: fd}
	if admin {
		cfg.AdminListen = "127.0.0.1:0"
	}
	addr, adminAddr, logs, stop = startServe(t, cfg)
	return addr, adminAddr, logs, stop, data
}

// TestServeTLS: HTTPS with HTTP/2 by ALPN and HTTP/1.1, TLS 1.2 minimum,
// a clear refusal for plain HTTP, the admin listener on the same
// certificate, and the log line with the https URL.
func TestServeTLS(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "s3", validNow)
	addr, admin, logs, _, data := startTLSServe(t, frontDoorConfig{TLSCert: cert, TLSKey: key}, true)
	if !strings.Contains(logs.String(), "listening on https://"+addr) || !strings.Contains(logs.String(), "on https://"+admin) {
		t.Errorf("log lacks the https URLs:\n%s", logs.String())
	}
	for _, h2 := range []bool{true, false} {
		c := pki.client(h2)
		resp, err := c.Get("https://" + addr + "/data/big.bin")
		if err != nil {
			t.Fatalf("GET (h2 %v): %v", h2, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantProto := map[bool]string{true: "HTTP/2.0", false: "HTTP/1.1"}[h2]
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, data) || resp.Proto != wantProto {
			t.Errorf("GET big.bin (h2 %v): %s %s, equal %v, %v", h2, resp.Proto, resp.Status, bytes.Equal(body, data), err)
		}
		if resp.TLS.Version < tls.VersionTLS12 {
			t.Errorf("negotiated TLS version %x", resp.TLS.Version)
		}
		// The admin listener: same certificate.
		resp, err = c.Get("https://" + admin + "/readyz")
		if err != nil {
			t.Fatalf("admin over TLS: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || serialOf(resp) != fileSerial(t, cert) {
			t.Errorf("admin /readyz: %s, serial %s", resp.Status, serialOf(resp))
		}
	}
	// Ranged read over HTTP/2.
	req, _ := http.NewRequest("GET", "https://"+addr+"/data/big.bin", nil)
	req.Header.Set("Range", "bytes=100-199")
	resp, err := pki.client(true).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 206 || !bytes.Equal(body, data[100:200]) || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 100-199/%d", len(data)) {
		t.Errorf("ranged GET over h2: %s %q", resp.Status, resp.Header.Get("Content-Range"))
	}

	// Plain HTTP to the TLS port: Go's server answers 400 with a sentence.
	for _, a := range []string{addr, admin} {
		code, body := get(t, "http://"+a+"/data/a.txt")
		if code != 400 || !strings.Contains(string(body), "Client sent an HTTP request to an HTTPS server") {
			t.Errorf("plain HTTP to %s: %d %q", a, code, body)
		}
	}
	// TLS 1.1 is refused; so is a client that does not trust the CA.
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.pool(), MaxVersion: tls.VersionTLS11})
	if err == nil {
		conn.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}
	if _, err := http.Get("https://" + addr + "/data/a.txt"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("GET with the system roots: %v", err)
	}
}

// TestServeTLSAdminModes: the admin listener with its own certificate, or
// plain on loopback with --admin-plain.
func TestServeTLSAdminModes(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "s3", validNow)
	acert, akey := pki.pair(t, "admin", validNow)
	addr, admin, _, _, _ := startTLSServe(t, frontDoorConfig{TLSCert: cert, TLSKey: key, AdminTLSCert: acert, AdminTLSKey: akey}, true)
	c := pki.client(true)
	for a, want := range map[string]string{addr + "/data/a.txt": cert, admin + "/healthz": acert} {
		resp, err := c.Get("https://" + a)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || serialOf(resp) != fileSerial(t, want) {
			t.Errorf("%s: %s serial %s, want the one of %s", a, resp.Status, serialOf(resp), want)
		}
	}

	addr, admin, _, _, _ = startTLSServe(t, frontDoorConfig{TLSCert: cert, TLSKey: key, AdminPlain: true}, true)
	if code, body := get(t, "http://"+admin+"/healthz"); code != 200 || string(body) != "ok\n" {
		t.Errorf("plain admin: %d %q", code, body)
	}
	resp, err := c.Get("https://" + addr + "/data/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("S3 with a plain admin: %s", resp.Status)
	}
}

// TestServeTLSReload: a new pair is served after the trigger (SIGHUP's
// path) and after the poll; a broken pair is logged and the old one kept;
// connections open across a reload keep working.
func TestServeTLSReload(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "s3", validNow)
	first := fileSerial(t, cert)
	trigger := make(chan struct{})
	checked := make(chan struct{}, 16)
	fd := frontDoorConfig{TLSCert: cert, TLSKey: key, TLSReloadInterval: time.Hour, tlsReloadNow: trigger,
		tlsChecked: func() { checked <- struct{}{} }}
	addr, admin, logs, _, _ := startTLSServe(t, fd, true)
	reload := func() {
		t.Helper()
		trigger <- struct{}{}
		select {
		case <-checked:
		case <-time.After(10 * time.Second):
			t.Fatal("no reload round")
		}
	}
	kept := pki.client(true) // one connection, kept open across reloads
	served := func(c *http.Client) string {
		t.Helper()
		resp, err := c.Get("https://" + addr + "/data/a.txt")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET: %s", resp.Status)
		}
		return serialOf(resp)
	}
	if s := served(kept); s != first {
		t.Fatalf("serial %s, want %s", s, first)
	}

	// A key that does not match: refused, old certificate kept.
	_, otherKey := pki.pair(t, "other", validNow)
	okey, _ := os.ReadFile(otherKey)
	writeAtomic(t, key, okey)
	reload()
	if s := served(pki.client(true)); s != first {
		t.Errorf("after a broken reload: serial %s, want the old %s", s, first)
	}
	if !strings.Contains(logs.String(), "TLS certificate reload failed") || !strings.Contains(logs.String(), "does not match") {
		t.Errorf("broken reload not logged:\n%s", logs.String())
	}

	// A good new pair: new connections get it; the kept one still works.
	newCert, newKey := pki.pair(t, "new", validNow)
	second := fileSerial(t, newCert)
	for from, to := range map[string]string{newCert: cert, newKey: key} {
		b, _ := os.ReadFile(from)
		writeAtomic(t, to, b)
	}
	reload()
	if s := served(pki.client(true)); s != second {
		t.Errorf("after the reload: serial %s, want %s", s, second)
	}
	if s := served(kept); s != first {
		t.Errorf("the connection open across the reload: serial %s (want the old %s on the same connection)", s, first)
	}
	resp, err := pki.client(true).Get("https://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`wharf_tls_reloads_total{listener="s3",result="ok"} 1`, `wharf_tls_reloads_total{listener="s3",result="error"} 1`,
		`wharf_tls_certificate_not_after_seconds{listener="s3"}`} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if serialOf(resp) != second {
		t.Errorf("admin (same certificate) serial %s, want %s", serialOf(resp), second)
	}
}

// TestServeTLSRefusesBadPairs (issue 20, finding 10): a certificate not
// yet valid, a chain torn inside the intermediate and a chain that does
// not verify are refused at start (serve fails naming the file and the
// reason) and at reload (the previous certificate is still served and the
// reason is logged). --check-config: TestCheckConfigTLSFiles.
func TestServeTLSRefusesBadPairs(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "s3", validNow)
	first := fileSerial(t, cert)
	goodCert, _ := os.ReadFile(cert)
	goodKey, _ := os.ReadFile(key)
	futureCert, futureKey := pki.pair(t, "future", notYetValid)
	stranger, err := newDevCA("another CA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	caPEM := string(pki.ca.certPEM)
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bad := []struct {
		name      string
		cert, key []byte
		reason    string
	}{
		{"not yet valid", read(futureCert), read(futureKey), "is not valid before"},
		{"chain torn inside the intermediate", append(append([]byte{}, goodCert...), caPEM[:len(caPEM)/2]...), goodKey, "a PEM block is cut off after certificate 1"},
		{"chain that does not verify", append(append([]byte{}, goodCert...), stranger.certPEM...), goodKey, "the chain does not verify"},
	}
	for _, b := range bad {
		t.Run("start: "+b.name, func(t *testing.T) {
			dir := t.TempDir()
			c, k := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
			writeAtomic(t, c, b.cert)
			writeAtomic(t, k, b.key)
			store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
			err := serve(context.Background(), serveConfig{Listen: "127.0.0.1:0", StoreURL: store,
				Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: 16 << 20,
				LogOut: io.Discard, frontDoorConfig: frontDoorConfig{TLSCert: c, TLSKey: k}})
			if err == nil || !strings.Contains(err.Error(), "--tls-cert "+c) || !strings.Contains(err.Error(), b.reason) {
				t.Fatalf("serve: %v, want a refusal naming %s and %q", err, c, b.reason)
			}
		})
	}

	trigger := make(chan struct{})
	checked := make(chan struct{}, 16)
	addr, _, logs, _, _ := startTLSServe(t, frontDoorConfig{TLSCert: cert, TLSKey: key, TLSReloadInterval: time.Hour,
		tlsReloadNow: trigger, tlsChecked: func() { checked <- struct{}{} }}, false)
	for _, b := range bad {
		t.Run("reload: "+b.name, func(t *testing.T) {
			writeAtomic(t, cert, b.cert)
			writeAtomic(t, key, b.key)
			trigger <- struct{}{}
			select {
			case <-checked:
			case <-time.After(10 * time.Second):
				t.Fatal("no reload round")
			}
			resp, err := pki.client(true).Get("https://" + addr + "/data/a.txt")
			if err != nil {
				t.Fatalf("after the refused reload: %v", err)
			}
			resp.Body.Close()
			if s := serialOf(resp); resp.StatusCode != 200 || s != first {
				t.Errorf("after the refused reload: %d serial %s, want the old %s", resp.StatusCode, s, first)
			}
			found := false
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "TLS certificate reload failed") && strings.Contains(l, b.reason) {
					found = true
				}
			}
			if !found {
				t.Errorf("the refused reload is not logged with %q:\n%s", b.reason, logs.String())
			}
		})
	}
}

// TestServeTLSPoll: a rotation is picked up by the poll alone, also when
// the files are written one after the other (the moment between is a
// mismatch, logged once, the old pair kept).
func TestServeTLSPoll(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "s3", validNow)
	first := fileSerial(t, cert)
	var rounds atomic.Int64
	addr, _, logs, _, _ := startTLSServe(t, frontDoorConfig{TLSCert: cert, TLSKey: key, TLSReloadInterval: 100 * time.Millisecond,
		tlsChecked: func() { rounds.Add(1) }}, false)
	newCert, newKey := pki.pair(t, "new", validNow)
	second := fileSerial(t, newCert)

	var failures atomic.Int64
	var seen sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(keep bool) {
			defer wg.Done()
			c := pki.client(keep)
			if !keep {
				c.Transport.(*http.Transport).DisableKeepAlives = true
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := c.Get("https://" + addr + "/data/a.txt")
				if err != nil {
					failures.Add(1)
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(b) != "hello\n" {
					failures.Add(1)
				}
				seen.Store(serialOf(resp), true)
			}
		}(i%2 == 0)
	}
	time.Sleep(300 * time.Millisecond)
	b, _ := os.ReadFile(newCert)
	writeAtomic(t, cert, b) // certificate first: a mismatch until the key follows
	// At least two polls see the half-written pair (one log line).
	for r0, end := rounds.Load(), time.Now().Add(10*time.Second); rounds.Load() < r0+3; {
		if time.Now().After(end) {
			t.Fatal("the poll stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b, _ = os.ReadFile(newKey)
	writeAtomic(t, key, b)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := seen.Load(second); ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if _, ok := seen.Load(second); !ok {
		t.Fatalf("the new certificate was never served:\n%s", logs.String())
	}
	if _, ok := seen.Load(first); !ok {
		t.Error("the old certificate was never served")
	}
	if n := failures.Load(); n != 0 {
		t.Errorf("%d requests failed during the rotation", n)
	}
	if n := strings.Count(logs.String(), "TLS certificate reload failed"); n != 1 {
		t.Errorf("the half-written rotation was logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestServeTLSExpiryWarning: a certificate expiring within 7 days starts,
// with a warning.
func TestServeTLSExpiryWarning(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "soon", expiresSoon)
	_, _, logs, _, _ := startTLSServe(t, frontDoorConfig{TLSCert: cert, TLSKey: key}, false)
	if !strings.Contains(logs.String(), `"level":"warn"`) || !strings.Contains(logs.String(), "TLS certificate "+cert+" expires in") {
		t.Errorf("no expiry warning:\n%s", logs.String())
	}
}

// TestServeCORS: the CORS flags reach the S3 handler: a preflight from an
// allowed origin, headers on a GET, the rules on ?cors; other origins get
// nothing.
func TestServeCORS(t *testing.T) {
	fd := defaultFrontDoor()
	fd.CORSAllowOrigins = []string{"HTTPS://Viewer.Example.org:443"}
	addr, _, _, _, _ := startTLSServe(t, fd, false)
	do := func(method, path string, hdr map[string]string) (*http.Response, []byte) {
		req, _ := http.NewRequest(method, "http://"+addr+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}
	const origin = "https://viewer.example.org"
	resp, body := do("OPTIONS", "/data/a.txt", map[string]string{"Origin": origin, "Access-Control-Request-Method": "GET",
		"Access-Control-Request-Headers": "range"})
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != origin || resp.Header.Get("Access-Control-Max-Age") != "600" {
		t.Errorf("preflight: %s %v %s", resp.Status, resp.Header, body)
	}
	resp, body = do("GET", "/data/a.txt", map[string]string{"Origin": origin})
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != origin || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Content-Range") {
		t.Errorf("GET: %s %v %s", resp.Status, resp.Header, body)
	}
	resp, _ = do("OPTIONS", "/data/a.txt", map[string]string{"Origin": "https://other.example", "Access-Control-Request-Method": "GET"})
	if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from another origin: %s %v", resp.Status, resp.Header)
	}
	resp, body = do("GET", "/data?cors", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "<AllowedOrigin>"+origin+"</AllowedOrigin>") || !strings.Contains(string(body), "<MaxAgeSeconds>600</MaxAgeSeconds>") {
		t.Errorf("?cors: %s %s", resp.Status, body)
	}
}

// TestServeIndexCacheValues: an s3:// index cache passes --check-config
// and serve publishes the index there (in the store's own bucket), and a
// restart opens from it; a missing directory is refused by both.
func TestServeIndexCacheValues(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	base := []string{"serve", "--store", store, "--archive", "data=" + man, "--anonymous", "--listen", "127.0.0.1:0"}
	cfg, _, err := parseServeArgs(append(base[1:], "--index-cache", "s3://src/wharf-index", "--index-cache-secret-file", testIndexSecretFile(t)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.IndexCacheURL != "s3://src/wharf-index" || cfg.IndexCacheDir != "" {
		t.Fatalf("s3:// index cache parsed as dir %q url %q", cfg.IndexCacheDir, cfg.IndexCacheURL)
	}
	if _, err := cfg.checkConfig(); err != nil {
		t.Errorf("--check-config refuses an s3:// index cache: %v", err)
	}
	for start := range 2 {
		addr, _, logs, stop := startServe(t, cfg)
		if code, b := get(t, "http://"+addr+"/data/a.txt"); code != 200 || string(b) != "hello\n" {
			t.Errorf("start %d: GET a.txt: %d %q", start, code, b)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if cached := strings.Contains(logs.String(), "archive opened from index cache"); cached != (start == 1) {
			t.Errorf("start %d: opened from the s3:// index cache: %v\n%s", start, cached, logs.String())
		}
	}
	ents, err := filepath.Glob(filepath.Join(strings.TrimPrefix(store, "file://"), "src", "wharf-index", "*.widx"))
	if err != nil || len(ents) != 1 {
		t.Errorf("the s3:// index cache holds %v (%v), want one index", ents, err)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	cfg, _, err = parseServeArgs(append(base[1:], "--index-cache", missing))
	if err != nil {
		t.Fatal(err)
	}
	cfg.LogOut = io.Discard
	if err := serve(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("serve with a missing index cache dir: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("serve created the index cache dir %s: %v", missing, err)
	}
	// The bug of issue 14: "s3:/x" (one slash) is a path, which does not
	// exist, and nothing named "s3:" is created.
	wd := t.TempDir()
	t.Chdir(wd)
	cfg, _, err = parseServeArgs(append(base[1:], "--index-cache", "s3:/idx/wharf"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.LogOut = io.Discard
	if err := serve(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `"s3:/idx/wharf"`) {
		t.Errorf("serve with s3:/idx/wharf: %v", err)
	}
	if ents, _ := os.ReadDir(wd); len(ents) != 0 {
		t.Errorf("serve created %v in the working directory", ents)
	}
}

// TestCertExpiryWarnings: with a clock that moves, a certificate within 7
// days of its expiry is warned about at load and then once a day, and one
// that expires while served is logged as an error.
func TestCertExpiryWarnings(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "soon", expiresSoon) // expires in 50h
	m, err := newTLSMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	now := time.Now()
	r, err := newCertReloader(certSource{listener: "s3", certFlag: "--tls-cert", keyFlag: "--tls-key", certFile: cert, keyFile: key},
		zerolog.New(&logs), m, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	count := func() int { return strings.Count(logs.String(), "expires in") }
	if count() != 1 {
		t.Fatalf("no warning at load:\n%s", logs.String())
	}
	for _, step := range []struct {
		advance time.Duration
		warns   int
	}{{time.Hour, 1}, {22 * time.Hour, 1}, {2 * time.Hour, 2}, {time.Hour, 2}, {22 * time.Hour, 2}, {time.Hour, 3}} {
		now = now.Add(step.advance)
		r.check(false, "poll")
		if count() != step.warns {
			t.Fatalf("after +%s: %d warnings, want %d:\n%s", step.advance, count(), step.warns, logs.String())
		}
	}
	now = now.Add(48 * time.Hour)
	r.check(false, "poll")
	if !strings.Contains(logs.String(), `"level":"error"`) || !strings.Contains(logs.String(), "has expired") {
		t.Errorf("no error for the expired certificate:\n%s", logs.String())
	}
}

// TestServeIndexCacheProbe: an s3:// index cache whose bucket does not
// exist is a startup error naming it (not a cache that silently never
// works).
func TestServeIndexCacheProbe(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	cfg, _, err := parseServeArgs([]string{"--store", store, "--archive", "data=" + man, "--anonymous", "--listen", "127.0.0.1:0",
		"--index-cache", "s3://nobucket/wharf-index", "--index-cache-trust-writers"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.LogOut = io.Discard
	cfg.Ready = func(string, string) { t.Error("serve started") }
	if err := serve(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `--index-cache s3://nobucket/wharf-index: bucket "nobucket" does not exist`) {
		t.Errorf("serve with a missing index cache bucket: %v", err)
	}
}
