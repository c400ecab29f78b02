package integration

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// awsCLI is one installed aws CLI (the Debian awscli v2 and, when present,
// a pip-installed v1 on PATH).
type awsCLI struct{ path, version string }

func findAWSCLIs(t *testing.T) []awsCLI {
	t.Helper()
	var cands []string
	if p, err := exec.LookPath("aws"); err == nil {
		cands = append(cands, p)
	}
	if _, err := os.Stat("/usr/bin/aws"); err == nil {
		cands = append(cands, "/usr/bin/aws")
	}
	seen := map[string]bool{}
	var out []awsCLI
	for _, p := range cands {
		o, e, err := runErr(baseEnv(t.TempDir()), "", p, "--version")
		if err != nil {
			t.Logf("aws at %s does not run: %v %s", p, err, e)
			continue
		}
		v := strings.Fields(o + " " + e)[0] // aws-cli/2.9.19
		if seen[v] {
			continue
		}
		seen[v] = true
		out = append(out, awsCLI{p, v})
	}
	if len(out) == 0 {
		t.Fatal("aws not found: install Debian package awscli or run scripts/test.sh")
	}
	return out
}

// awsEnv is a private aws CLI environment for srv: config and credentials
// files in a temp HOME, keys via env for the keyed server.
func awsEnv(t *testing.T, srv *wharfServer) []string {
	home := clientHome(t)
	cfg := filepath.Join(home, "aws-config")
	creds := filepath.Join(home, "aws-credentials")
	os.WriteFile(cfg, []byte("[default]\nregion = us-east-1\n"), 0o600)
	os.WriteFile(creds, nil, 0o600)
	env := append(baseEnv(home),
		"AWS_CONFIG_FILE="+cfg,
		"AWS_SHARED_CREDENTIALS_FILE="+creds,
		"AWS_DEFAULT_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_PAGER=",
		"AWS_CLI_AUTO_PROMPT=off",
		"AWS_MAX_ATTEMPTS=1",
	)
	if srv.accessKey != "" {
		env = append(env, "AWS_ACCESS_KEY_ID="+srv.accessKey, "AWS_SECRET_ACCESS_KEY="+srv.secretKey)
	}
	return env
}

// lsLine parses `aws s3 ls --recursive` and `s3cmd ls --recursive` lines:
// date, time, size, key (the key may contain spaces).
var awsLsLine = regexp.MustCompile(`^\S+\s+\S+\s+(\d+) (.*)$`)

