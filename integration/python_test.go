package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// findPython returns a python3 that imports every module, preferring the
// one on PATH (newer boto3/s3transfer) and falling back to Debian's.
func findPython(t *testing.T, pkgs string, modules ...string) string {
	t.Helper()
	var cands []string
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	cands = append(cands, "/usr/bin/python3")
	var errs []string
	for _, p := range cands {
		_, e, err := runErr(baseEnv(t.TempDir()), "", p, "-c", "import "+strings.Join(modules, ", "))
		if err == nil {
			return p
		}
		errs = append(errs, fmt.Sprintf("%s: %s", p, strings.TrimSpace(tail(e, 1))))
	}
	t.Fatalf("no python3 with modules %s (%s): install Debian packages %s or run scripts/test.sh", strings.Join(modules, ", "), strings.Join(errs, "; "), pkgs)
	return ""
}

type boto3Report struct {
	Boto3, Botocore string
	List            map[string]struct {
		Pages        int
		Objects      [][3]any
		RootKeys     []string `json:"root_keys"`
		RootPrefixes []string `json:"root_prefixes"`
	}
	Head          [][4]any
	ContentRanges []string `json:"content_ranges"`
	Files         []struct {
		Kind, Bucket, Key, Path string
		Start, End              int64
	}
	Presigned []struct{ Style, Sig, Bucket, Key string }
	Errors    map[string]string
}

