package main

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// docFlagRow is one row of a flags table in the docs: the flags its first
// column names, its default cell, and (operations.md only) its config-key
// cell.
type docFlagRow struct {
	line   int
	flags  []string
	def    string
	yamlID string
}

var (
	docFlagName = regexp.MustCompile("`--([a-z0-9-]+)")
	docTick     = regexp.MustCompile("`([^`]*)`")
)

// readFlagTable returns the rows of the Markdown table whose header line is
// header, in file path. defCol and keyCol are the columns of the default
// and of the config key (keyCol < 0: none).
func readFlagTable(t *testing.T, path, header string, defCol, keyCol int) []docFlagRow {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == header {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatalf("%s: no table with header %q", path, header)
	}
	var rows []docFlagRow
	for i := start + 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		// A cell may hold an escaped pipe (`DIR\|s3://...`).
		cells := strings.Split(strings.ReplaceAll(lines[i], `\|`, "\x00"), "|")
		cells = cells[1 : len(cells)-1]
		for j := range cells {
			cells[j] = strings.TrimSpace(strings.ReplaceAll(cells[j], "\x00", "|"))
		}
		r := docFlagRow{line: i + 1, def: cells[defCol]}
		for _, m := range docFlagName.FindAllStringSubmatch(cells[0], -1) {
			r.flags = append(r.flags, m[1])
		}
		if keyCol >= 0 {
			r.yamlID = cells[keyCol]
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: table %q has no rows", path, header)
	}
	return rows
}

// yamlKeys returns every key the config file accepts, nested ones as
// "s3.endpoint", read from fileConfig's yaml tags (inline structs flattened).
func yamlKeys(typ reflect.Type, prefix string, into map[string]bool) {
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		inline := strings.Contains(f.Tag.Get("yaml"), ",inline")
		ft := f.Type
		if inline && ft.Kind() == reflect.Struct {
			yamlKeys(ft, prefix, into)
			continue
		}
		if tag == "" || tag == "-" {
			continue
		}
		into[prefix+tag] = true
		if ft.Kind() == reflect.Struct && ft.PkgPath() == "" {
			// An anonymous nested struct (s3: {endpoint, ...}).
			yamlKeys(ft, prefix+tag+".", into)
		}
	}
}

// documentedDefault reports what value the flag's own parser makes of a
// documented default: "off", "none", "empty" and "required" mean the zero
// value; a leading `X` is parsed; anything else ("an eighth of
// --cache-bytes", "env WHARF_...") is not checked (ok false).
func documentedDefault(cell string) (value string, ok bool) {
	for _, zero := range []string{"off", "none", "empty", "required", "(required)"} {
		if cell == zero || strings.HasPrefix(cell, zero+" ") {
			return "", true
		}
	}
	if m := docTick.FindStringSubmatch(cell); m != nil && strings.HasPrefix(cell, "`") {
		if strings.HasPrefix(m[1], "http") || strings.Contains(m[1], "_") {
			return "", false // a URL scheme or another option's name
		}
		return m[1], true
	}
	return "", false
}

// isZeroDefault reports whether a flag's DefValue is its type's zero.
func isZeroDefault(v string) bool {
	switch v {
	case "", "false", "0", "0s", "[]":
		return true
	}
	return false
}

// checkDocDefault parses the documented default with a fresh flag set's
// own Set and compares its String with the flag's default.
func checkDocDefault(t *testing.T, where, name, doc string) {
	t.Helper()
	var path string
	var check bool
	cfg := defaultServeConfig()
	fs := serveFlags(&cfg, &path, &check)
	f := fs.Lookup(name)
	if f == nil {
		return // reported by the set comparison
	}
	if doc == "" {
		if !isZeroDefault(f.DefValue) {
			t.Errorf("%s: --%s documented as off/none, but its default is %q", where, name, f.DefValue)
		}
		return
	}
	if err := fs.Set(name, doc); err != nil {
		t.Errorf("%s: --%s documented default %q does not parse: %v", where, name, doc, err)
		return
	}
	got, want := f.Value.String(), f.DefValue
	if isZeroDefault(want) && !isZeroDefault(got) {
		// Zero stands for a default applied later; the help text states
		// it ("(default 8MiB)", "(0 = 1m; ...)"): parse that the same way.
		m := usageDefault.FindStringSubmatch(f.Usage)
		if m == nil {
			t.Errorf("%s: --%s documented default %q, but the flag's default is %q and its help names none", where, name, doc, want)
			return
		}
		cfg2 := defaultServeConfig()
		fs2 := serveFlags(&cfg2, &path, &check)
		if err := fs2.Set(name, m[1]); err != nil {
			t.Errorf("--%s: the help's default %q does not parse: %v", name, m[1], err)
			return
		}
		want = fs2.Lookup(name).Value.String()
	}
	if got != want {
		t.Errorf("%s: --%s documented default %q is %q, the flag's default is %q", where, name, doc, got, want)
	}
}

