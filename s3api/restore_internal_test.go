package s3api

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"net/http"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/backend"
)

func TestParseRestoreRequest(t *testing.T) {
	const ns = `xmlns="http://s3.amazonaws.com/doc/2006-03-01/"`
	tests := []struct {
		body string
		want backend.RestoreRequest
		code errorCode // "" = valid
	}{
		{"", backend.RestoreRequest{}, ""},
		{"  \n", backend.RestoreRequest{}, ""},
		{`<RestoreRequest ` + ns + `/>`, backend.RestoreRequest{}, ""},
		{`<RestoreRequest><Days>7</Days></RestoreRequest>`, backend.RestoreRequest{Days: 7}, ""},
		{`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<RestoreRequest ` + ns + `><Days>1</Days><GlacierJobParameters><Tier>Bulk</Tier></GlacierJobParameters></RestoreRequest>`,
			backend.RestoreRequest{Days: 1, Tier: "Bulk"}, ""},
		{"<RestoreRequest>\n  <GlacierJobParameters>\n    <Tier>Expedited</Tier>\n  </GlacierJobParameters>\n  <Days>36500</Days>\n</RestoreRequest>\n",
			backend.RestoreRequest{Days: 36500, Tier: "Expedited"}, ""},
		{`<RestoreRequest><Description>why</Description><Days>2</Days><!-- c --></RestoreRequest>`, backend.RestoreRequest{Days: 2}, ""},
		{`<RestoreRequest><Days>007</Days></RestoreRequest>`, backend.RestoreRequest{Days: 7}, ""},
		// InvalidArgument.
		{`<RestoreRequest><Days>0</Days></RestoreRequest>`, backend.RestoreRequest{}, errInvalidArgument},
		{`<RestoreRequest><Days>36501</Days></RestoreRequest>`, backend.RestoreRequest{}, errInvalidArgument},
		{`<RestoreRequest><GlacierJobParameters><Tier>standard</Tier></GlacierJobParameters></RestoreRequest>`, backend.RestoreRequest{}, errInvalidArgument},
		{`<RestoreRequest><GlacierJobParameters><Tier></Tier></GlacierJobParameters></RestoreRequest>`, backend.RestoreRequest{}, errInvalidArgument},
		// NotImplemented: S3 Select and output-location restores.
		{`<RestoreRequest><Type>SELECT</Type></RestoreRequest>`, backend.RestoreRequest{}, errNotImplemented},
		{`<RestoreRequest><Tier>Standard</Tier></RestoreRequest>`, backend.RestoreRequest{}, errNotImplemented},
		{`<RestoreRequest><OutputLocation/></RestoreRequest>`, backend.RestoreRequest{}, errNotImplemented},
		// MalformedXML.
		{`<RestoreRequest><Days>-1</Days></RestoreRequest>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest><Days>+1</Days></RestoreRequest>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest><Days> 1</Days></RestoreRequest>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest><Days></Days></RestoreRequest>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest><Days>9999999999</Days></RestoreRequest>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest><Days>1</Days><Days>2</Days></RestoreRequest>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest><Days><x/>1</Days></RestoreRequest>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest><GlacierJobParameters/></RestoreRequest>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest><GlacierJobParameters><Tier>Bulk</Tier><Tier>Bulk</Tier></GlacierJobParameters></RestoreRequest>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest><GlacierJobParameters><Days>1</Days></GlacierJobParameters></RestoreRequest>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest><Bogus/></RestoreRequest>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest>text</RestoreRequest>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest a="b"/>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest xmlns="urn:other"/>`, backend.RestoreRequest{}, errMalformedXML},
		{`<Restore/>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest><Days>1</Days>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest/><RestoreRequest/>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest/>junk`, backend.RestoreRequest{}, errMalformedXML},
		{`<!DOCTYPE x><RestoreRequest/>`, backend.RestoreRequest{}, errMalformedXML},
		{`<RestoreRequest><Description><b>x</b></Description></RestoreRequest>`, backend.RestoreRequest{}, errMalformedXML},
		{`not xml`, backend.RestoreRequest{}, errMalformedXML},
	}
	for _, tc := range tests {
		t.Run(tc.body, func(t *testing.T) {
			got, e := parseRestoreRequest([]byte(tc.body))
			if tc.code != "" {
				if e == nil || e.Code != tc.code {
					t.Fatalf("got %+v, %+v; want %s", got, e, tc.code)
				}
				return
			}
			if e != nil || got != tc.want {
				t.Fatalf("got %+v, %+v; want %+v", got, e, tc.want)
			}
		})
	}
}

