package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// progressTree is an archive of many small frames, so a slowed-down store
// makes a command take a while.
func progressTree() map[string][]byte {
	files := map[string][]byte{}
	for i := 0; i < 24; i++ {
		b := make([]byte, 20<<10)
		for j := range b {
			b[j] = byte(i*31 + j*7 + j/97)
		}
		files[fmt.Sprintf("dir/file-%02d.bin", i)] = b
	}
	return files
}

// jsonLines returns the zerolog lines of a command's stderr.
func jsonLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("bad log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestProgressLogLines: with stderr a pipe, the long commands log
// progress lines periodically and a final "done" line whose bytes reach
// the total; --quiet logs nothing.
func TestProgressLogLines(t *testing.T) {
	s3 := newSlowS3(t, "bkt")
	files := progressTree()
	url := s3.pack(t, files, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-prog", FrameSize: 4 << 10, ChunkSize: 64 << 10})
	var srcBytes int64
	for _, b := range files {
		srcBytes += int64(len(b))
	}
	s3.delay.Store(int64(25 * time.Millisecond))
	out := t.TempDir()
	packSrc := t.TempDir()
	for k, b := range files {
		os.MkdirAll(filepath.Join(packSrc, filepath.Dir(k)), 0o755)
		os.WriteFile(filepath.Join(packSrc, k), b, 0o644)
	}
	for _, c := range []struct {
		name     string
		args     []string
		periodic bool
		total    int64 // 0: not checked
		items    float64
	}{
		{"verify", append(append([]string{"verify"}, s3.flags()...), "--progress-interval", "40ms", url), true, 0, -1},
		{"get", append(append([]string{"get", "--parallel", "1"}, s3.flags()...), "--progress-interval", "40ms", url, "dir/", "-o", out), true, srcBytes, 24},
		{"index build", append(append([]string{"index", "build"}, s3.flags()...), "--progress-interval", "40ms", url, "-o", filepath.Join(out, "x.widx")), false, 0, 1},
		{"pack", []string{"pack", packSrc, "--store", "file://" + t.TempDir(), "--bucket", "b", "--progress-interval", "40ms"}, false, srcBytes, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := runWharf(t, c.args...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, stderr)
			}
			lines := jsonLines(t, stderr)
			if len(lines) == 0 {
				t.Fatalf("no log lines:\n%s", stderr)
			}
			last := lines[len(lines)-1]
			if last["message"] != "done" || last["op"] != c.name || last["bytes"] != last["total"] || last["eta"] != 0.0 {
				t.Errorf("final line %v", last)
			}
			if c.total > 0 && last["total"] != float64(c.total) {
				t.Errorf("total %v, want %d", last["total"], c.total)
			}
			if c.items >= 0 && last["items"] != c.items {
				t.Errorf("items %v, want %v", last["items"], c.items)
			}
			if c.periodic {
				mid := 0
				for _, l := range lines[:len(lines)-1] {
					if l["message"] == "progress" && l["bytes"].(float64) < l["total"].(float64) {
						mid++
						for _, f := range []string{"rate", "eta", "elapsed", "time"} {
							if _, ok := l[f]; !ok {
								t.Errorf("progress line lacks %s: %v", f, l)
							}
						}
					}
				}
				if mid == 0 {
					t.Errorf("no progress line before the end:\n%s", stderr)
				}
			}
			// --quiet: no progress at all.
			q := append([]string{c.args[0], "--quiet"}, c.args[1:]...)
			if c.name == "index build" {
				q = append([]string{"index", "build", "--quiet"}, c.args[2:]...)
			}
			if c.name == "get" {
				q = append(q, "--parallel", "8")
			}
			_, stderr, code = runWharf(t, q...)
			if code != 0 || len(jsonLines(t, stderr)) != 0 {
				t.Errorf("--quiet: exit %d, stderr:\n%s", code, stderr)
			}
		})
	}
}

var barRE = regexp.MustCompile(`\d+% \|[^|]*\| \([0-9.]+ ?[KM]?i?B?/[0-9.]+ [KM]iB, [0-9.]+ [KM]?i?B/s\) \[[0-9a-z.]+(:[0-9a-z.]+)?\]`)