func TestAWSCLI(t *testing.T) {
	for _, cli := range findAWSCLIs(t) {
		t.Run(cli.version, func(t *testing.T) {
			for _, srv := range suite.servers() {
				t.Run(srv.name, func(t *testing.T) {
					env := awsEnv(t, srv)
					base := []string{"--endpoint-url", srv.url}
					if srv.accessKey == "" {
						base = append(base, "--no-sign-request")
					}
					aws := func(args ...string) string {
						t.Helper()
						return run(t, env, "", cli.path, append(append([]string{}, base...), args...)...)
					}
					who := cli.version + " (" + srv.name + ")"
					main := suite.archives["main"]

					out := aws("s3", "ls")
					for _, b := range suite.bucketNames() {
						if !regexp.MustCompile(`(?m) ` + regexp.QuoteMeta(b) + `$`).MatchString(out) {
							t.Fatalf("aws s3 ls: bucket %s missing:\n%s", b, out)
						}
					}

					out = aws("s3", "ls", "s3://main/")
					wantFiles, wantPrefixes := rollUp(main.keys, "")
					var gotFiles, gotPrefixes []string
					for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
						if f := strings.Fields(l); len(f) == 2 && f[0] == "PRE" {
							gotPrefixes = append(gotPrefixes, f[1])
						} else if m := awsLsLine.FindStringSubmatch(l); m != nil {
							gotFiles = append(gotFiles, m[2])
						} else {
							t.Fatalf("aws s3 ls s3://main/: unexpected line %q", l)
						}
					}
					if !sameSet(gotFiles, wantFiles) || !sameSet(gotPrefixes, wantPrefixes) {
						t.Fatalf("aws s3 ls s3://main/: files %q prefixes %q, want %q %q", gotFiles, gotPrefixes, wantFiles, wantPrefixes)
					}

					for _, name := range suite.bucketNames() {
						a := suite.archives[name]
						out = aws("s3", "ls", "--recursive", "s3://"+name+"/")
						got := map[string]int64{}
						var order []string
						for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
							m := awsLsLine.FindStringSubmatch(l)
							if m == nil {
								t.Fatalf("aws s3 ls --recursive s3://%s/: unexpected line %q", name, l)
							}
							n, _ := strconv.ParseInt(m[1], 10, 64)
							got[m[2]] = n
							order = append(order, m[2])
						}
						checkListing(t, "aws s3 ls --recursive s3://"+name, a.keys, got, order)
					}
					t.Logf("aws %s: s3 ls (buckets, delimiter) and s3 ls --recursive of every bucket (%d keys in main, paginated) match the source", who, len(main.keys))

					dir := t.TempDir()
					for _, bf := range [][2]string{{"main", "big/unsplit.bin"}, {"split", "huge.bin"}, {"main", "empty.txt"}, {"main", "names/ünïcødé-日本語.txt"}} {
						dst := filepath.Join(dir, "cp", bf[0], filepath.FromSlash(bf[1]))
						aws("s3", "cp", "--no-progress", "s3://"+bf[0]+"/"+bf[1], dst)
						assertSameFile(t, "aws s3 cp", dst, filepath.Join(suite.archives[bf[0]].dir, filepath.FromSlash(bf[1])))
					}
					stdout := aws("s3", "cp", "s3://split/huge.bin", "-")
					assertSameBytes(t, "aws s3 cp - (stdout)", "split/huge.bin", []byte(stdout), sourceBytes(t, "split", "huge.bin"))
					t.Logf("aws %s: s3 cp to files (9 MiB and 20 MiB multipart ranged downloads, empty, unicode) and s3 cp to stdout (20 MiB) identical", who)

					aws("s3", "cp", "--recursive", "--no-progress", "s3://main/names/", filepath.Join(dir, "names"))
					assertSameTree(t, "aws s3 cp --recursive s3://main/names/", filepath.Join(dir, "names"), filepath.Join(main.dir, "names"))
					aws("s3", "cp", "--recursive", "--no-progress", "s3://media", filepath.Join(dir, "media"))
					assertSameTree(t, "aws s3 cp --recursive s3://media", filepath.Join(dir, "media"), suite.archives["media"].dir)

					for _, src := range []string{"s3://inc", "s3://direct", "s3://main/nested/"} {
						dst := filepath.Join(dir, "sync", strings.NewReplacer("s3://", "", "/", "_").Replace(src))
						aws("s3", "sync", "--no-progress", src, dst)
						want := suite.archives[strings.SplitN(strings.TrimPrefix(src, "s3://"), "/", 2)[0]].dir
						if strings.HasSuffix(src, "nested/") {
							want = filepath.Join(want, "nested")
						}
						assertSameTree(t, "aws s3 sync "+src, dst, want)
						if again := aws("s3", "sync", src, dst); again != "" {
							t.Fatalf("second aws s3 sync %s transferred something:\n%s", src, tail(again, 10))
						}
					}
					t.Logf("aws %s: s3 cp --recursive and s3 sync (twice; the second transfers nothing) identical to the source", who)
				})
			}
		})
	}
}

// rcloneConfig writes an rclone config with the two providers for srv.
func rcloneConfig(t *testing.T, home string, srv *wharfServer) string {
	var b strings.Builder
	for _, p := range [][2]string{{"other", "Other"}, {"minio", "Minio"}} {
		fmt.Fprintf(&b, "[%s]\ntype = s3\nprovider = %s\nendpoint = %s\nregion = us-east-1\nforce_path_style = true\nenv_auth = false\n", p[0], p[1], srv.url)
		if srv.accessKey != "" {
			fmt.Fprintf(&b, "access_key_id = %s\nsecret_access_key = %s\n", srv.accessKey, srv.secretKey)
		}
		b.WriteString("\n")
	}
	p := filepath.Join(home, "rclone.conf")
	os.WriteFile(p, []byte(b.String()), 0o600)
	return p
}

