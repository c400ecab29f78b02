package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// The docs/clients.md recipes run here: every block marked recipe=NAME is
// extracted, its endpoint (127.0.0.1:9000) pointed at a wharf serving the
// test archive "harbour" with the doc's example keys (or anonymously), run
// with its client in an empty directory and a private HOME, and the files
// it writes compared byte for byte with the source tree. A missing client
// fails the test (scripts/test.sh installs them).

const (
	docEndpoint  = "127.0.0.1:9000"
	docAccessKey = "WHARFEXAMPLEKEY"
	docSecretKey = "wharf-example-secret"
	// jsSDKVersion is the @aws-sdk/client-s3 the js-sdk recipe runs with,
	// installed at test time into tmp/npm-recipes (git-ignored).
	jsSDKVersion = "3.1175.0"
)

// docRecipe is one fenced block of docs/clients.md.
type docRecipe struct {
	lang, name, body string
	untested         bool
}

var recipeBlockRE = regexp.MustCompile("(?ms)^```([a-z]+) (recipe|untested)=([a-z0-9-]+)\n(.*?)^```$")

func parseRecipes(doc string) []docRecipe {
	var out []docRecipe
	for _, m := range recipeBlockRE.FindAllStringSubmatch(doc, -1) {
		out = append(out, docRecipe{lang: m[1], name: m[3], body: m[4], untested: m[2] == "untested"})
	}
	return out
}

// recipeSpec says how a recipe runs and what it must leave behind.
type recipeSpec struct {
	anonymous bool
	tools     [][2]string // sh: program and the Debian package that has it
	pyPkgs    string      // python: Debian packages with the modules
	pyMods    []string
	// want: "LOCAL=SOURCE" pairs. LOCAL is a path in the recipe's
	// directory; SOURCE is a path in the archive's source tree (a
	// trailing "/" compares every file under it, "#A-B" a byte range) or
	// "@NAME", a file the fixture computed (pixels, array values).
	want []string
}

var recipeSpecs = map[string]recipeSpec{
	"awscli":           {tools: [][2]string{{"aws", "awscli"}}, want: []string{"vessels.csv=data/vessels.csv"}},
	"awscli-profile":   {tools: [][2]string{{"aws", "awscli"}}, want: []string{"data/=data/"}},
	"awscli-anonymous": {anonymous: true, tools: [][2]string{{"aws", "awscli"}}, want: []string{"vessels.csv=data/vessels.csv"}},
	"boto3-client":     {pyPkgs: "python3-boto3", pyMods: []string{"boto3"}, want: []string{"vessels.csv=data/vessels.csv"}},
	"boto3-resource":   {pyPkgs: "python3-boto3", pyMods: []string{"boto3"}, want: []string{"data/tides/=data/tides/"}},
	"boto3-presign":    {pyPkgs: "python3-boto3", pyMods: []string{"boto3"}, want: []string{"vessels.csv=data/vessels.csv"}},
	"rclone":           {tools: [][2]string{{"rclone", "rclone"}}, want: []string{"data/=data/"}},
	"s3cmd":            {tools: [][2]string{{"s3cmd", "s3cmd"}}, want: []string{"vessels.csv=data/vessels.csv"}},
	"s3fs-fuse":        {tools: [][2]string{{"s3fs", "s3fs"}, {"fusermount", "fuse3"}}, want: []string{"vessels.csv=data/vessels.csv"}},
	"gdal":             {tools: [][2]string{{"gdalinfo", "gdal-bin"}, {"gdal_translate", "gdal-bin"}}, want: []string{"depth.raw=@depth.raw"}},
	"rasterio":         {pyPkgs: "python3-rasterio python3-boto3", pyMods: []string{"rasterio", "boto3"}, want: []string{"depth.raw=@depth.raw"}},
	"xarray-zarr-http": {anonymous: true, pyPkgs: "python3-xarray python3-zarr python3-fsspec python3-aiohttp", pyMods: []string{"xarray", "zarr", "fsspec", "aiohttp"}, want: []string{"tides.raw=@tides.raw"}},
	"go-sdk":           {want: []string{"vessels.csv=data/vessels.csv"}},
	"js-sdk":           {want: []string{"vessels.csv=data/vessels.csv"}},
	"curl-sigv4":       {tools: [][2]string{{"curl", "curl"}}, want: []string{"vessels.csv=data/vessels.csv"}},
	"curl-anonymous":   {anonymous: true, tools: [][2]string{{"curl", "curl"}}, want: []string{"vessels.csv=data/vessels.csv", "head.csv=data/vessels.csv#0-99"}},
}

// untestedRecipes are the blocks the suite cannot run, and why (the doc
// says so next to each).
var untestedRecipes = map[string]string{
	"xarray-zarr-s3fs": "python s3fs is not packaged for Debian 12 and PyPI is unreachable",
	"duckdb":           "DuckDB downloads httpfs at run time from a server the test machines cannot reach",
}