// TestProgressOnTerminal runs verify and get with stderr on a
// pseudo-terminal: a live bar (percent, bytes of total, rate,
// elapsed:ETA), redrawn in place, ending at 100% on its own line; no JSON.
func TestProgressOnTerminal(t *testing.T) {
	s3 := newSlowS3(t, "bkt")
	url := s3.pack(t, progressTree(), cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-tty", FrameSize: 4 << 10, ChunkSize: 64 << 10})
	s3.delay.Store(int64(20 * time.Millisecond))
	for _, args := range [][]string{
		append(append([]string{"verify"}, s3.flags()...), url),
		append(append([]string{"get", "--parallel", "2"}, s3.flags()...), url, "dir/", "-o", t.TempDir()),
	} {
		t.Run(args[0], func(t *testing.T) {
			ptmx, tty, err := pty.Open()
			if err != nil {
				t.Fatalf("pseudo-terminal: %v", err)
			}
			defer ptmx.Close()
			pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 140})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := wharfCmd(ctx, args...)
			cmd.Env = append(cmd.Env, "TERM=xterm")
			var stdout bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, tty
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			tty.Close()
			screen := make(chan string)
			go func() {
				b, _ := io.ReadAll(ptmx)
				screen <- string(b)
			}()
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%v\nstdout:\n%s", err, stdout.String())
			}
			out := <-screen
			bars := barRE.FindAllString(out, -1)
			if len(bars) < 2 {
				t.Fatalf("fewer than 2 bar frames on the terminal: %q", out)
			}
			if !regexp.MustCompile(`\[[0-9a-z.]+:[0-9a-z.]+\]`).MatchString(strings.Join(bars, "\n")) {
				t.Errorf("no frame shows elapsed:ETA: %q", bars)
			}
			if !strings.Contains(out, "\r") || strings.Contains(out, `"message"`) {
				t.Errorf("not a redrawn line, or log lines on a terminal: %q", out)
			}
			if !strings.Contains(out, args[0]) || !strings.HasPrefix(bars[len(bars)-1], "100%") {
				t.Errorf("last frame %q (op %s missing or not 100%%)", bars[len(bars)-1], args[0])
			}
			t.Logf("%d frames, last: %s", len(bars), bars[len(bars)-1])
		})
	}
}

// startWatched starts wharf with stderr read line by line.
func startWatched(t *testing.T, args ...string) (cmd *os.Process, lines <-chan string, wait func() (string, int)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	c := wharfCmd(ctx, args...)
	pipe, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	c.Stdout = &stdout
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 1000)
	var all strings.Builder
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			select {
			case ch <- sc.Text():
			default:
			}
		}
		close(ch)
		close(done)
	}()
	return c.Process, ch, func() (string, int) {
		<-done
		c.Wait()
		cancel()
		return stdout.String() + all.String(), c.ProcessState.ExitCode()
	}
}

// waitProgress waits for a progress log line with some bytes done.
func waitProgress(t *testing.T, lines <-chan string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the command ended before any progress")
			}
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "progress" && m["bytes"].(float64) > 0 {
				return
			}
		case <-timeout:
			t.Fatal("no progress line in 30 s")
		}
	}
}

// TestInterrupt: SIGINT or SIGTERM mid-way stops get and verify cleanly:
// exit status 1, a "stopped" log line, a summary of what was done and
// what was left; get leaves only whole files (no temporary files) and a
// second run resumes, skipping them.
func TestInterrupt(t *testing.T) {
	s3 := newSlowS3(t, "bkt")
	files := progressTree()
	url := s3.pack(t, files, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-int", FrameSize: 4 << 10, ChunkSize: 64 << 10})
	s3.delay.Store(int64(60 * time.Millisecond))
	out := t.TempDir()

	proc, lines, wait := startWatched(t, append(append([]string{"get", "--parallel", "1"}, s3.flags()...), "--progress-interval", "30ms", url, "dir/", "-o", out)...)
	waitProgress(t, lines)
	proc.Signal(os.Interrupt)
	all, code := wait()
	if code != 1 {
		t.Fatalf("get after SIGINT: exit %d\n%s", code, all)
	}
	m := regexp.MustCompile(`interrupted after \S+: (\d+) of 24 files written .*; (\d+) not written`).FindStringSubmatch(all)
	if m == nil || !strings.Contains(all, `"message":"stopped"`) {
		t.Fatalf("no interruption summary or stopped line:\n%s", all)
	}
	noTempFiles(t, out)
	written := 0
	for k, b := range files {
		got, err := os.ReadFile(filepath.Join(out, k))
		if err == nil {
			written++
			if !bytes.Equal(got, b) {
				t.Errorf("%s: partial or wrong file left after the interruption", k)
			}
		}
	}
	if fmt.Sprint(written) != m[1] || written == 24 {
		t.Fatalf("%d whole files on disk, summary says %s written", written, m[1])
	}
	t.Logf("interrupted get: %s", m[0])

	s3.delay.Store(0)
	_, stderr, code := runWharf(t, append(append([]string{"get", "-q"}, s3.flags()...), url, "dir/", "-o", out)...)
	if want := fmt.Sprintf("%d files written", 24-written); code != 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, fmt.Sprintf("%d already present", written)) {
		t.Fatalf("resume: exit %d, want %q and %d already present:\n%s", code, want, written, stderr)
	}
	checkFiles := 0
	for k, b := range files {
		if got, _ := os.ReadFile(filepath.Join(out, k)); bytes.Equal(got, b) {
			checkFiles++
		}
	}
	if checkFiles != 24 {
		t.Fatalf("%d of 24 files right after resuming", checkFiles)
	}

	s3.delay.Store(int64(60 * time.Millisecond))
	proc, lines, wait = startWatched(t, append(append([]string{"verify"}, s3.flags()...), "--progress-interval", "30ms", url)...)
	waitProgress(t, lines)
	proc.Signal(syscall.SIGTERM)
	all, code = wait()
	if code != 1 || !strings.Contains(all, `"message":"stopped"`) ||
		!regexp.MustCompile(`interrupted after \S+: checked \d+ chunks \(\d+ frames\) and \d+ of 24 files, .* of .*; not checked: \d+ files`).MatchString(all) {
		t.Fatalf("verify after SIGTERM: exit %d\n%s", code, all)
	}
}