func TestRclone(t *testing.T) {
	bin := need(t, "rclone", "rclone")
	for _, srv := range suite.servers() {
		t.Run(srv.name, func(t *testing.T) {
			home := clientHome(t)
			cfg := rcloneConfig(t, home, srv)
			env := append(baseEnv(home), "RCLONE_CONFIG="+cfg)
			for _, remote := range []string{"other", "minio"} {
				t.Run(remote, func(t *testing.T) {
					rc := func(args ...string) string {
						t.Helper()
						return run(t, env, "", bin, append([]string{"--config", cfg, "--retries", "1", "--low-level-retries", "1"}, args...)...)
					}
					who := fmt.Sprintf("rclone provider %s (%s)", remote, srv.name)
					for _, name := range suite.bucketNames() {
						a := suite.archives[name]
						out := rc("lsf", "-R", "--files-only", "--format", "sp", "--separator", "\t", remote+":"+name)
						got := map[string]int64{}
						var order []string
						for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
							size, key, ok := strings.Cut(l, "\t")
							if !ok {
								t.Fatalf("rclone lsf -R %s: unexpected line %q", name, l)
							}
							n, _ := strconv.ParseInt(size, 10, 64)
							got[key] = n
							order = append(order, key)
						}
						sort.Strings(order) // rclone sorts per directory, not globally
						checkListing(t, "rclone lsf -R "+remote+":"+name, a.keys, got, order)
					}
					t.Logf("%s: lsf -R of every bucket matches the source", who)

					dir := t.TempDir()
					for _, src := range [][2]string{{"media", ""}, {"main", "names"}, {"inc", ""}, {"direct", ""}, {"split", ""}} {
						dst := filepath.Join(dir, src[0], src[1])
						rc("copy", remote+":"+strings.TrimSuffix(src[0]+"/"+src[1], "/"), dst)
						assertSameTree(t, "rclone copy "+remote+":"+src[0]+"/"+src[1], dst, filepath.Join(suite.archives[src[0]].dir, src[1]))
					}
					for _, name := range []string{"main", "media", "inc", "direct"} {
						rc("check", remote+":"+name, suite.archives[name].dir)
					}
					rc("check", "--download", remote+":inc", suite.archives["inc"].dir)
					t.Logf("%s: copy of 5 trees identical; check (MD5 ETags) of 4 buckets and check --download pass", who)

					huge := sourceBytes(t, "split", "huge.bin")
					for _, r := range [][2]int64{{0, 100}, {8<<20 - 50, 100}, {123456, 3 << 20}, {int64(len(huge)) - 10, 10}} {
						out := rc("cat", "--offset", fmt.Sprint(r[0]), "--count", fmt.Sprint(r[1]), remote+":split/huge.bin")
						assertSameBytes(t, "rclone cat", fmt.Sprintf("split/huge.bin --offset %d --count %d", r[0], r[1]), []byte(out), huge[r[0]:r[0]+r[1]])
					}
					t.Logf("%s: cat --offset --count across the split-part boundary identical", who)
				})
			}
		})
	}
}

