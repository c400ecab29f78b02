package main

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/catalog"
)

// TestMemoryTargetValidation: --memory-target and memory_target take a
// positive size (0 = off); anything that looks like something else (a share, a
// fraction, a duration, a bare small number meant as MiB) fails at start
// naming the flag, and so does a target smaller than the explicit
// budgets.
func TestMemoryTargetValidation(t *testing.T) {
	t.Setenv("WHARF_ACCESS_KEY", "")
	t.Setenv("WHARF_SECRET_KEY", "")
	base := []string{"--store", "file:///tmp", "--archive", "a=s3://b/m.json"}
	for _, tc := range []struct {
		name string
		args []string
		yaml string // a config file, if set
		want string // "" = accepted
	}{
		{"bytes from the downward API", []string{"--memory-target", "3221225472"}, "", ""},
		{"GiB", []string{"--memory-target", "3GiB"}, "", ""},
		{"Kubernetes quantity", []string{"--memory-target", "3Gi"}, "", ""},
		{"yaml", nil, "memory_target: 3GiB\n", ""},
		{"zero is off", []string{"--memory-target", "0"}, "", ""},
		{"a flag turns off the file's target", []string{"--memory-target", "0"}, "memory_target: 3GiB\n", ""},
		{"negative", []string{"--memory-target", "-1GiB"}, "", "want a positive size"},
		{"share", []string{"--memory-target", "90%"}, "", "not a share"},
		{"fraction", []string{"--memory-target", "1.5GiB"}, "", "not 1.5GiB"},
		{"exponent", []string{"--memory-target", "3e9"}, "", "not an exponent"},
		{"duration", []string{"--memory-target", "10m0s"}, "", "unknown suffix"},
		{"bare MiB count", []string{"--memory-target", "512"}, "", "write 512MiB, not 512"},
		{"word", []string{"--memory-target", "lots"}, "", "--memory-target \"lots\""},
		{"empty", []string{"--memory-target", ""}, "", "want the container's memory limit"},
		{"huge", []string{"--memory-target", "2048TiB"}, "", "larger than 1PiB"},
		{"yaml share", nil, "memory_target: 90%\n", "not a share"},
		{"yaml list", nil, "memory_target: [1, 2]\n", "memory_target: want a size"},
		{"too small for anything", []string{"--memory-target", "150MiB"}, "", "the smallest target that holds them is about"},
		{"smaller than explicit read memory", []string{"--memory-target", "2GiB", "--read-memory", "3GiB"}, "",
			"smaller than the explicit budgets need: --read-memory 3072MiB add up to 3072MiB"},
		{"smaller than explicit cache and index", []string{"--memory-target", "3GiB", "--cache-bytes", "2GiB", "--index-memory", "1GiB"}, "",
			"--cache-bytes 2048MiB (+ 64MiB in flight) + --index-memory 1024MiB add up to 3136MiB"},
		{"explicit cache in the file", []string{"--memory-target", "1GiB"}, "cache_bytes: 2GiB\n", "--cache-bytes 2048MiB"},
		{"explicit cache leaves no index", []string{"--memory-target", "3GiB", "--cache-bytes", "2GiB"}, "",
			"--cache-bytes 2048MiB + 64MiB in flight + index memory 461MiB exceed"},
		{"explicit read memory leaves no cache", []string{"--memory-target", "3GiB", "--read-memory", "70MiB"}, "", "--read-memory 70MiB with --memory-target leaves a frame cache of 6MiB"},
		{"explicit budgets that fit", []string{"--memory-target", "5GiB", "--cache-bytes", "2GiB", "--index-memory", "1GiB"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string(nil), base...)
			if tc.yaml != "" {
				args = append(args, "--config", writeFile(t, "c.yaml", tc.yaml))
			}
			args = append(args, tc.args...)
			cfg, _, err := parseServeArgs(args)
			if err == nil {
				_, err = cfg.checkConfig()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one with %q", err, tc.want)
			case tc.want == "" && (cfg.MemoryTarget == 0) != (tc.args != nil && tc.args[len(tc.args)-1] == "0"):
				t.Fatalf("target %d taken from %q", cfg.MemoryTarget, tc.args)
			}
		})
	}
}