func TestBoto3(t *testing.T) {
	py := findPython(t, "python3-boto3", "boto3")
	script, _ := filepath.Abs("clients/boto3_client.py")
	for _, srv := range suite.servers() {
		t.Run(srv.name, func(t *testing.T) {
			home := clientHome(t)
			out := t.TempDir()
			var ranges [][5]any
			for _, bf := range largeFiles[:4] {
				n := suite.archives[bf[0]].keys[bf[1]]
				for _, r := range rangesFor(n) {
					ranges = append(ranges, [5]any{bf[0], bf[1], r.header, r.start, r.end})
				}
			}
			objects := [][2]string{{"main", "README.txt"}, {"main", "empty.txt"}, {"inc", "change.txt"}, {"direct", "sub/with space+plus.txt"}, {"media", "archive.gz"}}
			for k := range suite.archives["main"].keys {
				if strings.HasPrefix(k, "names/") {
					objects = append(objects, [2]string{"main", k})
				}
			}
			job := map[string]any{
				"endpoint": srv.url, "access_key": srv.accessKey, "secret_key": srv.secretKey, "out": out,
				"buckets":   suite.bucketNames(),
				"objects":   objects,
				"ranges":    ranges,
				"downloads": [][2]string{{"main", "big/unsplit.bin"}, {"split", "huge.bin"}},
				"presign":   [][2]string{{"main", "names/a+b c.txt"}, {"main", "nested/a/b/three.txt"}, {"split", "huge.bin"}},
			}
			jb, _ := json.Marshal(job)
			stdout := run(t, append(baseEnv(home), "AWS_CONFIG_FILE="+filepath.Join(home, "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "none"), "AWS_EC2_METADATA_DISABLED=true"), "", py, script, string(jb))
			var rep boto3Report
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("boto3 client output is not JSON: %v\n%s", err, tail(stdout, 10))
			}
			who := fmt.Sprintf("boto3 %s/botocore %s (%s)", rep.Boto3, rep.Botocore, srv.name)

			for _, name := range suite.bucketNames() {
				a := suite.archives[name]
				l := rep.List[name]
				got := map[string]int64{}
				var order []string
				for _, o := range l.Objects {
					k := o[0].(string)
					got[k] = int64(o[1].(float64))
					order = append(order, k)
				}
				checkListing(t, "boto3 list_objects_v2 paginator "+name, a.keys, got, order)
				if want := max(1, (len(a.keys)+499)/500); l.Pages != want {
					t.Fatalf("boto3 list_objects_v2 %s: %d pages of 500, want %d", name, l.Pages, want)
				}
				wantFiles, wantPrefixes := rollUp(a.keys, "")
				if !sameSet(l.RootKeys, wantFiles) || !sameSet(l.RootPrefixes, wantPrefixes) {
					t.Fatalf("boto3 list_objects_v2 %s Delimiter=/: %q %q, want %q %q", name, l.RootKeys, l.RootPrefixes, wantFiles, wantPrefixes)
				}
			}
			for _, h := range rep.Head {
				b, k := h[0].(string), h[1].(string)
				if n := int64(h[2].(float64)); n != suite.archives[b].keys[k] {
					t.Fatalf("boto3 head_object %s/%s: ContentLength %d, want %d", b, k, n, suite.archives[b].keys[k])
				}
			}
			t.Logf("%s: list_objects_v2 paginator (encoding-type=url) of every bucket, delimiter listings and %d head_object match", who, len(rep.Head))

			kinds := map[string]int{}
			for _, f := range rep.Files {
				got, err := os.ReadFile(f.Path)
				if err != nil {
					t.Fatal(err)
				}
				src := sourceBytes(t, f.Bucket, f.Key)
				want := src
				if f.End >= 0 {
					want = src[f.Start:f.End]
				}
				assertSameBytes(t, "boto3 "+f.Kind, f.Bucket+"/"+f.Key, got, want)
				kinds[strings.Fields(f.Kind)[0]]++
			}
			if kinds["get"] != len(objects) || kinds["range"] != len(ranges) || kinds["download_file"] != 2 {
				t.Fatalf("boto3: payload counts %v, want %d get, %d range, 2 download_file", kinds, len(objects), len(ranges))
			}
			t.Logf("%s: get_object of %d keys, %d ranged get_object, download_file of 9 MiB and 20 MiB files: every byte identical", who, kinds["get"], kinds["range"])

			if srv.accessKey != "" {
				sigs := map[string]string{}
				for _, p := range rep.Presigned {
					sigs[p.Style] = p.Sig
				}
				if sigs["s3v4"] != "v4" || sigs["default"] == "" {
					t.Fatalf("boto3 presigned styles: %v", rep.Presigned)
				}
				if kinds["presigned-default-"+sigs["default"]] != 3 || kinds["presigned-s3v4-v4"] != 3 {
					t.Fatalf("boto3 presigned payloads: %v", kinds)
				}
				if rep.Errors["tampered_presign"] != "403" {
					t.Fatalf("boto3: a tampered presigned URL got %s, want 403", rep.Errors["tampered_presign"])
				}
				t.Logf("%s: generate_presigned_url default (Sig%s) and s3v4 read with urllib, identical; a tampered signature gets 403", who, strings.ToUpper(sigs["default"]))
			}
			if rep.Errors["missing_key"] != "NoSuchKey" || rep.Errors["put"] != "AccessDenied" {
				t.Fatalf("boto3 errors: %v, want missing_key NoSuchKey and put AccessDenied", rep.Errors)
			}
		})
	}
}

func TestZarr(t *testing.T) {
	py := findPython(t, "python3-zarr python3-xarray python3-fsspec python3-aiohttp python3-boto3", "zarr", "xarray", "fsspec", "aiohttp", "boto3", "numpy")
	script, _ := filepath.Abs("clients/zarr_client.py")
	home := clientHome(t)
	env := append(baseEnv(home), "AWS_CONFIG_FILE="+filepath.Join(home, "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "none"), "AWS_EC2_METADATA_DISABLED=true")

	// Write the store with python, pack it with our writer into the backend.
	src := t.TempDir()
	var created struct {
		Files          []string
		TemperatureSum float64 `json:"temperature_sum"`
	}
	if err := json.Unmarshal([]byte(run(t, env, "", py, script, "create", src)), &created); err != nil {
		t.Fatal(err)
	}
	files, err := cargopack.FromDir(src)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cargopack.Write(context.Background(), cargopack.S3Sink(suite.s3client), files, cargopack.Options{
		Bucket: srcBucket, Prefix: "archives/zarr", UploadID: "up-zarr", SourcePath: "/srv/data/zarr", FrameSize: 8 << 10, ContentHash: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	archive := []string{"--archive", "zarr=s3://" + srcBucket + "/" + res.ManifestKey}
	t.Logf("zarr: python wrote %d files; packed with cargopack (8 KiB frames) as %s", len(created.Files), res.ManifestKey)

	type report struct {
		OK             bool
		TemperatureSum float64 `json:"temperature_sum"`
		Keys           []string
		Via            string
	}
	check := func(t *testing.T, out string) report {
		var r report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("zarr client output: %v\n%s", err, out)
		}
		if !r.OK || r.TemperatureSum != created.TemperatureSum {
			t.Fatalf("zarr via %s: values differ from what was written: %s (written sum %v)", r.Via, out, created.TemperatureSum)
		}
		return r
	}

	t.Run("fsspec-http-anonymous", func(t *testing.T) {
		srv, err := suite.startServer("zarr-anonymous", archive, false)
		if err != nil {
			t.Fatal(err)
		}
		defer stopOrFail(t, srv)
		r := check(t, run(t, env, "", py, script, "http", srv.url+"/zarr"))
		t.Logf("zarr/xarray via %s: open_zarr (consolidated) and zarr.open_group read every value as written (missing chunks → fill value)", r.Via)
	})
	t.Run("boto3-keyed", func(t *testing.T) {
		srv, err := suite.startServer("zarr-keyed", archive, true)
		if err != nil {
			t.Fatal(err)
		}
		defer stopOrFail(t, srv)
		kenv := append(append([]string{}, env...), "AWS_ACCESS_KEY_ID="+srv.accessKey, "AWS_SECRET_ACCESS_KEY="+srv.secretKey)
		r := check(t, run(t, kenv, "", py, script, "boto3", srv.url, "zarr"))
		var want []string
		for _, f := range created.Files {
			want = append(want, strings.TrimPrefix(f, "store.zarr/"))
		}
		if !sameSet(r.Keys, want) {
			t.Fatalf("zarr via boto3: store keys %q, want %q", r.Keys, want)
		}
		t.Logf("zarr/xarray via %s: every value as written; %d store keys listed", r.Via, len(r.Keys))
	})
}

func stopOrFail(t *testing.T, s *wharfServer) {
	t.Helper()
	if err := s.Stop(); err != nil {
		t.Errorf("wharf serve (%s): %v\n%s", s.name, err, tail(s.Logs(), 20))
	}
}
