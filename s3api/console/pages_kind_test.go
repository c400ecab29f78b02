package console

import "testing"

// TestAliasKind: the buckets page names what an alias serves.
func TestAliasKind(t *testing.T) {
	for target, want := range map[string]string{
		"s3://lake/base@latest":                       "alias",
		"s3://lake/datasets/ocean@current":            "dataset",
		"s3://lake/datasets/ocean@20261201T000000Z-1": "pinned version",
		"s3://lake/base":                              "alias",
	} {
		if got := aliasKind(target); got != want {
			t.Errorf("aliasKind(%q) = %q, want %q", target, got, want)
		}
	}
}
