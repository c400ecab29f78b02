package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// privateCA is a certificate authority made for one test: its certificate
// in caFile (what clients are given with --ca-bundle, verify=, --cacert).
type privateCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	dir    string
	caFile string
}

func newPrivateCA(t *testing.T) *privateCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "wharf integration CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &privateCA{cert: cert, key: key, dir: t.TempDir()}
	ca.caFile = filepath.Join(ca.dir, "ca.pem")
	if err := os.WriteFile(ca.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// issue makes a server certificate for 127.0.0.1 and localhost valid from
// notBefore to notAfter and returns it and its key in PEM, with its serial.
func (ca *privateCA) issue(t *testing.T, notBefore, notAfter time.Time) (certPEM, keyPEM []byte, serial string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sn, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), sn.Text(16)
}

// pair writes a fresh certificate valid for a month as NAME.crt/NAME.key.
func (ca *privateCA) pair(t *testing.T, name string) (certFile, keyFile, serial string) {
	t.Helper()
	now := time.Now()
	c, k, serial := ca.issue(t, now.Add(-time.Hour), now.Add(30*24*time.Hour))
	certFile, keyFile = filepath.Join(ca.dir, name+".crt"), filepath.Join(ca.dir, name+".key")
	replaceFile(t, certFile, c)
	replaceFile(t, keyFile, k)
	return certFile, keyFile, serial
}

// replaceFile swaps path's content atomically (write, then rename), as
// cert-manager and the kubelet do.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path+".new", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// client is a Go HTTPS client trusting only the CA. h2 false keeps it on
// HTTP/1.1; keepAlive false makes every request a new TLS handshake.
func (ca *privateCA) client(h2, keepAlive bool) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: h2, DisableKeepAlives: !keepAlive}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// startTLSWharf serves buckets main and split over TLS (keyed and
// anonymous at once: signed requests are verified, unsigned ones allowed),
// with an admin listener on the same certificate.
func startTLSWharf(t *testing.T, ca *privateCA, name, certFile, keyFile string, extra ...string) *wharfServer {
	t.Helper()
	args := []string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--store", "s3://", "--s3-endpoint", suite.s3url, "--s3-path-style", "--s3-region", "us-east-1",
		"--access-key", testAccessKey, "--secret-key", testSecretKey, "--anonymous",
		"--tls-cert", certFile, "--tls-key", keyFile}
	for _, b := range []string{"main", "split"} {
		args = append(args, "--archive", b+"="+suite.archives[b].manifestURL)
	}
	args = append(args, extra...)
	srv, err := startWharfClient(suite.bin, name, args, suite.serverEnv(), ca.client(true, true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopOrFail(t, srv) })
	if !strings.HasPrefix(srv.url, "https://") || !strings.HasPrefix(srv.adminURL, "https://") {
		t.Fatalf("wharf with --tls-cert logged %s and admin %s, want https URLs", srv.url, srv.adminURL)
	}
	srv.accessKey, srv.secretKey = testAccessKey, testSecretKey
	return srv
}