// TestMemoryTargetDivision: the table in docs/operations.md. Derived
// budgets take their share of the target, explicit ones keep their value
// and the derived ones share the rest, and every plan fits its target:
// the budgets plus the runtime headroom stay within the Go limit, which
// stays below the target.
func TestMemoryTargetDivision(t *testing.T) {
	const MiB, GiB = 1 << 20, 1 << 30
	near := func(got, want int64) bool { return got >= want-MiB && got <= want+MiB }
	for _, tc := range []struct {
		name   string
		target int64
		ex     memoryExplicit
		cur    memoryPlan
		// want: 0 = not checked.
		cache, read, index, goLimit int64
		maxFiles                    int
	}{
		{name: "3GiB, nothing explicit", target: 3 * GiB,
			cache: 3 * GiB * 40 / 100, read: 3 * GiB * 55 / 100, index: 3 * GiB * 15 / 100, goLimit: 3 * GiB * 90 / 100,
			maxFiles: int(3 * GiB * 15 / 100 / catalog.IndexBytesPerFile)},
		// The examples table of docs/operations.md ("One memory target").
		{name: "512MiB (docs)", target: 512 * MiB,
			goLimit: 461 * MiB, cache: 205 * MiB, read: 282 * MiB, index: 77 * MiB, maxFiles: 503_316},
		{name: "16GiB (docs)", target: 16 * GiB,
			goLimit: 16 * GiB * 90 / 100, cache: 16 * GiB * 40 / 100, read: 16 * GiB * 55 / 100, index: 16 * GiB * 15 / 100, maxFiles: catalog.DefaultMaxFilesPerUpload},
		{name: "64GiB: files capped at the default", target: 64 * GiB,
			cache: 64 * GiB * 40 / 100, index: 64 * GiB * 15 / 100, maxFiles: catalog.DefaultMaxFilesPerUpload},
		{name: "330MiB: floors of the headroom and of the reads in flight", target: 330 * MiB,
			// Go limit 297, runtime 66, index 49.5: read 181.5, cache 181.5-64.
			goLimit: 297 * MiB, read: 363 * MiB / 2, cache: 235 * MiB / 2, index: 99 * MiB / 2},
		{name: "explicit cache: the reads in flight take the rest", target: 330 * MiB,
			ex: memoryExplicit{cache: true}, cur: memoryPlan{Cache: 16 * MiB},
			cache: 16 * MiB, read: 363 * MiB / 2, index: 99 * MiB / 2},
		{name: "explicit read memory: a quarter in flight", target: 3 * GiB,
			ex: memoryExplicit{read: true}, cur: memoryPlan{Read: GiB},
			read: GiB, cache: 768 * MiB, index: 3 * GiB * 15 / 100},
		{name: "explicit index memory and file cap kept", target: 3 * GiB,
			ex: memoryExplicit{index: true, maxFiles: true}, cur: memoryPlan{Index: 256 * MiB},
			index: 256 * MiB, read: 3*GiB*70/100 - 256*MiB, cache: 3*GiB*70/100 - 256*MiB - 3*GiB*15/100},
		{name: "explicit file cap: the index memory holds it", target: 3 * GiB,
			ex: memoryExplicit{maxFiles: true}, cur: memoryPlan{MaxFiles: 5_000_000},
			index: 800e6, read: 3*GiB*70/100 - 800e6},
		{name: "explicit cache and read memory", target: 3 * GiB,
			ex: memoryExplicit{cache: true, read: true}, cur: memoryPlan{Cache: GiB, Read: 1536 * MiB},
			cache: GiB, read: 1536 * MiB, index: 3 * GiB * 15 / 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := divideMemory(tc.target, tc.ex, tc.cur)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				what      string
				got, want int64
			}{{"cache", p.Cache, tc.cache}, {"read memory", p.Read, tc.read}, {"index memory", p.Index, tc.index}, {"Go limit", p.GoLimit, tc.goLimit}} {
				if c.want != 0 && !near(c.got, c.want) {
					t.Errorf("%s %d (%.1f MiB), want %d (%.1f MiB)", c.what, c.got, float64(c.got)/MiB, c.want, float64(c.want)/MiB)
				}
			}
			if tc.maxFiles != 0 && p.MaxFiles != tc.maxFiles {
				t.Errorf("max files per upload %d, want %d", p.MaxFiles, tc.maxFiles)
			}
			if tc.ex.maxFiles && p.MaxFiles != 0 {
				t.Errorf("explicit --max-files-per-upload replaced by %d", p.MaxFiles)
			}
			if p.Read < p.Cache+minMemoryExtra {
				t.Errorf("read memory %d cannot hold the cache %d + 64MiB", p.Read, p.Cache)
			}
			if p.Read+p.Index+p.Runtime > p.GoLimit || p.GoLimit >= p.Target || p.Runtime < minRuntime {
				t.Errorf("plan does not fit: read %d + index %d + runtime %d, Go limit %d, target %d", p.Read, p.Index, p.Runtime, p.GoLimit, p.Target)
			}
			// The derived plan passes serve's own checks.
			ol := defaultOpenLimits()
			ol.IndexMemory = yamlBytes(p.Index)
			if p.MaxFiles != 0 {
				ol.MaxFilesPerUpload = p.MaxFiles
			} else {
				ol.MaxFilesPerUpload = minFilesPerLoad
			}
			if err := ol.validate(); err != nil {
				t.Errorf("open limits: %v", err)
			}
			if err := (readOptions{ReadMemory: p.Read}).validate(p.Cache); err != nil {
				t.Errorf("read options: %v", err)
			}
		})
	}
}

