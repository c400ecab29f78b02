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
	out, errOut, code := d.run(t, "inspect", "--json", cur)
	if code != 0 {
		t.Fatalf("inspect %s: %d %s", cur, code, errOut)
	}
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
	out, errOut, code = d.run(t, "inspect", "--json", pin)
	if code != 0 {
		t.Fatalf("inspect %s: %d %s", pin, code, errOut)
	}
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
