package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dsFlags are the store flags that reach the dataset lake's server.
func (d *datasetLake) flags() []string {
	return []string{"--store", "s3://", "--s3-endpoint", d.url, "--s3-path-style", "--s3-region", "us-east-1",
		"--s3-access-key", "AK", "--s3-secret-key", "SK"}
}

func (d *datasetLake) run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runWharf(t, append(args, d.flags()...)...)
}

// sameTree compares the regular files under dir with want, byte for byte.
func sameTree(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	n := 0
	if err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		n++
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if w, ok := want[filepath.ToSlash(rel)]; !ok || !bytes.Equal(b, w) {
			t.Errorf("%s: %d bytes, not the source's (known %v)", rel, len(b), ok)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Fatalf("%d files under %s, want %d", n, dir, len(want))
	}
}

// TestCLIDatasetNames: inspect, ls, get and verify take
// s3://BUCKET/DATASET@current and @<version_id> for MANIFEST_URL, on a
// gofakes3 dataset whose version 2 reads chunks under version 1's folder:
// the version CURRENT names (and follows after a promote), a pinned
// version, inspect --json's dataset fields and the pointer's counts that
// disagree with the manifest (reported and logged as warnings); a missing
// version, a bad pointer and a bad version id refused naming them; index
// build refusing a dataset name.
func TestCLIDatasetNames(t *testing.T) {
	d := newDatasetLake(t)
	cur := "s3://lake/datasets/ocean@current"
	pin := "s3://lake/datasets/ocean@" + dsV2

	// inspect --json @current: version 1, the pointer's fields; its
	// total_bytes (0) disagrees with the manifest.
	n0 := d.log.len()
	out, errOut, code := d.run(t, "inspect", "--json", cur)
	if code != 0 {
		t.Fatalf("inspect %s: %d %s", cur, code, errOut)
	}
	t.Logf("inspect %s: requests %v", cur, d.log.since(n0))
	var got inspectJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	ds := got.Dataset
	if ds == nil || ds.Dataset != "s3://lake/datasets/ocean" || !ds.Follows || ds.VersionID != dsV1 || ds.Pointer == nil ||
		ds.Pointer.VersionID != dsV1 || ds.Pointer.ManifestKey != d.man1 || ds.Pointer.FileCount != 2 || ds.Pointer.Schema != "cargoship.current/1" {
		t.Fatalf("dataset part %+v", ds)
	}
	if got.Manifest != d.man1 || got.Files != len(d.v1) || got.Bucket != "lake" {
		t.Fatalf("inspect: %+v", got)
	}
	if len(ds.Warnings) != 1 || !strings.Contains(ds.Warnings[0], "total_bytes 0 disagrees") || !strings.Contains(ds.Warnings[0], "s3://lake/datasets/ocean/CURRENT") {
		t.Fatalf("warnings %q", ds.Warnings)
	}
	if !strings.Contains(errOut, `"level":"warn"`) || !strings.Contains(errOut, "total_bytes 0 disagrees") {
		t.Fatalf("no warning logged: %s", errOut)
	}
	// A file_count that disagrees too.
	d.putCurrent(t, strings.Replace(d.pointer(dsV1), `"file_count":2`, `"file_count":7`, 1))
	out, errOut, code = d.run(t, "inspect", cur)
	if code != 0 || !strings.Contains(out, "version served:     "+dsV1+" (CURRENT)") || !strings.Contains(out, "file_count 7 disagrees with the manifest's 2 files") ||
		!strings.Contains(errOut, "file_count 7 disagrees") {
		t.Fatalf("inspect text: %d\n%s\n%s", code, out, errOut)
	}

	// Pinned: version 2 whatever CURRENT says; no pointer read, no warning.
	n0 = d.log.len()
	out, errOut, code = d.run(t, "inspect", "--json", pin)
	if code != 0 {
		t.Fatalf("inspect %s: %d %s", pin, code, errOut)
	}
	t.Logf("inspect %s: requests %v", pin, d.log.since(n0))
	got = inspectJSON{}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Dataset == nil || got.Dataset.Follows || got.Dataset.VersionID != dsV2 || got.Dataset.Pointer != nil || len(got.Dataset.Warnings) != 0 ||
		got.Manifest != d.man2 || strings.Contains(errOut, "warn") {
		t.Fatalf("pinned: %+v %+v %s", got, got.Dataset, errOut)
	}

	// ls.
	out, errOut, code = d.run(t, "ls", "--recursive", cur)
	if code != 0 || !strings.Contains(out, " a.txt\n") || !strings.Contains(out, " big.bin\n") || strings.Contains(out, "new.txt") {
		t.Fatalf("ls %s: %d\n%s\n%s", cur, code, out, errOut)
	}
	out, errOut, code = d.run(t, "ls", "--recursive", "--versions", pin)
	if code != 0 || !strings.Contains(out, "c/new.txt") || strings.Contains(out, "big.bin") {
		t.Fatalf("ls --versions %s: %d\n%s\n%s", pin, code, out, errOut)
	}

	// get: whole trees byte for byte, and one file to stdout.
	dir1 := t.TempDir()
	if _, errOut, code = d.run(t, "get", "--quiet", cur, "/", "-o", dir1); code != 0 {
		t.Fatalf("get %s: %d %s", cur, code, errOut)
	}
	sameTree(t, dir1, d.v1)
	dir2 := t.TempDir()
	if _, errOut, code = d.run(t, "get", "--quiet", pin, "/", "-o", dir2); code != 0 {
		t.Fatalf("get %s: %d %s", pin, code, errOut)
	}
	sameTree(t, dir2, d.v2)
	if out, errOut, code = d.run(t, "get", "--quiet", pin, "c/new.txt", "-o", "-"); code != 0 || out != string(d.v2["c/new.txt"]) {
		t.Fatalf("get -o -: %d, %d bytes, %s", code, len(out), errOut)
	}

	// verify: both versions (version 2's chunks under version 1's folder).
	for _, u := range []string{cur, pin} {
		if out, errOut, code = d.run(t, "verify", "--quiet", u); code != 0 || strings.Contains(out, "PROBLEM") {
			t.Fatalf("verify %s: %d\n%s\n%s", u, code, out, errOut)
		}
	}

	// A promote: @current follows it.
	d.point(t, dsV2)
	dir3 := t.TempDir()
	if _, errOut, code = d.run(t, "get", "--quiet", cur, "/", "-o", dir3); code != 0 {
		t.Fatalf("get after the promote: %d %s", code, errOut)
	}
	sameTree(t, dir3, d.v2)

	// Refusals, each naming what is wrong.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", "s3://lake/datasets/ocean@20200101T000000Z-000000"}, "version 20200101T000000Z-000000 does not exist"},
		{[]string{"ls", "s3://lake/datasets/ocean@.."}, `version id ".."`},
		{[]string{"verify", "s3://lake/nothing@current"}, "s3://lake/nothing/CURRENT"},
		{[]string{"index", "build", cur, "-o", filepath.Join(t.TempDir(), "x.idx")}, "a dataset name is not taken here"},
	} {
		_, errOut, code := d.run(t, c.args...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %s (want %q)", c.args, code, errOut, c.want)
		}
	}
	d.putCurrent(t, `{"schema":"cargoship.current/1"}`)
	if _, errOut, code := d.run(t, "get", cur, "a.txt", "-o", "-"); code == 0 || !strings.Contains(errOut, "s3://lake/datasets/ocean/CURRENT") {
		t.Fatalf("bad pointer: %d %s", code, errOut)
	}
}