// TestTLSClients: the aws CLI (--ca-bundle), boto3 (verify=) and curl
// (--http2, --cacert) over TLS with a private CA, every byte compared; a
// client without the CA is refused, and plain HTTP gets a clear 400.
func TestTLSClients(t *testing.T) {
	ca := newPrivateCA(t)
	certFile, keyFile, _ := ca.pair(t, "server")
	srv := startTLSWharf(t, ca, "tls", certFile, keyFile)
	readme := sourceBytes(t, "main", "README.txt")
	unsplit := sourceBytes(t, "main", "big/unsplit.bin")
	huge := sourceBytes(t, "split", "huge.bin")

	t.Run("awscli", func(t *testing.T) {
		for _, cli := range findAWSCLIs(t) {
			t.Run(cli.version, func(t *testing.T) {
				env := awsEnv(t, srv)
				aws := func(args ...string) (string, string, error) {
					return runErr(env, "", cli.path, append([]string{"--endpoint-url", srv.url, "--ca-bundle", ca.caFile}, args...)...)
				}
				out, errOut, err := aws("s3", "ls", "s3://main/")
				if err != nil || !strings.Contains(out, " README.txt\n") {
					t.Fatalf("aws s3 ls over TLS: %v\n%s%s", err, out, errOut)
				}
				out, errOut, err = aws("s3", "cp", "s3://main/README.txt", "-")
				if err != nil {
					t.Fatalf("aws s3 cp -: %v %s", err, errOut)
				}
				assertSameBytes(t, "aws "+cli.version+" over TLS", "README.txt", []byte(out), readme)
				dst := filepath.Join(t.TempDir(), "huge.bin")
				if _, errOut, err := aws("s3", "cp", "s3://split/huge.bin", dst); err != nil {
					t.Fatalf("aws s3 cp huge.bin (ranged parts): %v %s", err, errOut)
				}
				got, _ := os.ReadFile(dst)
				assertSameBytes(t, "aws "+cli.version+" over TLS", "split/huge.bin", got, huge)
				// Without the CA the CLI refuses the certificate.
				_, errOut, err = runErr(env, "", cli.path, "--endpoint-url", srv.url, "s3", "ls", "s3://main/")
				if err == nil || !strings.Contains(strings.ToLower(errOut), "certificate") {
					t.Fatalf("aws without --ca-bundle: err %v, stderr %q (want a certificate verification failure)", err, tail(errOut, 3))
				}
				t.Logf("aws %s: ls, cp - and a %d-byte ranged download over TLS with --ca-bundle; refused without it", cli.version, len(huge))
			})
		}
	})

	t.Run("boto3", func(t *testing.T) {
		py := findPython(t, "python3-boto3", "boto3")
		script, _ := filepath.Abs("clients/boto3_tls.py")
		out := t.TempDir()
		job, _ := json.Marshal(map[string]any{"endpoint": srv.url, "ca": ca.caFile, "access_key": srv.accessKey, "secret_key": srv.secretKey,
			"out": out, "bucket": "main", "key": "big/unsplit.bin", "range": "bytes=1000-1999", "download": [2]string{"split", "huge.bin"}})
		stdout := run(t, baseEnv(clientHome(t)), "", py, script, string(job))
		var r struct {
			Boto3        string
			Keys         []string
			ContentRange string `json:"content_range"`
			Files        map[string]string
			Unverified   string
		}
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("boto3_tls.py: %v\n%s", err, stdout)
		}
		if len(r.Keys) != len(suite.archives["main"].keys) {
			t.Errorf("boto3 list_objects_v2 over TLS: %d keys, want %d", len(r.Keys), len(suite.archives["main"].keys))
		}
		if r.ContentRange != fmt.Sprintf("bytes 1000-1999/%d", len(unsplit)) {
			t.Errorf("boto3 ranged get_object: Content-Range %q", r.ContentRange)
		}
		for name, want := range map[string][]byte{"object": unsplit, "range": unsplit[1000:2000], "download": huge, "presigned": readme} {
			got, err := os.ReadFile(r.Files[name])
			if err != nil {
				t.Fatalf("boto3 %s: %v", name, err)
			}
			assertSameBytes(t, "boto3 "+r.Boto3+" over TLS", name, got, want)
		}
		if !strings.Contains(strings.ToLower(r.Unverified), "certificate") {
			t.Errorf("boto3 with the system CAs (verify=True) did not fail on the certificate: %q", r.Unverified)
		}
		t.Logf("boto3 %s: list, get_object, ranged get, download_file (%d bytes) and a presigned GET over TLS with verify=CA; refused with the system CAs", r.Boto3, len(huge))
	})

	t.Run("curl", func(t *testing.T) {
		curl := need(t, "curl", "curl")
		dir := t.TempDir()
		fetch := func(proto, url string, extra ...string) (version, code string, body []byte) {
			t.Helper()
			dst := filepath.Join(dir, "body")
			args := append([]string{proto, "--cacert", ca.caFile, "-sS", "-o", dst, "-w", "%{http_version} %{http_code}"}, extra...)
			out := run(t, baseEnv(clientHome(t)), "", curl, append(args, url)...)
			body, _ = os.ReadFile(dst)
			f := strings.Fields(out)
			if len(f) != 2 {
				t.Fatalf("curl -w: %q", out)
			}
			return f[0], f[1], body
		}
		v, code, body := fetch("--http2", srv.url+"/main/README.txt")
		if v != "2" || code != "200" {
			t.Errorf("curl --http2: HTTP/%s %s, want HTTP/2 200", v, code)
		}
		assertSameBytes(t, "curl --http2", "README.txt", body, readme)
		v, code, body = fetch("--http2", srv.url+"/main/big/unsplit.bin", "-r", "4096-8191")
		if v != "2" || code != "206" {
			t.Errorf("curl --http2 -r: HTTP/%s %s, want HTTP/2 206", v, code)
		}
		assertSameBytes(t, "curl --http2 -r 4096-8191", "big/unsplit.bin", body, unsplit[4096:8192])
		v, code, body = fetch("--http1.1", srv.url+"/main/README.txt")
		if v != "1.1" || code != "200" {
			t.Errorf("curl --http1.1: HTTP/%s %s", v, code)
		}
		assertSameBytes(t, "curl --http1.1", "README.txt", body, readme)
		if v, code, _ := fetch("--http2", srv.adminURL+"/readyz"); v != "2" || code != "200" {
			t.Errorf("curl --http2 admin /readyz: HTTP/%s %s", v, code)
		}
		// Plain HTTP to the TLS port.
		plain := "http://" + strings.TrimPrefix(srv.url, "https://") + "/main/README.txt"
		out := run(t, baseEnv(clientHome(t)), "", curl, "-sS", "-w", "\n%{http_code}", plain)
		if !strings.Contains(out, "Client sent an HTTP request to an HTTPS server.") || !strings.HasSuffix(out, "\n400") {
			t.Errorf("plain HTTP to the TLS port: %q", out)
		}
		// Without the CA curl refuses the certificate (exit 60).
		_, errOut, err := runErr(baseEnv(clientHome(t)), "", curl, "-sS", "--http2", srv.url+"/main/README.txt")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 60 {
			t.Errorf("curl without --cacert: %v %q, want exit 60 (certificate problem)", err, errOut)
		}
		t.Log("curl: HTTP/2 negotiated by ALPN (200 and ranged 206), HTTP/1.1 still served, admin over HTTP/2; plain HTTP answered 400 with a sentence")
	})
}

