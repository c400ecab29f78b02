package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// wharfServer is one `wharf serve` subprocess.
type wharfServer struct {
	name      string // "keyed" or "anonymous"
	url       string // http://127.0.0.1:PORT (https:// with --tls-cert)
	adminURL  string // http(s)://127.0.0.1:PORT of --admin-listen, "" if none
	accessKey string // "" for an anonymous server
	secretKey string

	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	logs bytes.Buffer // everything the process wrote
	err  error        // Wait's result, valid after done
}

// listenRE finds the S3 address in the log line `listening on HOST:PORT`
// (or https://HOST:PORT); addrRE the admin address in a line that mentions
// "admin". The first group is the scheme, if any.
var (
	listenRE = regexp.MustCompile(`listening on (https?://)?(127\.0\.0\.1:[0-9]+)`)
	addrRE   = regexp.MustCompile(`(https?://)?(127\.0\.0\.1:[0-9]+)`)
)

// startWharf runs the wharf binary with args (the subcommand first, e.g.
// "serve") and waits until it logs the bound address(es). env is the
// subprocess's complete environment.
func startWharf(bin, name string, args, env []string) (*wharfServer, error) {
	return startWharfClient(bin, name, args, env, http.DefaultClient)
}

// startWharfClient is startWharf probing the server with client (for TLS:
// one that trusts the server's CA).
// Listings the backend receives meanwhile are booked as start-up listings
// (each archive lists its upload prefixes once at open for the storage
// classes), so the suite's "no listing while serving" check sees only the
// read path.
func startWharfClient(bin, name string, args, env []string, client *http.Client) (*wharfServer, error) {
	if startupBooks == nil {
		return startWharfProc(bin, name, args, env, client)
	}
	return startupBooks.starting(func() (*wharfServer, error) { return startWharfProc(bin, name, args, env, client) })
}

// startupBooks is the backend whose listings server start-ups book (set by
// TestMain before the first server starts).
var startupBooks *countingHandler

func startWharfProc(bin, name string, args, env []string, client *http.Client) (*wharfServer, error) {
	s := &wharfServer{name: name, done: make(chan struct{})}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	// Own process group (so Stop can kill it whole); killed if the test
	// binary dies (e.g. on a -timeout panic), so nothing is left behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting wharf serve (%s): %w", name, err)
	}
	s.cmd = cmd
	wantAdmin := false
	for _, a := range args {
		if a == "--admin-listen" {
			wantAdmin = true
		}
	}
	addrs := make(chan [2]string, 4)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.logs.WriteString(line)
			s.logs.WriteByte('\n')
			s.mu.Unlock()
			var found [2]string
			if ms := addrRE.FindAllStringSubmatch(line, -1); ms != nil && strings.Contains(strings.ToLower(line), "admin") {
				m := ms[0] // the address, with its scheme where the line gives one
				for _, x := range ms {
					if x[1] != "" {
						m = x
					}
				}
				found = [2]string{"admin", withScheme(m[1], m[2])}
			} else if m := listenRE.FindStringSubmatch(line); m != nil {
				found = [2]string{"s3", withScheme(m[1], m[2])}
			}
			if found[0] != "" {
				select {
				case addrs <- found:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		s.err = cmd.Wait()
		pw.Close()
		close(s.done)
	}()
	deadline := time.After(90 * time.Second)
	for s.url == "" || (wantAdmin && s.adminURL == "") {
		select {
		case a := <-addrs:
			if a[0] == "admin" {
				s.adminURL = a[1]
			} else {
				s.url = a[1]
			}
		case <-s.done:
			return nil, fmt.Errorf("wharf serve (%s) exited before listening: %v\n%s", name, s.err, s.Logs())
		case <-deadline:
			// SIGQUIT makes the Go runtime print every goroutine's stack,
			// which shows where startup is stuck.
			s.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-s.done:
			case <-time.After(5 * time.Second):
			}
			s.Stop()
			return nil, fmt.Errorf("wharf serve (%s) did not log %q within 90s:\n%s", name, "listening on 127.0.0.1:PORT", tail(s.Logs(), 150))
		}
	}
	// The address is logged once the listener is bound; confirm it answers.
	if err := waitHTTP(client, s.url); err != nil {
		s.Stop()
		return nil, fmt.Errorf("wharf serve (%s) at %s: %w\n%s", name, s.url, err, s.Logs())
	}
	return s, nil
}

// withScheme is addr as a URL: the logged scheme, else http://.
func withScheme(scheme, addr string) string {
	if scheme == "" {
		scheme = "http://"
	}
	return scheme + addr
}

func waitHTTP(client *http.Client, url string) error {
	var last error
	for i := 0; i < 100; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/", nil)
		resp, err := client.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			return nil
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return last
}

// Logs returns what the process has written so far.
func (s *wharfServer) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// Stop sends SIGTERM (graceful shutdown), then SIGKILL to the process group
// after 10 s. It returns an error if the process did not exit cleanly.
func (s *wharfServer) Stop() error {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	select {
	case <-s.done:
		return s.err
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return s.err
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
		return fmt.Errorf("wharf serve (%s) ignored SIGTERM for 10s; killed", s.name)
	}
}

// Exited reports whether the process has exited (it never should while tests run).
func (s *wharfServer) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// baseEnv is the environment for every subprocess: PATH and locale from
// ours, nothing else — no AWS_*, no HOME configuration of the user.
func baseEnv(home string) []string {
	env := []string{
		"HOME=" + home,
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"PYTHONIOENCODING=utf-8",
		"PYTHONDONTWRITEBYTECODE=1",
		"XDG_CONFIG_HOME=" + home + "/.config",
		"XDG_CACHE_HOME=" + home + "/.cache",
	}
	for _, k := range []string{"PATH", "TMPDIR", "PYENV_ROOT", "PYENV_VERSION"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
