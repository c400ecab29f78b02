package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// peerSecretFile writes a private secret file of n bytes.
func peerSecretFile(t *testing.T, n int, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "peer-secret")
	if err := os.WriteFile(p, append(bytes.Repeat([]byte("k"), n), '\n'), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPeerFlagValidation: every peer option is checked at start, and a
// wrong one is an error naming the flag.
func TestPeerFlagValidation(t *testing.T) {
	t.Setenv("WHARF_ACCESS_KEY", "")
	t.Setenv("WHARF_SECRET_KEY", "")
	good := peerSecretFile(t, 40, 0o600)
	short := peerSecretFile(t, 20, 0o600)
	open := peerSecretFile(t, 40, 0o644)
	group := peerSecretFile(t, 40, 0o640)   // a service group's: accepted
	groupRO := peerSecretFile(t, 40, 0o440) // Kubernetes with an fsGroup: accepted
	huge := peerSecretFile(t, 5000, 0o600)  // not a secret file
	blank := peerSecretFile(t, 0, 0o600)    // only a newline
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "peer", validNow)
	oldCert, oldKey := pki.pair(t, "old", expired)
	caFile := func(p *testPKI) string {
		f := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(f, p.ca.certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	ownCA, otherCA := caFile(pki), caFile(newTestPKI(t))
	base := []string{"--store", "s3://", "--discover", "s3://a/b", "--anonymous", "--listen", "127.0.0.1:9000"}
	two := "http://10.0.0.1:7946,http://10.0.0.2:7946"
	for _, tc := range []struct {
		name string
		args []string
		want string // "" = valid
	}{
		{"off", nil, ""},
		{"static", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", good}, ""},
		{"repeated flag", []string{"--peers", "http://10.0.0.1:7946", "--peers", "http://10.0.0.2:7946", "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", good}, ""},
		{"dns with advertise", []string{"--peers", "dns+http://wharf-peers.ns.svc:7946", "--peer-listen", "0.0.0.0:7946",
			"--peer-advertise", "http://10.1.2.3:7946", "--peer-secret-file", good}, ""},
		{"tls", []string{"--peers", "https://127.0.0.1:7946,https://127.0.0.2:7946", "--peer-listen", "127.0.0.1:7946", "--peer-secret-file", good,
			"--peer-tls-cert", cert, "--peer-tls-key", key}, ""},
		// The others verify this replica's certificate against the host
		// of the URL it advertises: one that does not cover it is refused
		// by every one of them.
		{"tls cert not for the advertised host", []string{"--peers", "https://10.0.0.1:7946,https://10.0.0.2:7946", "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", good,
			"--peer-tls-cert", cert, "--peer-tls-key", key}, "--peer-tls-cert " + cert + " does not cover 10.0.0.1"},
		{"tls with its CA", []string{"--peers", "https://127.0.0.1:7946,https://127.0.0.2:7946", "--peer-listen", "127.0.0.1:7946", "--peer-secret-file", good,
			"--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-tls-ca", ownCA}, ""},
		// The others verify it with the same --peer-tls-ca: a certificate
		// that bundle does not verify is refused by all of them.
		{"tls cert not from --peer-tls-ca", []string{"--peers", "https://127.0.0.1:7946,https://127.0.0.2:7946", "--peer-listen", "127.0.0.1:7946", "--peer-secret-file", good,
			"--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-tls-ca", otherCA}, "is not verified by --peer-tls-ca " + otherCA},
		{"listen without peers", []string{"--peer-listen", "10.0.0.1:7946"}, "--peer-listen 10.0.0.1:7946: given without --peers"},
		{"secret without peers", []string{"--peer-secret-file", good}, "given without --peers"},
		{"cache bytes without peers", []string{"--peer-cache-bytes", "8MiB"}, "--peer-cache-bytes: given without --peers"},
		{"peers without listen", []string{"--peers", two, "--peer-secret-file", good}, "needs --peer-listen"},
		{"peers without secret", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946"}, "needs --peer-secret-file"},
		{"peer a path", []string{"--peers", "/etc/wharf/peers", "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", good}, "a path, not a URL"},
		{"peer without port", []string{"--peers", "http://10.0.0.1", "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", good}, "no port"},
		{"self not listed", []string{"--peers", two, "--peer-listen", "10.0.0.9:7946", "--peer-secret-file", good}, "not among the peers"},
		{"advertise not listed", []string{"--peers", two, "--peer-listen", "0.0.0.0:7946", "--peer-advertise", "http://10.0.0.3:7946", "--peer-secret-file", good}, "not among the peers"},
		{"advertise a path", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-advertise", "/x", "--peer-secret-file", good}, "a path, not a URL"},
		{"wildcard listen, wildcard advertise", []string{"--peers", "http://0.0.0.0:7946,http://10.0.0.2:7946", "--peer-listen", "0.0.0.0:7946", "--peer-advertise", "http://0.0.0.0:7946", "--peer-secret-file", good}, "the unspecified address"},
		{"wildcard listen, no advertise", []string{"--peers", two, "--peer-listen", ":7946", "--peer-secret-file", good}, "give --peer-advertise"},
		{"loopback self among remote peers", []string{"--peers", "http://127.0.0.1:7946,http://10.0.0.2:7946", "--peer-listen", "127.0.0.1:7946", "--peer-secret-file", good}, "a loopback URL reaches only its own host"},
		{"listen port out of range", []string{"--peers", "dns+http://wharf-peers.ns.svc:7946", "--peer-listen", "0.0.0.0:79460",
			"--peer-advertise", "http://10.1.2.3:7946", "--peer-secret-file", good}, "--peer-listen \"0.0.0.0:79460\": port \"79460\": want 1 to 65535"},
		{"listen port not a number", []string{"--peers", "dns+http://wharf-peers.ns.svc:7946", "--peer-listen", "0.0.0.0:peer",
			"--peer-advertise", "http://10.1.2.3:7946", "--peer-secret-file", good}, "want 1 to 65535"},
		{"listen port 0", []string{"--peers", "dns+http://wharf-peers.ns.svc:7946", "--peer-listen", "0.0.0.0:0",
			"--peer-advertise", "http://10.1.2.3:7946", "--peer-secret-file", good}, "want 1 to 65535"},
		{"listen not host:port", []string{"--peers", two, "--peer-listen", "7946", "--peer-secret-file", good}, "want HOST:PORT"},
		{"same as --listen", []string{"--peers", "http://127.0.0.1:9000", "--peer-listen", "127.0.0.1:9000", "--peer-secret-file", good}, "the same address as --listen"},
		{"same as --admin-listen", []string{"--admin-listen", "0.0.0.0:7946", "--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", good}, "the same address as --admin-listen"},
		{"secret short", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", short}, "20 bytes of secret, want at least 32"},
		{"secret world-readable", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", open}, "readable by every user"},
		{"secret group-readable", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", group}, ""},
		{"secret group-read-only", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", groupRO}, ""},
		{"secret too large", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", huge}, "larger than 4096 bytes"},
		{"secret blank", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", blank}, "0 bytes of secret"},
		{"secret a URL", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", "s3://b/secret"}, "a URL, not a local file"},
		{"secret missing", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", "/nonexistent/secret"}, "/nonexistent/secret"},
		{"secret a directory", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", t.TempDir()}, "not a regular file"},
		{"https without tls", []string{"--peers", "https://10.0.0.1:7946,https://10.0.0.2:7946", "--peer-listen", "10.0.0.1:7946",
			"--peer-advertise", "https://10.0.0.1:7946", "--peer-secret-file", good}, "an https URL needs --peer-tls-cert"},
		{"tls but http peers", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", good,
			"--peer-tls-cert", cert, "--peer-tls-key", key}, "one scheme"},
		{"tls, advertise http", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-advertise", "http://10.0.0.1:7946", "--peer-secret-file", good,
			"--peer-tls-cert", cert, "--peer-tls-key", key}, "the URL is https://"},
		{"cert without key", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", good, "--peer-tls-cert", cert}, "go together"},
		{"expired cert", []string{"--peers", "https://127.0.0.1:7946", "--peer-listen", "127.0.0.1:7946", "--peer-secret-file", good,
			"--peer-tls-cert", oldCert, "--peer-tls-key", oldKey}, "expired"},
		{"ca without tls", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", good, "--peer-tls-ca", cert}, "given without --peer-tls-cert"},
		{"ca not PEM", []string{"--peers", "https://127.0.0.1:7946", "--peer-listen", "127.0.0.1:7946", "--peer-secret-file", good,
			"--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-tls-ca", good}, "no PEM certificate"},
		{"cache bytes too large", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", good, "--cache-bytes", "64MiB", "--peer-cache-bytes", "40MiB"}, "--peer-cache-bytes"},
		{"cache bytes too small", []string{"--peers", two, "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", good, "--peer-cache-bytes", "1KiB"}, "want 1MiB to half"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := parseServeArgs(append(append([]string(nil), base...), tc.args...))
			if err == nil {
				_, err = cfg.checkConfig()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid options refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted; want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q; want %q", err, tc.want)
			}
		})
	}
}

// TestPeerConfigYAML: every peer flag has its YAML key, and both say the
// same.
func TestPeerConfigYAML(t *testing.T) {
	doc := "peer_listen: 10.0.0.1:7946\npeers: [http://10.0.0.1:7946, http://10.0.0.2:7946]\npeer_advertise: http://10.0.0.1:7946\n" +
		"peer_secret_file: /run/secrets/peer\npeer_tls_cert: /c.pem\npeer_tls_key: /k.pem\npeer_tls_ca: /ca.pem\npeer_cache_bytes: 16MiB\n"
	fromFile, _, err := parseServeArgs([]string{"--config", writeFile(t, "wharf.yaml", doc)})
	if err != nil {
		t.Fatal(err)
	}
	fromFlags, _, err := parseServeArgs([]string{"--peer-listen", "10.0.0.1:7946", "--peers", "http://10.0.0.1:7946", "--peers", "http://10.0.0.2:7946",
		"--peer-advertise", "http://10.0.0.1:7946", "--peer-secret-file", "/run/secrets/peer", "--peer-tls-cert", "/c.pem", "--peer-tls-key", "/k.pem",
		"--peer-tls-ca", "/ca.pem", "--peer-cache-bytes", "16MiB"})
	if err != nil {
		t.Fatal(err)
	}
	want := peerConfig{PeerListen: "10.0.0.1:7946", Peers: []string{"http://10.0.0.1:7946", "http://10.0.0.2:7946"}, PeerAdvertise: "http://10.0.0.1:7946",
		PeerSecretFile: "/run/secrets/peer", PeerTLSCert: "/c.pem", PeerTLSKey: "/k.pem", PeerTLSCA: "/ca.pem", PeerCacheBytes: 16 << 20}
	if !reflect.DeepEqual(fromFile.peerConfig, want) || !reflect.DeepEqual(fromFlags.peerConfig, want) {
		t.Errorf("file %+v\nflags %+v\nwant %+v", fromFile.peerConfig, fromFlags.peerConfig, want)
	}
	checkConfigRoundTrip(t, []byte("store: s3://\ndiscover: [s3://a/b]\n"+doc))
}

// freePort returns a port free on 127.0.0.1 now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// metricValue reads an unlabelled counter from a /metrics page.
func metricValue(t *testing.T, page []byte, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("/metrics lacks %s", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestServePeers: two "wharf serve" replicas over one store, peers of each
// other (plain http, and https with --peer-tls-cert/--peer-tls-ca): every
// file reads back exactly from both, frames move between them
// (wharf_peer_hits_total), /-/peers shows the ring, and the peer port
// refuses an unauthenticated request.
func TestServePeers(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[tlsOn], func(t *testing.T) { testServePeers(t, tlsOn) })
	}
}

func testServePeers(t *testing.T, tlsOn bool) {
	files := map[string][]byte{}
	for i := range 12 {
		files[fmt.Sprintf("d/f%02d.bin", i)] = bytes.Repeat([]byte(fmt.Sprintf("file %d of the peer test. ", i)), 5000+i*300)
	}
	store, man := packServeTree(t, files)
	secret := peerSecretFile(t, 40, 0o600)
	ports := []int{freePort(t), freePort(t)}
	scheme := "http"
	var tlsCfg peerConfig
	pki := newTestPKI(t)
	if tlsOn {
		scheme = "https"
		tlsCfg.PeerTLSCert, tlsCfg.PeerTLSKey = pki.pair(t, "peer", validNow)
		tlsCfg.PeerTLSCA = filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(tlsCfg.PeerTLSCA, pki.ca.certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var urls []string
	for _, p := range ports {
		urls = append(urls, fmt.Sprintf("%s://127.0.0.1:%d", scheme, p))
	}
	type rep struct {
		addr, admin string
		logs        *lockedBuffer
	}
	var reps []rep
	for i := range ports {
		addr, admin, logs, _ := startServe(t, serveConfig{
			Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: store,
			Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true,
			CacheBytes: 64 << 20, LogFormat: "json",
			peerConfig: peerConfig{PeerListen: fmt.Sprintf("127.0.0.1:%d", ports[i]), Peers: []string{strings.Join(urls, ",")}, PeerSecretFile: secret,
				PeerTLSCert: tlsCfg.PeerTLSCert, PeerTLSKey: tlsCfg.PeerTLSKey, PeerTLSCA: tlsCfg.PeerTLSCA},
		})
		waitReady(t, admin)
		reps = append(reps, rep{addr, admin, logs})
	}
	for _, r := range reps {
		for k, b := range files {
			code, body := get(t, "http://"+r.addr+"/data/"+k)
			if code != 200 || !bytes.Equal(body, b) {
				t.Fatalf("GET %s from %s: %d, %d bytes (want %d)", k, r.addr, code, len(body), len(b))
			}
		}
	}
	var hits float64
	for i, r := range reps {
		_, page := get(t, "http://"+r.admin+"/metrics")
		hits += metricValue(t, page, "wharf_peer_hits_total")
		_, body := get(t, "http://"+r.admin+"/-/peers")
		var p struct {
			Self string `json:"self"`
			Ring []struct {
				URL   string `json:"url"`
				State string `json:"state"`
			} `json:"ring"`
		}
		if err := json.Unmarshal(body, &p); err != nil || p.Self != urls[i] || len(p.Ring) != 2 {
			t.Errorf("/-/peers of %s: %v %s", r.admin, err, body)
		}
	}
	if hits == 0 {
		t.Error("no frame moved between the replicas")
	}
	client := http.DefaultClient
	if tlsOn {
		client = pki.client(false)
	}
	resp, err := client.Get(urls[0] + "/wharf-peer/v1/frame?b=src&k=x&e=&o=0&n=1&s=" + strings.Repeat("0", 64))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if code := resp.StatusCode; code != 403 || len(body) != 0 {
		t.Errorf("unauthenticated peer request: %d with %d bytes, want 403 and none", code, len(body))
	}
	if tlsOn {
		// Peers speak HTTP/1.1: the peer listener offers no HTTP/2 (its
		// streams, frames and their attacks) to a client that asks.
		resp, err := pki.client(true).Get(urls[0] + "/wharf-peer/v1/frame")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 1 || resp.StatusCode != 403 {
			t.Errorf("peer listener with an HTTP/2 client: %s %d, want HTTP/1.1 403", resp.Proto, resp.StatusCode)
		}
		// 50 connections that are no TLS at all: net/http logs a
		// handshake error for each, the peer listener at most one.
		for range 50 {
			c, err := net.Dial("tcp", strings.TrimPrefix(urls[0], "https://"))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "GET / HTTP/1.0\r\n\r\n")
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.Copy(io.Discard, c) // until the listener closes it
			c.Close()
		}
		if n := strings.Count(reps[0].logs.String(), "TLS handshake error"); n != 1 {
			t.Errorf("50 failed TLS handshakes on the peer port: %d log lines, want 1", n)
		}
	}
}

// TestMemoryTargetWithPeers: with --peers, --memory-target's division
// names the peer cache inside the frame cache (an eighth by default, the
// explicit --peer-cache-bytes otherwise), and the result is valid.
func TestMemoryTargetWithPeers(t *testing.T) {
	t.Setenv("WHARF_ACCESS_KEY", "")
	t.Setenv("WHARF_SECRET_KEY", "")
	secret := peerSecretFile(t, 40, 0o600)
	peers := []string{"--peers", "http://10.0.0.1:7946,http://10.0.0.2:7946", "--peer-listen", "10.0.0.1:7946", "--peer-secret-file", secret}
	for _, tc := range []struct {
		name string
		args []string
		want func(p memoryPlan) int64
	}{
		{"no peers", nil, func(memoryPlan) int64 { return 0 }},
		{"default", peers, func(p memoryPlan) int64 { return p.Cache / 8 }},
		{"explicit", append([]string{"--peer-cache-bytes", "100MiB"}, peers...), func(memoryPlan) int64 { return 100 << 20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--store", "s3://", "--discover", "s3://a/b", "--anonymous", "--memory-target", "4GiB"}, tc.args...)
			cfg, _, err := parseServeArgs(args)
			if err != nil {
				t.Fatal(err)
			}
			p, planned, err := cfg.applyMemoryTarget()
			if err != nil || !planned {
				t.Fatalf("applyMemoryTarget: %v %v", planned, err)
			}
			if want := tc.want(p); p.PeerCache != want || p.PeerCache > p.Cache/2 {
				t.Errorf("peer cache %d of a cache of %d, want %d", p.PeerCache, p.Cache, want)
			}
			if _, err := cfg.checkConfig(); err != nil {
				t.Errorf("checkConfig: %v", err)
			}
		})
	}
}