// load hammers srv with GETs whose bodies are checked until stop closes:
// some clients keep one connection (which must survive every reload),
// others make a new TLS connection for every request.
type load struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	serials    map[string]int // certificate serial seen on new connections → requests
	keptSerial map[string]int // serials seen by the keep-alive clients
	errs       []string
}

func (l *load) run(t *testing.T, ca *privateCA, url string, stop <-chan struct{}, wg *sync.WaitGroup) {
	readme := sourceBytes(t, "main", "README.txt")
	unsplit := sourceBytes(t, "main", "big/unsplit.bin")
	for i := 0; i < 6; i++ {
		keep := i%2 == 0
		c := ca.client(i%3 != 2, keep)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				path, want := "/main/README.txt", readme
				req, _ := http.NewRequest("GET", url+path, nil)
				if n%2 == 1 { // a 1 MiB ranged read: responses in flight across the reload
					off := (n * 7919 * 1024) % (len(unsplit) - 1<<20)
					req, _ = http.NewRequest("GET", url+"/main/big/unsplit.bin", nil)
					req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+1<<20-1))
					want = unsplit[off : off+1<<20]
				}
				resp, err := c.Do(req)
				if err != nil {
					l.fail(fmt.Sprintf("client %d: %v", i, err))
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || (resp.StatusCode != 200 && resp.StatusCode != 206) || string(b) != string(want) {
					l.fail(fmt.Sprintf("client %d: %s, %d bytes, %v", i, resp.Status, len(b), err))
					continue
				}
				l.ok.Add(1)
				l.mu.Lock()
				s := resp.TLS.PeerCertificates[0].SerialNumber.Text(16)
				if keep {
					l.keptSerial[s]++
				} else {
					l.serials[s]++
				}
				l.mu.Unlock()
			}
		}(i)
	}
}