func TestS3cmd(t *testing.T) {
	bin := need(t, "s3cmd", "s3cmd")
	srv := suite.keyed // s3cmd always signs; it has no anonymous mode
	t.Run(srv.name, func(t *testing.T) {
		home := clientHome(t)
		u, _ := url.Parse(srv.url)
		cfg := filepath.Join(home, "s3cfg")
		os.WriteFile(cfg, []byte(fmt.Sprintf(`[default]
access_key = %s
secret_key = %s
host_base = %s
host_bucket = %s
use_https = False
signature_v2 = False
bucket_location = us-east-1
check_ssl_certificate = False
progress_meter = False
`, srv.accessKey, srv.secretKey, u.Host, u.Host)), 0o600)
		s3cmd := func(args ...string) string {
			t.Helper()
			return run(t, baseEnv(home), "", bin, append([]string{"-c", cfg}, args...)...)
		}
		main := suite.archives["main"]

		out := s3cmd("ls", "s3://main/")
		wantFiles, wantPrefixes := rollUp(main.keys, "")
		var gotFiles, gotPrefixes []string
		for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) == 2 && f[0] == "DIR":
				gotPrefixes = append(gotPrefixes, strings.TrimPrefix(f[1], "s3://main/"))
			case len(f) >= 4:
				gotFiles = append(gotFiles, strings.TrimPrefix(strings.Join(f[3:], " "), "s3://main/"))
			default:
				t.Fatalf("s3cmd ls s3://main/: unexpected line %q", l)
			}
		}
		if !sameSet(gotFiles, wantFiles) || !sameSet(gotPrefixes, wantPrefixes) {
			t.Fatalf("s3cmd ls s3://main/: files %q prefixes %q, want %q %q", gotFiles, gotPrefixes, wantFiles, wantPrefixes)
		}
		lsRE := regexp.MustCompile(`^\S+\s+\S+\s+(\d+)\s+s3://([^/]+)/(.*)$`)
		for _, name := range suite.bucketNames() {
			a := suite.archives[name]
			out = s3cmd("ls", "--recursive", "s3://"+name)
			got := map[string]int64{}
			var order []string
			for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
				m := lsRE.FindStringSubmatch(l)
				if m == nil || m[2] != name {
					t.Fatalf("s3cmd ls --recursive s3://%s: unexpected line %q", name, l)
				}
				n, _ := strconv.ParseInt(m[1], 10, 64)
				got[m[3]] = n
				order = append(order, m[3])
			}
			checkListing(t, "s3cmd ls --recursive s3://"+name, a.keys, got, order)
		}
		t.Logf("s3cmd (%s): ls and ls --recursive of every bucket match the source", srv.name)

		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "names"), 0o755)
		os.MkdirAll(filepath.Join(dir, "media"), 0o755)
		s3cmd("get", "--recursive", "s3://main/names/", filepath.Join(dir, "names")+"/")
		assertSameTree(t, "s3cmd get --recursive s3://main/names/", filepath.Join(dir, "names"), filepath.Join(main.dir, "names"))
		s3cmd("get", "--recursive", "s3://media/", filepath.Join(dir, "media")+"/")
		assertSameTree(t, "s3cmd get --recursive s3://media/", filepath.Join(dir, "media"), suite.archives["media"].dir)

		// get --continue resumes a partial download with Range: bytes=N-.
		big := sourceBytes(t, "main", "big/unsplit.bin")
		part := filepath.Join(dir, "unsplit.bin")
		os.WriteFile(part, big[:1_000_003], 0o644)
		s3cmd("get", "--continue", "s3://main/big/unsplit.bin", part)
		assertSameFile(t, "s3cmd get --continue", part, filepath.Join(main.dir, "big", "unsplit.bin"))
		t.Logf("s3cmd (%s): get --recursive (odd names, plain-tar media) and get --continue of a 9 MiB file identical", srv.name)

		for _, k := range []string{"README.txt", "names/a+b c.txt"} {
			out = s3cmd("info", "s3://main/"+k)
			src := sourceBytes(t, "main", k)
			sum := md5.Sum(src)
			if !strings.Contains(out, fmt.Sprintf("File size: %d", len(src))) || !strings.Contains(out, hex.EncodeToString(sum[:])) {
				t.Fatalf("s3cmd info s3://main/%s: want size %d and MD5 %x in:\n%s", k, len(src), sum, out)
			}
		}
		t.Logf("s3cmd (%s): info shows the source's size and MD5", srv.name)
	})
}
