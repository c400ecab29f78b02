package s3api_test

import (
	"encoding/xml"
	"testing"
)

// The router parses the query once, with auth.ParseQuery, and every
// handler reads that parse: the pairs served are the pairs signed. So a ';'
// is data (url.ParseQuery would drop the whole pair, and the listing would
// silently ignore its prefix), and a bad escape is refused once, at the
// authentication step (after the write refusal, as before).
func TestQueryParsedOnce(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})

	resp, body := f.do(t, "GET", "/bkt?list-type=2&prefix=dir/;x", nil)
	mustStatus(t, resp, body, 200)
	var r listResult
	if err := xml.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if r.Prefix != "dir/;x" || len(r.Contents) != 0 || r.KeyCount == nil || *r.KeyCount != 0 {
		t.Fatalf("prefix with ';': Prefix %q, %d keys: %s", r.Prefix, len(r.Contents), body)
	}

	resp, body = f.do(t, "GET", "/bkt/hello.txt?x=%zz", nil)
	e := wantError(t, resp, body, 400, "InvalidArgument")
	if e.Message != `malformed query string: bad escape in value of "x"` {
		t.Errorf("bad escape message %q", e.Message)
	}
	resp, body = f.do(t, "GET", "/bkt?list-type=2&%zz=1", nil)
	wantError(t, resp, body, 400, "InvalidArgument")
	resp, body = f.do(t, "PUT", "/bkt/hello.txt?x=%zz", nil)
	wantError(t, resp, body, 403, "AccessDenied")
}