func (l *load) fail(msg string) {
	l.failed.Add(1)
	l.mu.Lock()
	if len(l.errs) < 5 {
		l.errs = append(l.errs, msg)
	}
	l.mu.Unlock()
}

func (l *load) seen(serial string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.serials[serial] > 0
}

// TestTLSRotationUnderLoad: clients hammer the server while its
// certificate is replaced, once followed by SIGHUP and once picked up by
// the poll (the files written one after the other, so the poll first sees
// a mismatched pair and keeps the old one). No request fails, connections
// kept open across the rotation survive it, and new connections get the
// new certificate.
func TestTLSRotationUnderLoad(t *testing.T) {
	for _, mode := range []string{"SIGHUP", "poll"} {
		t.Run(mode, func(t *testing.T) {
			ca := newPrivateCA(t)
			certFile, keyFile, first := ca.pair(t, "server")
			interval := "0"
			if mode == "poll" {
				interval = "250ms"
			}
			srv := startTLSWharf(t, ca, "rotate-"+mode, certFile, keyFile, "--tls-reload-interval", interval)
			l := &load{serials: map[string]int{}, keptSerial: map[string]int{}}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			l.run(t, ca, srv.url, stop, &wg)
			time.Sleep(time.Second)

			now := time.Now()
			newCert, newKey, second := ca.issue(t, now.Add(-time.Hour), now.Add(30*24*time.Hour))
			if mode == "SIGHUP" {
				replaceFile(t, certFile, newCert)
				replaceFile(t, keyFile, newKey)
				// SIGHUP also rescans: the archives re-list their storage
				// classes, listings booked apart from the read path's.
				var err error
				suite.backend.startup(func() {
					if err = srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
						return
					}
					for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && !strings.Contains(srv.Logs(), "storage classes refreshed"); {
						time.Sleep(10 * time.Millisecond)
					}
				})
				if err != nil {
					t.Fatal(err)
				}
			} else {
				replaceFile(t, certFile, newCert)
				time.Sleep(700 * time.Millisecond) // a poll or two see the new certificate with the old key
				replaceFile(t, keyFile, newKey)
			}
			deadline := time.Now().Add(10 * time.Second)
			for !l.seen(second) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(time.Second) // more load on the new certificate
			close(stop)
			wg.Wait()

			l.mu.Lock()
			defer l.mu.Unlock()
			if n := l.failed.Load(); n != 0 {
				t.Errorf("%d of %d requests failed during the rotation: %q", n, n+l.ok.Load(), l.errs)
			}
			if l.serials[first] == 0 || l.serials[second] == 0 {
				t.Fatalf("new connections saw certificates %v, want both %s (old) and %s (new)\n%s", l.serials, first, second, tail(srv.Logs(), 20))
			}
			if len(l.keptSerial) != 1 || l.keptSerial[first] == 0 {
				t.Errorf("keep-alive clients saw certificates %v: their connections were not kept across the rotation", l.keptSerial)
			}
			logs := srv.Logs()
			if !regexp.MustCompile(`"reason":"` + map[string]string{"SIGHUP": "SIGHUP", "poll": "poll"}[mode] + `".*TLS certificate loaded`).MatchString(logs) {
				t.Errorf("no reload logged with reason %s:\n%s", mode, tail(logs, 20))
			}
			// The half-written pair is logged once however many polls see it
			// (none may, on a machine slow enough to skip every poll in the
			// 700 ms; cmd/wharf's TestServeTLSPoll waits for the polls).
			if n := strings.Count(logs, "TLS certificate reload failed"); mode == "poll" && n > 1 {
				t.Errorf("the half-written rotation was logged %d times, want once:\n%s", n, tail(logs, 20))
			}
			t.Logf("%s rotation under load: %d requests (new connections: %v; keep-alive: %v), 0 failed", mode, l.ok.Load(), l.serials, l.keptSerial)
		})
	}
}

