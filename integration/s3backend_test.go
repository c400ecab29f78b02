package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// The real S3 server the suite packs its archives into and wharf reads
// from, chosen by WHARF_S3_BACKEND:
//
//   - "" or "gofakes3": gofakes3 in process (in memory). It checks no
//     credentials.
//   - "versitygw": versitygw (posix backend, metadata in a sidecar
//     directory) as a subprocess on loopback, the binary from
//     WHARF_VERSITYGW or ../bin/versitygw (scripts/test.sh builds it once
//     from the module proxy). It checks SigV4 with the backend credentials.
//   - "url:http://HOST:PORT": an S3 server already running (scripts/
//     backends.sh starts SeaweedFS or MinIO) that takes the backend
//     credentials.
//
// Every backend is reached through the suite's countingHandler (for
// versitygw and url: a reverse proxy that keeps the Host header, so SigV4
// signatures still verify), so the request counts and the "no listing
// while serving" check hold for each.
const backendEnv = "WHARF_S3_BACKEND"

// s3BackendName is the backend this run uses.
func s3BackendName() string {
	name := os.Getenv(backendEnv)
	if name == "" {
		return "gofakes3"
	}
	if strings.HasPrefix(name, "url:") {
		return "url"
	}
	return name
}

// startS3Backend starts the chosen backend and returns its handler and a
// stop function.
func startS3Backend(ctx context.Context, tmp string) (http.Handler, func(), error) {
	switch name := os.Getenv(backendEnv); {
	case name == "" || name == "gofakes3":
		return gofakes3.New(s3mem.New()).Server(), func() {}, nil
	case name == "versitygw":
		return startVersitygw(ctx, tmp)
	case strings.HasPrefix(name, "url:"):
		u, err := url.Parse(strings.TrimPrefix(name, "url:"))
		if err != nil || u.Host == "" {
			return nil, nil, fmt.Errorf("%s=%s: want url:http://HOST:PORT", backendEnv, name)
		}
		return proxyTo(u), func() {}, nil
	default:
		return nil, nil, fmt.Errorf("%s=%q: want gofakes3, versitygw or url:http://HOST:PORT", backendEnv, name)
	}
}

// proxyTo forwards every request to u, keeping the client's Host header
// (SigV4 signs it) and streaming bodies as they come.
func proxyTo(u *url.URL) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
		},
		FlushInterval: -1,
	}
}

// startVersitygw runs versitygw's posix backend over a fresh directory on
// a free loopback port and waits until it answers.
func startVersitygw(ctx context.Context, tmp string) (http.Handler, func(), error) {
	bin := os.Getenv("WHARF_VERSITYGW")
	if bin == "" {
		bin = filepath.Join("..", "bin", "versitygw")
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, nil, fmt.Errorf("versitygw binary: %w (scripts/test.sh builds it: GOBIN=$PWD/bin go install github.com/versity/versitygw/cmd/versitygw@VERSION)", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	addr := l.Addr().String()
	l.Close()
	// Not a name prefix of one another: versitygw compares the paths as
	// strings ("sidecar directory cannot be inside the gateway root").
	root, side := filepath.Join(tmp, "s3-root"), filepath.Join(tmp, "s3-sidecar")
	for _, d := range []string{root, side} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, nil, err
		}
	}
	logf, err := os.Create(filepath.Join(tmp, "versitygw.log"))
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(bin, "--access", backendKey, "--secret", backendSecret, "--port", addr, "--region", "us-east-1", "--quiet",
		"posix", "--sidecar", side, root)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, fmt.Errorf("starting versitygw: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		exited := false
		select {
		case <-done:
			exited = true
		default:
		}
		if exited || time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			log, _ := os.ReadFile(filepath.Join(tmp, "versitygw.log"))
			return nil, nil, fmt.Errorf("versitygw did not listen on %s (exited: %v): %v\n%s", addr, exited, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "integration: S3 backend versitygw (%s) at %s\n", bin, addr)
	return proxyTo(&url.URL{Scheme: "http", Host: addr}), stop, nil
}