// TestMemoryTargetGoLimit: the target sets the runtime's soft limit (and
// serve restores the previous one on return), and the log says which of
// --memory-target and GOMEMLIMIT wins.
func TestMemoryTargetGoLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	p, err := divideMemory(3<<30, memoryExplicit{}, memoryPlan{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     string // "" = unset
		planned bool
		want    []string
		limit   int64
	}{
		{"target alone", "", true, []string{"budgets divided from --memory-target", `"go_memory_limit":2899102932`}, p.GoLimit},
		{"target over GOMEMLIMIT", "1GiB", true, []string{"--memory-target wins over GOMEMLIMIT", `"GOMEMLIMIT":"1GiB"`}, p.GoLimit},
		{"GOMEMLIMIT alone", "1GiB", false, []string{"GOMEMLIMIT from the environment is the Go soft memory limit"}, before},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("GOMEMLIMIT", tc.env)
			}
			var buf bytes.Buffer
			restore := setGoMemoryLimit(p, tc.planned, zerolog.New(&buf))
			if got := debug.SetMemoryLimit(-1); got != tc.limit {
				t.Errorf("Go memory limit %d, want %d", got, tc.limit)
			}
			restore()
			if got := debug.SetMemoryLimit(-1); got != before {
				t.Errorf("limit after restore %d, want %d", got, before)
			}
			for _, w := range tc.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("log %s lacks %q", buf.String(), w)
				}
			}
		})
	}
}

// TestServeMemoryTarget: serve with --memory-target divides its budgets
// (the start-up log lists them), runs under the target's Go soft limit
// (the runtime reports it on /metrics), and gives the previous limit back
// when it returns.
func TestServeMemoryTarget(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	const target = 512 << 20
	p, err := divideMemory(target, memoryExplicit{}, memoryPlan{})
	if err != nil {
		t.Fatal(err)
	}
	addr, admin, logs, stop := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true,
		CacheBytes: 64 << 20, MemoryTarget: target, LogFormat: "json",
	})
	for _, want := range []string{"budgets divided from --memory-target",
		`"go_memory_limit":` + fmt.Sprint(p.GoLimit), `"cache_bytes":` + fmt.Sprint(p.Cache), `"read_memory":` + fmt.Sprint(p.Read)} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
	if code, body := get(t, "http://"+addr+"/data/a.txt"); code != 200 || string(body) != "hello\n" {
		t.Fatalf("GET: %d %q", code, body)
	}
	_, metrics := get(t, "http://"+admin+"/metrics")
	if want := fmt.Sprintf("go_gc_gomemlimit_bytes %g", float64(p.GoLimit)); !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics lacks %q", want)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("Go memory limit after serve %d, want the previous %d", got, before)
	}
}