// usageDefault finds the default a flag's help states when its zero value
// stands for it.
var usageDefault = regexp.MustCompile(`\((?:default|0 =) ([^;),]+)[;)]`)

// TestServeFlagsDocumented pins the docs to "wharf serve"'s flag set: every
// flag is in README's flags table and in docs/operations.md's option
// reference, each documented flag exists, each documented default is the
// flag's (parsed by the flag itself, so 512MiB and 536870912 agree), and
// each option-reference row names a config key the YAML file accepts
// (every flag has one but --config, --check-config and the key pair, which
// the keys list replaces).
func TestServeFlagsDocumented(t *testing.T) {
	var path string
	var check bool
	cfg := defaultServeConfig()
	fs := serveFlags(&cfg, &path, &check)
	code := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { code[f.Name] = true })

	keys := map[string]bool{}
	yamlKeys(reflect.TypeOf(fileConfig{}), "", keys)
	noKey := map[string]bool{"config": true, "check-config": true, "access-key": true, "secret-key": true}

	for _, doc := range []struct {
		path, header   string
		defCol, keyCol int
	}{
		{"../../README.md", "| flag | default | meaning |", 1, -1},
		{"../../docs/operations.md", "| Flag | Config key | Default | Meaning |", 2, 1},
	} {
		rows := readFlagTable(t, doc.path, doc.header, doc.defCol, doc.keyCol)
		documented := map[string]bool{}
		for _, r := range rows {
			where := doc.path[len("../../"):] + ":" + strconv.Itoa(r.line)
			for _, name := range r.flags {
				documented[name] = true
				if !code[name] {
					t.Errorf("%s: --%s is documented but wharf serve has no such flag", where, name)
				}
			}
			// Defaults: one per flag ("`10s`, `1m`, `2m`" for three), or
			// one for all the row's flags.
			ticks := docTick.FindAllString(r.def, -1)
			if len(r.flags) > 1 && len(ticks) == len(r.flags) && strings.Join(ticks, ", ") == r.def {
				for i, name := range r.flags {
					checkDocDefault(t, where, name, strings.Trim(ticks[i], "`"))
				}
			} else if v, ok := documentedDefault(r.def); ok {
				for _, name := range r.flags {
					checkDocDefault(t, where, name, v)
				}
			}
			if doc.keyCol < 0 || len(r.flags) == 0 {
				continue
			}
			if r.yamlID == "–" || r.yamlID == "-" {
				for _, name := range r.flags {
					if !noKey[name] {
						t.Errorf("%s: --%s has no config key in the docs", where, name)
					}
				}
				continue
			}
			ids := docTick.FindAllStringSubmatch(r.yamlID, -1)
			if len(ids) == 0 {
				t.Errorf("%s: config key cell %q names no key", where, r.yamlID)
			}
			for _, m := range ids {
				k, _, _ := strings.Cut(m[1], ":")
				if !keys[k] {
					t.Errorf("%s: config key %q is not a key of the config file", where, k)
				}
			}
		}
		var missing []string
		for name := range code {
			if !documented[name] {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		for _, name := range missing {
			t.Errorf("%s: --%s is a wharf serve flag but not in the table", doc.path[len("../../"):], name)
		}
	}
}

// metricName finds the name of a Prometheus series where the code defines
// it: a CounterOpts/GaugeOpts/HistogramOpts Name or a NewDesc.
var metricName = regexp.MustCompile(`(?:Name:\s*|NewDesc\()"(wharf_[a-z0-9_]+)"`)

// TestMetricsDocumented: every wharf_* series the code defines (outside
// tests) is named in docs/operations.md, and every wharf_* series
// operations.md names is defined. Read from the source, so a series added
// in any package without a line in the docs fails here.
func TestMetricsDocumented(t *testing.T) {
	defined := map[string]string{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "tmp" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range metricName.FindAllSubmatch(src, -1) {
			defined[string(m[1])] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(defined) < 20 {
		t.Fatalf("found only %d series in the source: the pattern no longer matches how metrics are defined", len(defined))
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`wharf_[a-z0-9_]*[a-z0-9]`).FindAll(doc, -1) {
		named[string(m)] = true
	}
	var names []string
	for n := range defined {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !named[n] {
			t.Errorf("%s (defined in %s) is not in docs/operations.md", n, defined[n])
		}
	}
	for n := range named {
		// wharf_console is the console's cookie; wharf_peer_* and the like
		// are families, named by a prefix.
		if defined[n] == "" && n != "wharf_console" && !familyPrefix(n, defined) {
			t.Errorf("docs/operations.md names %s, which the code does not define", n)
		}
	}
}

// familyPrefix reports whether n is the prefix of a defined series
// ("wharf_peer" for wharf_peer_*).
func familyPrefix(n string, defined map[string]string) bool {
	for d := range defined {
		if strings.HasPrefix(d, n+"_") {
			return true
		}
	}
	return false
}
