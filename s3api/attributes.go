package s3api

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"net/http"
	"strings"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
)

// objectAttributes are the names x-amz-object-attributes may list.
var objectAttributes = map[string]bool{
	"ETag": true, "Checksum": true, "ObjectParts": true, "StorageClass": true, "ObjectSize": true,
}

// parseObjectAttributes reads the x-amz-object-attributes header (from the
// header lines or a presigned URL's query: amzHeader; one
// comma-separated list, possibly split over several header lines) into the
// set of names asked for. Missing or empty is 400 InvalidRequest; a name S3
// does not know (names are case-sensitive) is 400 InvalidArgument; blanks
// around names are ignored.
func parseObjectAttributes(h http.Header) (map[string]bool, *apiError) {
	want := map[string]bool{}
	for _, line := range h.Values("X-Amz-Object-Attributes") {
		for _, name := range strings.Split(line, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			if !objectAttributes[name] {
				return nil, &apiError{Code: errInvalidArgument, Message: "Invalid attribute name specified."}
			}
			want[name] = true
		}
	}
	if len(want) == 0 {
		return nil, &apiError{Code: errInvalidRequest,
			Message: "The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty"}
	}
	return want, nil
}

type getObjectAttributesResponse struct {
	XMLName      xml.Name            `xml:"GetObjectAttributesResponse"`
	Xmlns        string              `xml:"xmlns,attr"`
	ETag         string              `xml:"ETag,omitempty"`
	Checksum     *attributesChecksum `xml:"Checksum,omitempty"`
	StorageClass string              `xml:"StorageClass,omitempty"`
	ObjectSize   *int64              `xml:"ObjectSize,omitempty"`
}

type attributesChecksum struct {
	ChecksumSHA256 string `xml:"ChecksumSHA256"`
	ChecksumType   string `xml:"ChecksumType"`
}

// getObjectAttributes answers GET ?attributes (GetObjectAttributes) for the
// object, or with ?versionId the version, that GetObject would serve, with
// the same errors (NoSuchKey, NoSuchVersion, delete markers). The body has
// the attributes x-amz-object-attributes asks for:
//
//   - ETag: unquoted, as S3 writes it here;
//   - Checksum: ChecksumSHA256 (base64 of the file's sha256 from the
//     manifest) with ChecksumType FULL_OBJECT, only when the manifest has
//     the sha256; otherwise no Checksum element, as S3 for an object
//     stored without a checksum;
//   - ObjectParts: never present: every object is served as one part, and
//     S3 omits ObjectParts for an object not uploaded in parts;
//   - StorageClass: the file's class, the coldest of the objects holding
//     its bytes (STANDARD unless they are known to be in another);
//   - ObjectSize: the size in bytes.
//
// Last-Modified and, when the version is known, x-amz-version-id are sent
// as headers. HEAD gets the headers only.
func (s *server) getObjectAttributes(req *request, a *archiveview.Archive) {
	want, apiErr := parseObjectAttributes(amzHeader(req.r.Header, req.query, "x-amz-object-attributes"))
	if apiErr != nil {
		apiErr.Bucket, apiErr.Key = req.bucket, req.key
		s.writeError(req, apiErr)
		return
	}
	a, f, versionID, ok := s.objectVersion(req, a)
	if !ok {
		return
	}
	h := req.w.Header()
	if versionID != "" {
		h.Set("X-Amz-Version-Id", versionID)
	}
	h.Set("Last-Modified", f.ModTime.UTC().Truncate(time.Second).Format(http.TimeFormat))
	res := getObjectAttributesResponse{Xmlns: xmlNS}
	if want["ETag"] {
		res.ETag = f.ETag
	}
	if want["Checksum"] {
		if sum, err := hex.DecodeString(f.SHA256); err == nil && len(sum) == 32 {
			res.Checksum = &attributesChecksum{ChecksumSHA256: base64.StdEncoding.EncodeToString(sum), ChecksumType: "FULL_OBJECT"}
		}
	}
	if want["StorageClass"] {
		res.StorageClass = a.StorageClass(f)
	}
	if want["ObjectSize"] {
		size := f.Size
		res.ObjectSize = &size
	}
	s.writeXML(req, http.StatusOK, &res)
}