// manifestGets counts the GETs of the object key that the lake's server
// answered with bytes (200 or 206), from request n on.
func (d *datasetLake) manifestGets(n int, key string) int {
	c := 0
	for _, r := range d.log.since(n) {
		if r == "GET /lake/"+key+" 200" || r == "GET /lake/"+key+" 206" {
			c++
		}
	}
	return c
}

// TestServeDatasetSharedIndexReplicas: two replicas following one dataset
// with a shared s3:// --index-cache (and the same secret) resolve the same
// version and serve identical bytes; the first reads the version's
// manifest and publishes its index, the second opens the version from
// the shared index without a manifest GET. After a promote the same holds
// for the new version at a rescan: one manifest GET in all. (With a
// cache prefix per replica, the second replica's manifest GET fails it.)
func TestServeDatasetSharedIndexReplicas(t *testing.T) {
	d := newDatasetLake(t)
	secret := testIndexSecretFile(t)
	replica := func() (addr, admin string, logs *lockedBuffer, rescan chan struct{}, scanned chan error) {
		t.Helper()
		cfg, _, err := parseServeArgs([]string{"--store", "s3://", "--s3-endpoint", d.url, "--s3-path-style", "--s3-region", "us-east-1", "--anonymous",
			"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
			"--alias", "ocean=s3://lake/datasets/ocean@current", "--retire-grace", "10ms",
			"--index-cache", "s3://lake/wharf-index/", "--index-cache-secret-file", secret})
		if err != nil {
			t.Fatal(err)
		}
		cfg.S3 = d.s3Config() // with the fake server's credentials
		rescan, scanned = make(chan struct{}), make(chan error, 4)
		cfg.rescanNow, cfg.scanned = rescan, func(err error) { scanned <- err }
		addr, admin, logs, stop := startServe(t, cfg)
		t.Cleanup(func() { stop() })
		waitReady(t, admin)
		return addr, admin, logs, rescan, scanned
	}
	version := func(admin string) string {
		t.Helper()
		_, body := get(t, "http://"+admin+"/-/archives")
		var p struct {
			Buckets []struct {
				Bucket  string
				Dataset *struct {
					VersionID string `json:"version_id"`
				}
			}
		}
		if err := json.Unmarshal(body, &p); err != nil || len(p.Buckets) != 1 || p.Buckets[0].Dataset == nil {
			t.Fatalf("/-/archives: %v %s", err, body)
		}
		return p.Buckets[0].Dataset.VersionID
	}
	same := func(addrs []string, want map[string][]byte) {
		t.Helper()
		for k, v := range want {
			for _, a := range addrs {
				wantBody(t, "http://"+a+"/ocean/"+k, v)
			}
		}
	}

	n0 := d.log.len()
	addrA, adminA, _, rescanA, scannedA := replica()
	if got := d.manifestGets(n0, d.man1); got != 1 {
		t.Fatalf("replica a: %d GETs of version 1's manifest, want 1", got)
	}
	n1 := d.log.len()
	addrB, adminB, logsB, rescanB, scannedB := replica()
	if got := d.manifestGets(n1, d.man1); got != 0 {
		t.Fatalf("replica b read version 1's manifest (%d GETs): it should open from the shared index\n%s", got, logsB.String())
	}
	if !strings.Contains(logsB.String(), "archive opened from index cache") {
		t.Fatalf("replica b did not open from the shared index:\n%s", logsB.String())
	}
	if va, vb := version(adminA), version(adminB); va != dsV1 || vb != dsV1 {
		t.Fatalf("versions served: a %s, b %s, want %s", va, vb, dsV1)
	}
	same([]string{addrA, addrB}, d.v1)

	// A promote, picked up by a rescan of each: one manifest GET in all.
	d.point(t, dsV2)
	n2 := d.log.len()
	for _, r := range []struct {
		now  chan struct{}
		done chan error
	}{{rescanA, scannedA}, {rescanB, scannedB}} {
		r.now <- struct{}{}
		if err := <-r.done; err != nil {
			t.Fatal(err)
		}
	}
	if got := d.manifestGets(n2, d.man2); got != 1 {
		t.Fatalf("after the promote: %d GETs of version 2's manifest by the two replicas, want 1\n%s", got, logsB.String())
	}
	if va, vb := version(adminA), version(adminB); va != dsV2 || vb != dsV2 {
		t.Fatalf("versions served after the promote: a %s, b %s, want %s", va, vb, dsV2)
	}
	same([]string{addrA, addrB}, d.v2)
}
