package s3api

import (
	"encoding/xml"
	"net/http"
	"strings"
	"time"
)

// isoMillis is the XML timestamp format S3 uses (gofakes3 ContentTime).
const isoMillis = "2006-01-02T15:04:05.000Z"

func xmlTime(t time.Time) string { return t.UTC().Truncate(time.Second).Format(isoMillis) }

type owner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

type listAllMyBucketsResult struct {
	XMLName xml.Name       `xml:"ListAllMyBucketsResult"`
	Xmlns   string         `xml:"xmlns,attr"`
	Owner   *owner         `xml:"Owner"`
	Buckets []bucketRecord `xml:"Buckets>Bucket"`
}

type bucketRecord struct {
	Name         string `xml:"Name"`
	CreationDate string `xml:"CreationDate"`
	BucketRegion string `xml:"BucketRegion,omitempty"`
}

// listBuckets answers GET /: one Bucket per served bucket the caller may
// read, in byte order of name, those whose archive is still opening included.
func (s *server) listBuckets(req *request) {
	res := listAllMyBucketsResult{Xmlns: xmlNS, Owner: s.owner, Buckets: []bucketRecord{}}
	s.cfg.Catalog.EachBucket(func(name string, created time.Time) {
		if name == "" || !req.identity.CanRead(name) {
			return
		}
		res.Buckets = append(res.Buckets, bucketRecord{
			Name:         name,
			CreationDate: xmlTime(created),
			BucketRegion: s.cfg.Region,
		})
	})
	s.writeXML(req, http.StatusOK, &res)
}

// headBucket answers HEAD /bucket: 200 with the region (404 without body is
// handled by the router).
func (s *server) headBucket(req *request) {
	h := req.w.Header()
	h.Set("X-Amz-Bucket-Region", s.cfg.Region)
	h.Set("X-Amz-Access-Point-Alias", "false")
	h.Set("Content-Type", "application/xml")
	req.w.WriteHeader(http.StatusOK)
}

type locationConstraint struct {
	XMLName xml.Name `xml:"LocationConstraint"`
	Xmlns   string   `xml:"xmlns,attr"`
	Region  string   `xml:",chardata"`
}

// getBucketLocation answers ?location: empty for us-east-1, else the region.
func (s *server) getBucketLocation(req *request) {
	region := s.cfg.Region
	if region == "us-east-1" {
		region = ""
	}
	s.writeXML(req, http.StatusOK, &locationConstraint{Xmlns: xmlNS, Region: region})
}

type accessControlPolicy struct {
	XMLName xml.Name `xml:"AccessControlPolicy"`
	Xmlns   string   `xml:"xmlns,attr"`
	Owner   *owner   `xml:"Owner"`
	Grants  []grant  `xml:"AccessControlList>Grant"`
}

type grant struct {
	Grantee    grantee `xml:"Grantee"`
	Permission string  `xml:"Permission"`
}

type grantee struct {
	XmlnsXSI    string `xml:"xmlns:xsi,attr"`
	Type        string `xml:"xsi:type,attr"`
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

// getACL answers ?acl with the canned "private" ACL: the owner has
// FULL_CONTROL, nobody else has anything.
func (s *server) getACL(req *request) {
	o := s.owner
	s.writeXML(req, http.StatusOK, &accessControlPolicy{
		Xmlns: xmlNS,
		Owner: o,
		Grants: []grant{{
			Grantee: grantee{
				XmlnsXSI:    "http://www.w3.org/2001/XMLSchema-instance",
				Type:        "CanonicalUser",
				ID:          o.ID,
				DisplayName: o.DisplayName,
			},
			Permission: "FULL_CONTROL",
		}},
	})
}

type versioningConfiguration struct {
	XMLName xml.Name `xml:"VersioningConfiguration"`
	Xmlns   string   `xml:"xmlns,attr"`
	Status  string   `xml:"Status"`
}

// getBucketVersioning answers ?versioning: Enabled for every archive. Each
// upload of a chain is a version (VersionId = upload id); a single upload
// is a chain of one, so every key has exactly one version.
func (s *server) getBucketVersioning(req *request) {
	s.writeXML(req, http.StatusOK, &versioningConfiguration{Xmlns: xmlNS, Status: "Enabled"})
}

type policyStatus struct {
	XMLName  xml.Name `xml:"PolicyStatus"`
	Xmlns    string   `xml:"xmlns,attr"`
	IsPublic bool     `xml:"IsPublic"`
}

// getBucketPolicyStatus answers ?policyStatus. wharf has no bucket
// policies; a bucket is public exactly when the server serves unsigned
// requests (--anonymous), which makes every bucket readable by anyone.
func (s *server) getBucketPolicyStatus(req *request) {
	public := s.cfg.Verifier != nil && s.cfg.Verifier.AllowsAnonymous()
	s.writeXML(req, http.StatusOK, &policyStatus{Xmlns: xmlNS, IsPublic: public})
}

type tagging struct {
	XMLName xml.Name `xml:"Tagging"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	TagSet  struct{} `xml:"TagSet"`
}

// preflight answers OPTIONS, which S3 treats as a CORS preflight: without
// an Origin header 400 BadRequest; with one, Config.CORS decides, and with
// no CORS configuration (Config.CORS nil, or the policy reports the bucket
// has none) it is 403 AccessForbidden. Preflights are not authenticated
// (browsers send them without credentials) and reveal nothing about the
// bucket's existence.
func (s *server) preflight(req *request) {
	r := req.r
	origin := r.Header.Get("Origin")
	if origin == "" {
		s.writeError(req, &apiError{Code: errBadRequest, Bucket: req.bucket, Key: req.key,
			Message: "Insufficient information. Origin request header needed."})
		return
	}
	var allow http.Header
	enabled := false
	if s.cfg.CORS != nil {
		var headers []string
		for _, v := range r.Header.Values("Access-Control-Request-Headers") {
			for _, h := range strings.Split(v, ",") {
				if h = strings.TrimSpace(h); h != "" {
					headers = append(headers, h)
				}
			}
		}
		allow, enabled = s.cfg.CORS.Preflight(req.bucket, origin, r.Header.Get("Access-Control-Request-Method"), headers)
	}
	switch {
	case !enabled:
		s.writeError(req, &apiError{Code: errAccessForbidden, Bucket: req.bucket, Key: req.key})
	case allow == nil:
		s.writeError(req, &apiError{Code: errAccessForbidden, Bucket: req.bucket, Key: req.key,
			Message: "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec."})
	default:
		h := req.w.Header()
		for k, vs := range allow {
			h[k] = vs
		}
		h.Set("Content-Length", "0")
		req.w.WriteHeader(http.StatusOK)
	}
}
