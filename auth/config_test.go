package auth

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestNewValidatesConfig(t *testing.T) {
	cases := []struct {
		name    string
		keys    []Key
		wantErr string // substring; "" = valid
	}{
		{"no keys", nil, ""},
		{"secrets with +, space, %, unicode", []Key{{AccessKey: "AK1", SecretKey: "a+b c%20ü/="}}, ""},
		{"empty access key", []Key{{AccessKey: "", SecretKey: "s"}}, "empty access key"},
		{"empty secret", []Key{{AccessKey: "AK1", SecretKey: ""}}, "empty secret key"},
		{"duplicate access key", []Key{{AccessKey: "AK1", SecretKey: "a"}, {AccessKey: "AK1", SecretKey: "b"}}, "configured twice"},
		{"access key with space", []Key{{AccessKey: "AK 1", SecretKey: "s"}}, "contains"},
		{"access key with slash", []Key{{AccessKey: "AK/1", SecretKey: "s"}}, "contains"},
		{"access key with colon", []Key{{AccessKey: "AK:1", SecretKey: "s"}}, "contains"},
		{"empty bucket grant", []Key{{AccessKey: "AK1", SecretKey: "s", Buckets: []string{""}}}, "empty bucket"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(Config{Keys: c.keys})
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("want error containing %q, got %v", c.wantErr, err)
			}
		})
	}
}

func TestGrantsAndAnonymous(t *testing.T) {
	for _, anonymous := range []bool{false, true} {
		v, err := New(testConfig(anonymous, nil))
		if err != nil {
			t.Fatal(err)
		}
		srv := authServer(t, v)
		name := map[bool]string{false: "keys only", true: "anonymous on"}[anonymous]

		t.Run(name+"/unsigned", func(t *testing.T) {
			o := send(t, newReq(t, srv, "GET", "/b/k", ""))
			if anonymous {
				if o.Code != "" || !o.Anonymous || o.AccessKey != "" {
					t.Fatalf("want anonymous identity, got %v", o)
				}
				return
			}
			wantErr(t, o, "AccessDenied", 403)
		})
		t.Run(name+"/bad signature is refused, not downgraded", func(t *testing.T) {
			req := newReq(t, srv, "GET", "/b/k", "")
			awsSign(t, req, testAK, "not-the-secret", "us-east-1", emptyHash, time.Now())
			wantErr(t, send(t, req), "SignatureDoesNotMatch", 403)
		})
		t.Run(name+"/unknown key is refused, not downgraded", func(t *testing.T) {
			req := newReq(t, srv, "GET", "/b/k", "")
			awsSign(t, req, "AKIANOPE", testSK, "us-east-1", emptyHash, time.Now())
			wantErr(t, send(t, req), "InvalidAccessKeyId", 403)
		})
		t.Run(name+"/good signature", func(t *testing.T) {
			req := newReq(t, srv, "GET", "/b/k", "")
			awsSign(t, req, grantAK, grantSK, "us-east-1", emptyHash, time.Now())
			wantOK(t, send(t, req), grantAK)
		})
	}

	// Grants, checked on identities from real verification.
	v, err := New(testConfig(true, nil))
	if err != nil {
		t.Fatal(err)
	}
	identify := func(ak, sk string) Identity {
		req, err := http.NewRequest("GET", "http://127.0.0.1:9000/granted/k", nil)
		if err != nil {
			t.Fatal(err)
		}
		if ak != "" {
			awsSign(t, req, ak, sk, "us-east-1", emptyHash, time.Now())
		}
		req.Host = req.URL.Host
		req.RequestURI = req.URL.RequestURI()
		id, err := v.Authenticate(req)
		if err != nil {
			t.Fatalf("%s: %v", ak, err)
		}
		return id
	}
	grants := []struct {
		who    string
		id     Identity
		bucket string
		want   bool
	}{
		{"all-bucket key", identify(testAK, testSK), "granted", true},
		{"all-bucket key", identify(testAK, testSK), "other", true},
		{"granted key", identify(grantAK, grantSK), "granted", true},
		{"granted key", identify(grantAK, grantSK), "other", false},
		{"granted key", identify(grantAK, grantSK), "", false},
		{"anonymous", identify("", ""), "anything", true},
	}
	for _, g := range grants {
		if got := g.id.CanRead(g.bucket); got != g.want {
			t.Errorf("%s CanRead(%q) = %v, want %v", g.who, g.bucket, got, g.want)
		}
	}
}