func TestClientRecipes(t *testing.T) {
	doc, err := os.ReadFile("../docs/clients.md")
	if err != nil {
		t.Fatal(err)
	}
	recipes := parseRecipes(string(doc))
	seen := map[string]bool{}
	for _, r := range recipes {
		if seen[r.name] {
			t.Errorf("docs/clients.md: recipe %s appears twice", r.name)
		}
		seen[r.name] = true
		if _, ok := recipeSpecs[r.name]; r.untested == ok {
			t.Errorf("docs/clients.md: block %s=%s has no matching entry in %s", map[bool]string{true: "untested", false: "recipe"}[r.untested], r.name,
				map[bool]string{true: "untestedRecipes", false: "recipeSpecs"}[r.untested])
		}
		if _, ok := untestedRecipes[r.name]; r.untested && !ok {
			t.Errorf("docs/clients.md: untested block %s is not in untestedRecipes", r.name)
		}
	}
	for name := range recipeSpecs {
		if !seen[name] {
			t.Errorf("recipe %s is expected but docs/clients.md has no block recipe=%s", name, name)
		}
	}
	for name := range untestedRecipes {
		if !seen[name] {
			t.Errorf("untestedRecipes names %s, which docs/clients.md does not have", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The archive: wharf's sample tree plus a GeoTIFF and a Zarr store.
	tree, expect := t.TempDir(), t.TempDir()
	if err := os.CopyFS(tree, os.DirFS("../cmd/wharf/sample")); err != nil {
		t.Fatal(err)
	}
	py := findPython(t, "python3-rasterio python3-xarray python3-zarr", "rasterio", "xarray", "zarr", "numpy")
	fixture, _ := filepath.Abs("clients/recipes_fixture.py")
	run(t, baseEnv(t.TempDir()), "", py, fixture, tree, expect)
	files, err := cargopack.FromDir(tree)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cargopack.Write(context.Background(), cargopack.S3Sink(suite.s3client), files, cargopack.Options{
		Bucket: srcBucket, Prefix: "archives/harbour", UploadID: "up-harbour", SourcePath: "/srv/harbour", FrameSize: 16 << 10, ContentHash: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	archive := "harbour=s3://" + srcBucket + "/" + res.ManifestKey
	servers := map[bool]*wharfServer{}
	for _, anon := range []bool{false, true} {
		args := []string{"serve", "--listen", "127.0.0.1:0", "--store", "s3://", "--s3-endpoint", suite.s3url, "--s3-path-style",
			"--s3-region", "us-east-1", "--archive", archive}
		name := "recipes-keyed"
		if anon {
			args, name = append(args, "--anonymous"), "recipes-anonymous"
		} else {
			args = append(args, "--access-key", docAccessKey, "--secret-key", docSecretKey)
		}
		srv, err := startWharf(suite.bin, name, args, suite.serverEnv())
		if err != nil {
			t.Fatal(err)
		}
		defer stopOrFail(t, srv)
		servers[anon] = srv
	}

	sort.Slice(recipes, func(i, j int) bool { return recipes[i].name < recipes[j].name })
	for _, r := range recipes {
		if r.untested {
			t.Logf("recipe %s not run: %s", r.name, untestedRecipes[r.name])
			continue
		}
		spec := recipeSpecs[r.name]
		t.Run(r.name, func(t *testing.T) {
			srv := servers[spec.anonymous]
			if !strings.Contains(r.body, docEndpoint) {
				t.Fatalf("recipe does not use the endpoint %s, so it would not reach the test server", docEndpoint)
			}
			body := strings.ReplaceAll(r.body, docEndpoint, strings.TrimPrefix(srv.url, "http://"))
			dir := t.TempDir()
			home := clientHome(t)
			env := append(baseEnv(home), "AWS_EC2_METADATA_DISABLED=true")
			runRecipe(t, r.lang, r.name, body, spec, dir, env)
			for _, w := range spec.want {
				checkRecipeOutput(t, dir, tree, expect, w)
			}
			t.Logf("recipe %s (%s, %s server): output matches the source", r.name, r.lang, srv.name)
		})
	}
}

// runRecipe runs one recipe body with its client in dir.
func runRecipe(t *testing.T, lang, name, body string, spec recipeSpec, dir string, env []string) {
	t.Helper()
	switch lang {
	case "sh":
		for _, tool := range spec.tools {
			need(t, tool[0], tool[1])
		}
		if name == "s3fs-fuse" {
			if _, err := os.Stat("/dev/fuse"); err != nil {
				t.Fatalf("s3fs-fuse needs /dev/fuse: %v", err)
			}
			t.Cleanup(func() { unmountUnder(t, dir) })
		}
		script := filepath.Join(t.TempDir(), "recipe.sh")
		os.WriteFile(script, []byte(body), 0o644)
		run(t, env, dir, "bash", "-euo", "pipefail", script)
	case "python":
		py := findPython(t, spec.pyPkgs, spec.pyMods...)
		script := filepath.Join(t.TempDir(), "recipe.py")
		os.WriteFile(script, []byte(body), 0o644)
		run(t, env, dir, py, script)
	case "go":
		bin := buildGoRecipe(t, body)
		run(t, env, dir, bin)
	case "js":
		node := need(t, "node", "nodejs")
		modDir := npmRecipeDeps(t)
		script := filepath.Join(modDir, fmt.Sprintf("recipe-%d-%s.mjs", os.Getpid(), name))
		os.WriteFile(script, []byte(body), 0o644)
		defer os.Remove(script)
		run(t, env, dir, node, script)
	default:
		t.Fatalf("recipe %s: no runner for language %q", name, lang)
	}
}

// buildGoRecipe builds a Go recipe as a program of its own module that
// requires what wharf's go.mod requires (the module cache has them).
func buildGoRecipe(t *testing.T, body string) string {
	t.Helper()
	goTool := need(t, "go", "golang")
	mod := t.TempDir()
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	gosum, err := os.ReadFile("../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	gomod = regexp.MustCompile(`(?m)^module .*$`).ReplaceAll(gomod, []byte("module recipe"))
	os.WriteFile(filepath.Join(mod, "go.mod"), gomod, 0o644)
	os.WriteFile(filepath.Join(mod, "go.sum"), gosum, 0o644)
	os.WriteFile(filepath.Join(mod, "main.go"), []byte(body), 0o644)
	bin := filepath.Join(mod, "recipe")
	// The go command itself needs the developer's Go environment (module
	// cache, proxy settings); the recipe then runs in the clean one.
	if out, errOut, err := runErr(os.Environ(), mod, goTool, "build", "-mod=mod", "-o", bin, "."); err != nil {
		t.Fatalf("go build of the go-sdk recipe: %v\n%s%s", err, out, errOut)
	}
	return bin
}

// npmRecipeDeps installs @aws-sdk/client-s3 (pinned) into tmp/npm-recipes
// of the repository (git-ignored), once; a failed install fails the test.
func npmRecipeDeps(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../tmp/npm-recipes")
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(dir, "node_modules", "@aws-sdk", "client-s3", "package.json")
	installed := func() bool {
		b, err := os.ReadFile(pkg)
		var p struct{ Version string }
		return err == nil && json.Unmarshal(b, &p) == nil && p.Version == jsSDKVersion
	}
	if installed() {
		return dir
	}
	npm := need(t, "npm", "npm")
	os.MkdirAll(dir, 0o755)
	// npm's registry settings (and certificates) come from the machine's
	// environment, as for any npm install.
	out, errOut, err := runErr(os.Environ(), dir, npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", dir, "@aws-sdk/client-s3@"+jsSDKVersion)
	if err != nil || !installed() {
		t.Fatalf("npm install @aws-sdk/client-s3@%s into %s failed (the js-sdk recipe needs it): %v\n%s%s", jsSDKVersion, dir, err, tail(out, 20), tail(errOut, 20))
	}
	return dir
}

// unmountUnder unmounts any FUSE mount left under dir by a failed recipe.
func unmountUnder(t *testing.T, dir string) {
	mounts, _ := os.ReadFile("/proc/self/mounts")
	for _, line := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], dir) {
			if out, err := exec.Command("fusermount", "-u", f[1]).CombinedOutput(); err != nil {
				t.Errorf("unmounting %s: %v %s", f[1], err, out)
			}
		}
	}
}

// checkRecipeOutput compares one "LOCAL=SOURCE" expectation.
func checkRecipeOutput(t *testing.T, dir, tree, expect, want string) {
	t.Helper()
	local, source, _ := strings.Cut(want, "=")
	readWant := func(src string) []byte {
		t.Helper()
		var b []byte
		var err error
		rng := ""
		src, rng, _ = strings.Cut(src, "#")
		if name, ok := strings.CutPrefix(src, "@"); ok {
			b, err = os.ReadFile(filepath.Join(expect, name))
		} else {
			b, err = os.ReadFile(filepath.Join(tree, filepath.FromSlash(src)))
		}
		if err != nil {
			t.Fatalf("source %s: %v", src, err)
		}
		if rng != "" {
			a, z, _ := strings.Cut(rng, "-")
			i, _ := strconv.Atoi(a)
			j, _ := strconv.Atoi(z)
			b = b[i : j+1]
		}
		return b
	}
	if !strings.HasSuffix(source, "/") {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(local)))
		if err != nil {
			t.Fatalf("the recipe did not write %s: %v", local, err)
		}
		if w := readWant(source); !bytes.Equal(got, w) {
			t.Fatalf("%s: %d bytes differ from %s (%d bytes)", local, len(got), source, len(w))
		}
		return
	}
	n := 0
	root := filepath.Join(tree, filepath.FromSlash(source))
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(local), rel))
		if err != nil {
			return fmt.Errorf("the recipe did not write %s%s: %w", local, filepath.ToSlash(rel), err)
		}
		if want, _ := os.ReadFile(p); !bytes.Equal(got, want) {
			return fmt.Errorf("%s%s differs from the source", local, filepath.ToSlash(rel))
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no source files under %s", source)
	}
}
