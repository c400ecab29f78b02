package integration

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gopkg.in/yaml.v3"
)

// TestComposeCommands runs the `seed` (wharf pack) and `wharf` (wharf serve)
// commands of docker-compose.yml as written, with the versitygw endpoint
// replaced by gofakes3 and the listeners moved to loopback, so the compose
// file's wiring is checked even though CI does not run containers. The
// `wharf-tls` service's command runs too, with a certificate of a private CA
// in place of the mounted ./certs.
func TestComposeCommands(t *testing.T) {
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Image   string   `yaml:"image"`
			Command []string `yaml:"command"`
			Volumes []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	// The backing store is versitygw (maintained), never MinIO (issue 25).
	if img := doc.Services["s3"].Image; !strings.HasPrefix(img, "versity/versitygw:") {
		t.Errorf("docker-compose.yml: service s3 runs %q, want versity/versitygw:VERSION", img)
	}
	for name, svc := range doc.Services {
		if strings.Contains(svc.Image, "minio") {
			t.Errorf("docker-compose.yml: service %s still runs MinIO (%s)", name, svc.Image)
		}
	}
	seed, serve := doc.Services["seed"].Command, doc.Services["wharf"].Command
	if len(seed) == 0 || seed[0] != "pack" || len(serve) == 0 || serve[0] != "serve" {
		t.Fatalf("docker-compose.yml: want services seed (pack ...) and wharf (serve ...), got %q and %q", seed, serve)
	}
	sample, _ := filepath.Abs("../cmd/wharf/sample")
	rewrite := func(args []string) []string {
		out := make([]string, len(args))
		for i, a := range args {
			switch {
			case a == "/sample":
				a = sample
			case strings.HasPrefix(a, "--listen="), strings.HasPrefix(a, "--admin-listen="):
				a = a[:strings.Index(a, "=")+1] + "127.0.0.1:0"
			}
			out[i] = strings.ReplaceAll(a, "http://s3:7070", suite.s3url)
		}
		return out
	}
	flag := func(args []string, name string) string {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
		t.Fatalf("docker-compose.yml: %q lacks --%s=", args, name)
		return ""
	}
	bucket := flag(seed, "bucket")
	if _, err := suite.s3client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	env := suite.serverEnv()
	out := run(t, env, "", suite.bin, rewrite(seed)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	printed := lines[len(lines)-1]
	archive := flag(serve, "archive")
	if _, url, _ := strings.Cut(archive, "="); url != printed {
		t.Fatalf("docker-compose.yml: wharf serves %s but the seed step's wharf pack printed %s", url, printed)
	}
	name, _, _ := strings.Cut(archive, "=")

	srv, err := startWharf(suite.bin, "compose", rewrite(serve), env) // books its start-up listings
	if err != nil {
		t.Fatal(err)
	}
	defer stopOrFail(t, srv)
	want, err := treeKeys(sample)
	if err != nil {
		t.Fatal(err)
	}
	c := sdkClient(srv, "")
	got := map[string]int64{}
	var order []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(name)})
	for pages := 1; p.HasMorePages(); pages++ {
		if limit := listPageCap(len(want), 1000); pages > limit {
			t.Fatalf("compose: ListObjectsV2 %s still truncated after %d pages for %d keys: a continuation loop", name, limit, len(want))
		}
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			got[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
			order = append(order, aws.ToString(o.Key))
		}
	}
	checkListing(t, "compose: ListObjectsV2 "+name, want, got, order)
	for _, k := range order {
		resp, err := http.Get(srv.url + "/" + name + "/" + escapePath(k))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("compose: GET %s/%s: %s %v", name, k, resp.Status, err)
		}
		w, _ := os.ReadFile(filepath.Join(sample, filepath.FromSlash(k)))
		assertSameBytes(t, "compose", k, b, w)
	}
	t.Logf("docker-compose.yml: seed's `wharf pack` printed %s, wharf's `wharf serve` serves it as bucket %q: %d sample files byte-identical", printed, name, len(order))

	// wharf-tls: the same archive over TLS from the mounted certificate
	// directory, with CORS for its viewer origin.
	tlsSvc, ok := doc.Services["wharf-tls"]
	if !ok {
		t.Fatal("docker-compose.yml: no wharf-tls service")
	}
	var certDir string
	for _, v := range tlsSvc.Volumes {
		if host, ctr, ok := strings.Cut(v, ":"); ok && host == "./certs" {
			certDir, _, _ = strings.Cut(ctr, ":")
		}
	}
	if certDir == "" || flag(tlsSvc.Command, "tls-cert") != certDir+"/tls.crt" || flag(tlsSvc.Command, "tls-key") != certDir+"/tls.key" {
		t.Fatalf("docker-compose.yml: wharf-tls does not read tls.crt and tls.key from the ./certs mount (volumes %q)", tlsSvc.Volumes)
	}
	ca := newPrivateCA(t)
	certFile, keyFile, serial := ca.pair(t, "tls")
	args := rewrite(tlsSvc.Command)
	for i, a := range args {
		args[i] = strings.NewReplacer(certDir+"/tls.crt", certFile, certDir+"/tls.key", keyFile).Replace(a)
	}
	tsrv, err := startWharfClient(suite.bin, "compose-tls", args, env, ca.client(true, true))
	if err != nil {
		t.Fatal(err)
	}
	defer stopOrFail(t, tsrv)
	origin := flag(tlsSvc.Command, "cors-allow-origin")
	req, _ := http.NewRequest("GET", tsrv.url+"/"+name+"/README.md", nil)
	req.Header.Set("Origin", origin)
	resp, err := ca.client(true, true).Do(req)
	if err != nil {
		t.Fatalf("compose wharf-tls: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" || resp.TLS.PeerCertificates[0].SerialNumber.Text(16) != serial {
		t.Fatalf("compose wharf-tls: GET README.md: %s %s %v", resp.Proto, resp.Status, err)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("compose wharf-tls: Access-Control-Allow-Origin %q, want %q", resp.Header.Get("Access-Control-Allow-Origin"), origin)
	}
	w, _ := os.ReadFile(filepath.Join(sample, "README.md"))
	assertSameBytes(t, "compose wharf-tls", "README.md", b, w)
	t.Logf("docker-compose.yml: wharf-tls serves %s over %s with the certificate from %s, CORS for %s", name, resp.Proto, certDir, origin)
}
