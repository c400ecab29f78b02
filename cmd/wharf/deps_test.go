package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/wharf-s3/wharf"

// goListDeps returns, for every package in the non-test dependency graph of
// patterns, the packages it imports directly.
func goListDeps(t *testing.T, patterns ...string) map[string][]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to inspect the binary's dependencies: %v", err)
	}
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, patterns...)
	out, err := exec.Command(goTool, args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	graph := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) > 0 {
			graph[f[0]] = f[1:]
		}
	}
	if len(graph) < 10 {
		t.Fatalf("go list returned %d packages: %q", len(graph), out)
	}
	return graph
}

// TestBinaryLinksNoTestCode: the wharf binary links neither the S3 test
// server (gofakes3), nor the SDK's deprecated download manager, nor the
// end-to-end test packages. The fault-injecting test layer backend/faults
// is linked for one reason only, "wharf bench" (S3-like latency and
// bandwidth, and the soak's injected faults), so the only package of the
// binary that imports it is cmd/wharf/internal/bench, and none of the
// serving packages reach it.
func TestBinaryLinksNoTestCode(t *testing.T) {
	graph := goListDeps(t, module+"/cmd/wharf")
	if _, ok := graph[module+"/cmd/wharf"]; !ok {
		t.Fatalf("cmd/wharf itself is not in its dependency list")
	}
	forbidden := []string{
		"github.com/johannesboyne/gofakes3",
		"github.com/aws/aws-sdk-go-v2/feature/s3/manager",
		module + "/integration",
		// The Store conformance suite and the real S3 server of the
		// end-to-end tests (scripts/test.sh builds versitygw into ./bin;
		// it must never become a dependency of the binary).
		module + "/backend/storetest",
		"github.com/versity/versitygw",
	}
	var importers []string
	for pkg, imports := range graph {
		for _, bad := range forbidden {
			if pkg == bad || strings.HasPrefix(pkg, bad+"/") {
				t.Errorf("the wharf binary links %s", pkg)
			}
		}
		if slices.Contains(imports, module+"/backend/faults") {
			importers = append(importers, pkg)
		}
	}
	if want := []string{module + "/cmd/wharf/internal/bench"}; !slices.Equal(importers, want) {
		t.Errorf("backend/faults is imported by %v, want only by %v", importers, want)
	}

	serving := goListDeps(t, module+"/s3api", module+"/auth", module+"/archiveview/...", module+"/backend")
	for pkg := range serving {
		if pkg == module+"/backend/faults" || strings.HasPrefix(pkg, "github.com/johannesboyne/gofakes3") {
			t.Errorf("the serving packages link %s", pkg)
		}
	}
}
