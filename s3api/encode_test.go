package s3api

import (
	"net/url"
	"testing"
)

// Checklist 11: the AWS url encoding (s3-tests test_bucket_listv2_encoding_basic).
func TestURLEncode(t *testing.T) {
	for in, want := range map[string]string{
		"quux ab/": "quux%20ab/",
		"foo+1/":   "foo%2B1/",
		"a%41":     "a%2541",
		"ü":        "%C3%BC",
		"x\ty":     "x%09y",
		"a-b_c.d~": "a-b_c.d~",
		"a//b":     "a//b",
		"&<>\"'":   "%26%3C%3E%22%27",
		"":         "",
	} {
		if got := urlEncode(in); got != want {
			t.Errorf("urlEncode(%q) = %q, want %q", in, got, want)
		}
		// Python's unquote_plus (botocore) and Go's QueryUnescape agree here.
		back, err := url.QueryUnescape(urlEncode(in))
		if err != nil || back != in {
			t.Errorf("QueryUnescape(urlEncode(%q)) = %q, %v", in, back, err)
		}
	}
}
