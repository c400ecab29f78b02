package console_test

import (
	"strings"
	"testing"
)

// TestDeepPrefixPageBounded: the breadcrumbs of a folder page come from
// the ?prefix= a visitor sends, each a link to its folder; one link per
// level made the page quadratic in the prefix (a 64 KiB request line of
// slashes asked for gigabytes). The crumbs show the bucket and the
// deepest levels only, so the page stays small, and the crumbs still
// lead up the tree.
func TestDeepPrefixPageBounded(t *testing.T) {
	s := newServer(t, opts{anonymous: true})
	c := s.client(t)
	prefix := strings.Repeat("/", 4000)
	resp, body := s.get(t, c, "/-/console/b/main?prefix="+prefix)
	want(t, resp, body, 200, "Nothing here.")
	if len(body) > 512<<10 {
		t.Fatalf("a folder page for a prefix of %d slashes is %d bytes", len(prefix), len(body))
	}
	// A deep real folder: its own crumb and its parent's are links.
	resp, body = s.get(t, c, "/-/console/b/main?prefix="+strings.Repeat("d/", 100))
	want(t, resp, body, 200, `href="/-/console/b/main"`,
		`href="/-/console/b/main?prefix=`+strings.Repeat("d%2F", 99)+`"`,
		`href="/-/console/b/main?prefix=`+strings.Repeat("d%2F", 100)+`"`)
}