// TestTLSBadInput: each bad TLS, CORS or index-cache value makes wharf
// serve exit non-zero at once with an error naming the value or file; a
// certificate expiring within 7 days starts with a warning.
func TestTLSBadInput(t *testing.T) {
	ca := newPrivateCA(t)
	certFile, keyFile, _ := ca.pair(t, "good")
	_, otherKey, _ := ca.pair(t, "other")
	now := time.Now()
	oc, ok, _ := ca.issue(t, now.Add(-72*time.Hour), now.Add(-24*time.Hour))
	oldCert, oldKey := filepath.Join(ca.dir, "old.crt"), filepath.Join(ca.dir, "old.key")
	replaceFile(t, oldCert, oc)
	replaceFile(t, oldKey, ok)
	garbage := filepath.Join(ca.dir, "garbage.crt")
	replaceFile(t, garbage, []byte("not a certificate\n"))
	notDir := filepath.Join(ca.dir, "garbage.crt")
	base := []string{"serve", "--listen", "127.0.0.1:0", "--store", "s3://", "--s3-endpoint", suite.s3url, "--s3-path-style",
		"--s3-region", "us-east-1", "--anonymous", "--archive", "main=" + suite.archives["main"].manifestURL}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing certificate", []string{"--tls-cert", "/nonexistent/tls.crt", "--tls-key", keyFile}, "--tls-cert /nonexistent/tls.crt: stat /nonexistent/tls.crt: no such file or directory"},
		{"missing key", []string{"--tls-cert", certFile, "--tls-key", "/nonexistent/tls.key"}, "--tls-key /nonexistent/tls.key"},
		{"unreadable certificate (a directory)", []string{"--tls-cert", ca.dir, "--tls-key", keyFile}, "--tls-cert " + ca.dir + ": not a regular file"},
		{"certificate not PEM", []string{"--tls-cert", garbage, "--tls-key", keyFile}, "--tls-cert " + garbage + ": no PEM CERTIFICATE block"},
		{"key not matching", []string{"--tls-cert", certFile, "--tls-key", otherKey}, "--tls-key " + otherKey + ": the private key does not match the certificate in --tls-cert " + certFile},
		{"expired certificate", []string{"--tls-cert", oldCert, "--tls-key", oldKey}, "--tls-cert " + oldCert + ": the certificate (CN=localhost) expired at"},
		{"certificate without key", []string{"--tls-cert", certFile}, "--tls-cert and --tls-key"},
		{"admin certificate without admin listener", []string{"--admin-tls-cert", certFile, "--admin-tls-key", keyFile}, "no admin listener"},
		{"plain admin off loopback", []string{"--tls-cert", certFile, "--tls-key", keyFile, "--admin-listen", "0.0.0.0:0", "--admin-plain"}, "0.0.0.0:0 is not loopback"},
		{"negative reload interval", []string{"--tls-cert", certFile, "--tls-key", keyFile, "--tls-reload-interval", "-1s"}, "--tls-reload-interval -1s"},
		{"CORS origin with a path", []string{"--cors-allow-origin", "https://viewer.example.org/index.html"}, `"https://viewer.example.org/index.html"`},
		{"CORS origin with junk", []string{"--cors-allow-origin", "http://localhost:8080x"}, `"http://localhost:8080x"`},
		{"CORS origin without scheme", []string{"--cors-allow-origin", "viewer.example.org"}, `"viewer.example.org"`},
		{"negative CORS max age", []string{"--cors-allow-origin", "*", "--cors-max-age", "-1m"}, "--cors-max-age -1m0s"},
		{"index cache directory missing", []string{"--index-cache", "/nonexistent/wharf-index"}, `"/nonexistent/wharf-index"`},
		{"index cache a file", []string{"--index-cache", notDir}, `"` + notDir + `": not a directory`},
		{"index cache another URL", []string{"--index-cache", "gs://idx/wharf"}, `"gs://idx/wharf"`},
		{"index cache s3 with one slash", []string{"--index-cache", "s3:/idx/wharf"}, `"s3:/idx/wharf"`},
		{"index cache s3 without its bucket", []string{"--index-cache", "s3://idx/wharf", "--index-cache-trust-writers"}, `--index-cache s3://idx/wharf: bucket "idx" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wd := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, suite.bin, append(append([]string(nil), base...), tc.args...)...)
			cmd.Env, cmd.Dir = suite.serverEnv(), wd
			var (
				out []byte
				err error
			)
			suite.backend.startup(func() { out, err = cmd.CombinedOutput() }) // a start that fails
			if ctx.Err() != nil {
				t.Fatalf("wharf serve %q kept running (it started):\n%s", tc.args, tail(string(out), 10))
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("wharf serve %q: %v, want a non-zero exit", tc.args, err)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("wharf serve %q said:\n%s\nwant %q", tc.args, out, tc.want)
			}
			if ents, _ := os.ReadDir(wd); len(ents) != 0 {
				t.Errorf("wharf serve %q left %v in its working directory", tc.args, ents)
			}
		})
	}

	// A certificate expiring within 7 days: served, with a warning.
	sc, sk, _ := ca.issue(t, now.Add(-time.Hour), now.Add(3*24*time.Hour))
	soonCert, soonKey := filepath.Join(ca.dir, "soon.crt"), filepath.Join(ca.dir, "soon.key")
	replaceFile(t, soonCert, sc)
	replaceFile(t, soonKey, sk)
	srv := startTLSWharf(t, ca, "expiring", soonCert, soonKey)
	if !regexp.MustCompile(`"level":"warn".*TLS certificate ` + regexp.QuoteMeta(soonCert) + ` expires in \d+h`).MatchString(srv.Logs()) {
		t.Errorf("no expiry warning for a certificate valid 3 more days:\n%s", tail(srv.Logs(), 10))
	}
}

// TestDemoTLS runs `wharf demo --tls`: the printed CA verifies the served
// certificate, HTTP/2 is negotiated, and the bytes are the sample's.
func TestDemoTLS(t *testing.T) {
	home := clientHome(t)
	// The readiness probe skips verification: the CA is only known from
	// the demo's own output, which is checked below.
	probe := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	srv, err := startWharfClient(suite.bin, "demo-tls", []string{"demo", "--tls", "--listen", "127.0.0.1:0"}, baseEnv(home), probe)
	if err != nil {
		t.Fatal(err)
	}
	defer stopOrFail(t, srv)
	m := regexp.MustCompile(`trust (\S+) \(boto3`).FindStringSubmatch(srv.Logs())
	if m == nil || !strings.Contains(srv.Logs(), "--ca-bundle "+m[1]) || !strings.HasPrefix(srv.url, "https://") {
		t.Fatalf("wharf demo --tls did not print its CA and the aws --ca-bundle command:\n%s", srv.Logs())
	}
	pem, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", m[1])
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	resp, err := c.Get(srv.url + "/sample/README.md")
	if err != nil {
		t.Fatalf("GET with the demo's CA: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want, _ := os.ReadFile("../cmd/wharf/sample/README.md")
	if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" {
		t.Fatalf("GET README.md: %s %s", resp.Proto, resp.Status)
	}
	assertSameBytes(t, "wharf demo --tls", "README.md", body, want)
	t.Logf("wharf demo --tls: README.md over %s verified with the printed CA %s", resp.Proto, m[1])
}