// FuzzRestoreRequest: the parser never panics, an accepted request has
// Days in range and a valid tier (or none), and writing it back out as
// clients do parses to the same request.
func FuzzRestoreRequest(f *testing.F) {
	for _, s := range []string{
		`<RestoreRequest xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Days>1</Days><GlacierJobParameters><Tier>Bulk</Tier></GlacierJobParameters></RestoreRequest>`,
		`<RestoreRequest><Description>a</Description></RestoreRequest>`,
		`<RestoreRequest><Days>0</Days></RestoreRequest>`,
		`<RestoreRequest><Type>SELECT</Type></RestoreRequest>`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rr, e := parseRestoreRequest(body)
		if e != nil {
			if e.Code != errMalformedXML && e.Code != errInvalidArgument && e.Code != errNotImplemented {
				t.Fatalf("unexpected code %s", e.Code)
			}
			return
		}
		if rr.Days < 0 || rr.Days > backend.MaxRestoreDays || (rr.Tier != "" && !backend.ValidRetrievalTier(rr.Tier)) {
			t.Fatalf("accepted %+v", rr)
		}
		out := "<RestoreRequest>"
		if rr.Days > 0 {
			out += fmt.Sprintf("<Days>%d</Days>", rr.Days)
		}
		if rr.Tier != "" {
			out += "<GlacierJobParameters><Tier>" + rr.Tier + "</Tier></GlacierJobParameters>"
		}
		out += "</RestoreRequest>"
		back, e := parseRestoreRequest([]byte(out))
		if e != nil || back != rr {
			t.Fatalf("%q -> %+v -> %q -> %+v, %+v", body, rr, out, back, e)
		}
	})
}

func TestCRC64NVME(t *testing.T) {
	// The CRC-64/NVME check value (the CRC of "123456789").
	if got := crc64.Checksum([]byte("123456789"), crc64NVME); got != 0xae8b14860a799888 {
		t.Fatalf("CRC-64/NVME check value %#x", got)
	}
}

func TestCheckPayload(t *testing.T) {
	body := []byte("<RestoreRequest><Days>1</Days></RestoreRequest>")
	sha := sha256.Sum256(body)
	md := md5.Sum(body)
	b64 := base64.StdEncoding.EncodeToString
	crc := binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(body))
	crcC := binary.BigEndian.AppendUint32(nil, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	crc64v := binary.BigEndian.AppendUint64(nil, crc64.Checksum(body, crc64NVME))
	tests := []struct {
		name string
		hdr  map[string][]string
		code errorCode
	}{
		{"nothing", nil, ""},
		{"unsigned payload", map[string][]string{"X-Amz-Content-Sha256": {"UNSIGNED-PAYLOAD"}}, ""},
		{"sha256 header", map[string][]string{"X-Amz-Content-Sha256": {hex.EncodeToString(sha[:])}}, ""},
		{"sha256 header mismatch", map[string][]string{"X-Amz-Content-Sha256": {strings.Repeat("0", 64)}}, errXAmzContentSHA256Mismatch},
		{"md5", map[string][]string{"Content-Md5": {b64(md[:])}}, ""},
		{"md5 mismatch", map[string][]string{"Content-Md5": {b64(make([]byte, 16))}}, errBadDigest},
		{"md5 not base64", map[string][]string{"Content-Md5": {"!!"}}, errInvalidDigest},
		{"md5 short", map[string][]string{"Content-Md5": {b64(md[:8])}}, errInvalidDigest},
		{"md5 twice", map[string][]string{"Content-Md5": {b64(md[:]), b64(md[:])}}, errInvalidDigest},
		{"crc32", map[string][]string{"X-Amz-Checksum-Crc32": {b64(crc)}, "X-Amz-Sdk-Checksum-Algorithm": {"CRC32"}}, ""},
		{"crc32 mismatch", map[string][]string{"X-Amz-Checksum-Crc32": {b64([]byte{0, 0, 0, 0})}}, errBadDigest},
		{"crc32c", map[string][]string{"X-Amz-Checksum-Crc32c": {b64(crcC)}}, ""},
		{"crc64nvme", map[string][]string{"X-Amz-Checksum-Crc64nvme": {b64(crc64v)}}, ""},
		{"crc64nvme mismatch", map[string][]string{"X-Amz-Checksum-Crc64nvme": {b64(make([]byte, 8))}}, errBadDigest},
		{"sha256 checksum", map[string][]string{"X-Amz-Checksum-Sha256": {b64(sha[:])}}, ""},
		{"sha1 mismatch", map[string][]string{"X-Amz-Checksum-Sha1": {b64(sha[:20])}}, errBadDigest},
		{"unknown algorithm", map[string][]string{"X-Amz-Checksum-Xxh3": {"AAAA"}}, errInvalidRequest},
		{"checksum type header only", map[string][]string{"X-Amz-Checksum-Type": {"FULL_OBJECT"}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := checkPayload(http.Header(tc.hdr), body)
			if tc.code == "" {
				if e != nil {
					t.Fatalf("%+v", e)
				}
				return
			}
			if e == nil || e.Code != tc.code {
				t.Fatalf("got %+v, want %s", e, tc.code)
			}
		})
	}
}

func TestParseOptionalAttributes(t *testing.T) {
	tests := []struct {
		vals []string
		want bool
		bad  bool
	}{
		{nil, false, false},
		{[]string{"RestoreStatus"}, true, false},
		{[]string{" RestoreStatus , "}, true, false},
		{[]string{"", "RestoreStatus"}, true, false},
		{[]string{"restorestatus"}, false, true},
		{[]string{"RestoreStatus,Owner"}, false, true},
	}
	for _, tc := range tests {
		h := http.Header{}
		for _, v := range tc.vals {
			h.Add("X-Amz-Optional-Object-Attributes", v)
		}
		got, e := parseOptionalAttributes(h)
		if (e != nil) != tc.bad || got != tc.want {
			t.Errorf("%q: %v, %+v", tc.vals, got, e)
		}
	}
}
