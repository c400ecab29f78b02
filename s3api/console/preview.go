package console

// Previews (from the first 64 KiB, through Archive.Open), client
// snippets and share links.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif" // image.DecodeConfig for GIF
	_ "image/jpeg"
	_ "image/png"
	"io"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/auth"
)

// preview is what the file page shows of a file's bytes. Exactly one of
// the kinds is set.
type preview struct {
	Kind      string // text, csv, json, image, zarr, hex, empty, error
	Text      string
	Rows      [][]string
	Width     int
	Height    int
	ImageType string
	ImageURL  string
	Zarr      [][2]string
	Truncated bool // the preview shows only the first 64 KiB
	Err       string
}

// textExt are extensions shown as text, whatever they hold (HTML and
// SVG among them: shown as their source, never rendered).
var textExt = map[string]bool{
	".txt": true, ".md": true, ".markdown": true, ".rst": true, ".log": true, ".html": true, ".htm": true,
	".svg": true, ".xml": true, ".yaml": true, ".yml": true, ".toml": true, ".ini": true, ".cfg": true,
	".py": true, ".go": true, ".c": true, ".h": true, ".sh": true, ".js": true, ".css": true, ".tex": true,
	".r": true, ".sql": true, ".conf": true, ".geojson": true, ".ndjson": true, ".jsonl": true,
}

// preview reads the start of f and renders it; a failure is noted on w's
// access line.
func (c *Console) preview(ctx context.Context, w http.ResponseWriter, a *archiveview.Archive, f archiveview.File, rawURL string) *preview {
	if f.Size == 0 {
		return &preview{Kind: "empty"}
	}
	n := min(f.Size, previewBytes)
	rc, err := a.Open(ctx, f, 0, n)
	if err != nil {
		return &preview{Kind: "error", Err: c.hidden(w, a.Name(), f.Key, err, f.Key+" in "+a.Name()+" could not be read.")}
	}
	defer rc.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(rc, b); err != nil {
		return &preview{Kind: "error", Err: c.hidden(w, a.Name(), f.Key, err, f.Key+" in "+a.Name()+" could not be read.")}
	}
	return render(f.Key, b, f.Size > n, rawURL)
}

// render chooses a file's preview from its name and first bytes.
func render(key string, b []byte, truncated bool, rawURL string) *preview {
	base := path.Base(key)
	ext := strings.ToLower(path.Ext(base))
	if typ := imageType(b); typ != "" {
		p := &preview{Kind: "image", ImageType: typ, ImageURL: rawURL}
		p.Width, p.Height = imageSize(typ, b)
		return p
	}
	if base == ".zarray" || base == ".zattrs" || base == ".zgroup" || base == "zarr.json" {
		if z := zarrSummary(b); z != nil {
			return &preview{Kind: "zarr", Zarr: z, Text: string(b), Truncated: truncated}
		}
	}
	if truncated {
		b = trimUTF8(b)
	}
	isText := utf8.Valid(b) && !bytes.ContainsRune(b, 0)
	switch {
	case (ext == ".csv" || ext == ".tsv") && isText:
		if rows := csvRows(b, ext == ".tsv", truncated); rows != nil {
			return &preview{Kind: "csv", Rows: rows, Truncated: truncated}
		}
	case ext == ".json" && isText:
		var out bytes.Buffer
		if !truncated && json.Indent(&out, b, "", "  ") == nil {
			return &preview{Kind: "json", Text: out.String()}
		}
		return &preview{Kind: "json", Text: string(b), Truncated: truncated}
	}
	if isText || textExt[ext] && utf8.Valid(b) {
		return &preview{Kind: "text", Text: string(b), Truncated: truncated}
	}
	return &preview{Kind: "hex", Text: hexView(b[:min(len(b), 1024)]), Truncated: true}
}

// trimUTF8 drops a rune cut off at the end of b.
func trimUTF8(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		r, size := utf8.DecodeLastRune(b)
		if r != utf8.RuneError || size != 1 {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// maxCSVRows bounds the table a CSV preview shows.
const maxCSVRows = 500

// csvRows parses a CSV (or TSV) preview; a cut-off last line is dropped.
func csvRows(b []byte, tsv, truncated bool) [][]string {
	if truncated {
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i+1]
		}
	}
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	if tsv {
		r.Comma = '\t'
	}
	var rows [][]string
	for len(rows) < maxCSVRows {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil
		}
		rows = append(rows, rec)
	}
	return rows
}

// hexView is a classic hex dump: offset, 16 bytes, their printable ASCII.
func hexView(b []byte) string {
	var sb strings.Builder
	for off := 0; off < len(b); off += 16 {
		line := b[off:min(off+16, len(b))]
		fmt.Fprintf(&sb, "%08x  ", off)
		for i := 0; i < 16; i++ {
			if i < len(line) {
				fmt.Fprintf(&sb, "%02x ", line[i])
			} else {
				sb.WriteString("   ")
			}
			if i == 7 {
				sb.WriteByte(' ')
			}
		}
		sb.WriteString(" |")
		for _, c := range line {
			if c >= 0x20 && c < 0x7f {
				sb.WriteByte(c)
			} else {
				sb.WriteByte('.')
			}
		}
		sb.WriteString("|\n")
	}
	return sb.String()
}

// imageType recognises PNG, JPEG, GIF and WebP by their first bytes.
func imageType(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte{0xff, 0xd8, 0xff}):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")) || bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 16 && string(b[0:4]) == "RIFF" && string(b[8:12]) == "WEBP" && string(b[12:15]) == "VP8":
		return "image/webp"
	}
	return ""
}

// imageSize is the image's pixel size from its header (0, 0 unknown).
func imageSize(typ string, b []byte) (int, int) {
	if typ == "image/webp" {
		return webpSize(b)
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return 0, 0
	}
	return cfg.Width, cfg.Height
}

// webpSize reads a WebP's canvas size from its first chunk (VP8, VP8L
// or VP8X), per the WebP container specification.
func webpSize(b []byte) (int, int) {
	if len(b) < 30 {
		return 0, 0
	}
	switch string(b[12:16]) {
	case "VP8 ":
		// Frame tag (3 bytes), start code 9d 01 2a, then 14-bit sizes.
		if b[23] != 0x9d || b[24] != 0x01 || b[25] != 0x2a {
			return 0, 0
		}
		return int(binary.LittleEndian.Uint16(b[26:28]) & 0x3fff), int(binary.LittleEndian.Uint16(b[28:30]) & 0x3fff)
	case "VP8L":
		if b[20] != 0x2f {
			return 0, 0
		}
		v := binary.LittleEndian.Uint32(b[21:25])
		return int(v&0x3fff) + 1, int(v>>14&0x3fff) + 1
	case "VP8X":
		w := int(b[24]) | int(b[25])<<8 | int(b[26])<<16
		h := int(b[27]) | int(b[28])<<8 | int(b[29])<<16
		return w + 1, h + 1
	}
	return 0, 0
}

// zarrSummary lists the fields of a Zarr v2 (.zarray, .zattrs, .zgroup)
// or v3 (zarr.json) metadata document that say what the array is; nil
// when it is not a JSON object.
func zarrSummary(b []byte) [][2]string {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	var out [][2]string
	for _, k := range []string{"zarr_format", "node_type", "shape", "chunks", "dtype", "data_type", "order",
		"fill_value", "compressor", "filters", "codecs", "chunk_grid", "dimension_names"} {
		if v, ok := m[k]; ok {
			out = append(out, [2]string{k, compact(v)})
			delete(m, k)
		}
	}
	if at, ok := m["attributes"]; ok {
		out = append(out, [2]string{"attributes", compact(at)})
		delete(m, "attributes")
	}
	rest := make([]string, 0, len(m))
	for k := range m {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	for _, k := range rest {
		out = append(out, [2]string{k, compact(m[k])})
	}
	return out
}

func compact(v json.RawMessage) string {
	var out bytes.Buffer
	if json.Compact(&out, v) != nil {
		return string(v)
	}
	s := out.String()
	if len(s) > 300 {
		cut := 300
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut-- // never split a rune
		}
		s = s[:cut] + "…"
	}
	return s
}

// snippet is one client's copy-paste command.
type snippet struct{ Client, Code string }

// snippets are the aws CLI, boto3 and rclone commands that fetch the
// file from this endpoint.
func snippets(endpoint, bucket, key, version string, anonymous bool) []snippet {
	name := path.Base(key)
	uri := "s3://" + bucket + "/" + key
	awsArgs := ""
	if anonymous {
		awsArgs = " --no-sign-request"
	}
	var awsCmd string
	if version == "" {
		awsCmd = "aws s3 cp --endpoint-url " + shellQuote(endpoint) + awsArgs + " " + shellQuote(uri) + " " + shellQuote("./"+name)
	} else {
		awsCmd = "aws s3api get-object --endpoint-url " + shellQuote(endpoint) + awsArgs + " --bucket " + shellQuote(bucket) +
			" --key " + shellQuote(key) + " --version-id " + shellQuote(version) + " " + shellQuote("./"+name)
	}
	py := "import boto3\n"
	if anonymous {
		py += "from botocore import UNSIGNED\nfrom botocore.config import Config\n\n" +
			"s3 = boto3.client(\"s3\", endpoint_url=" + pyQuote(endpoint) + ", region_name=\"us-east-1\", config=Config(signature_version=UNSIGNED))\n"
	} else {
		py += "\n# credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY\n" +
			"s3 = boto3.client(\"s3\", endpoint_url=" + pyQuote(endpoint) + ", region_name=\"us-east-1\")\n"
	}
	if version == "" {
		py += "s3.download_file(" + pyQuote(bucket) + ", " + pyQuote(key) + ", " + pyQuote(name) + ")\n"
	} else {
		py += "s3.download_file(" + pyQuote(bucket) + ", " + pyQuote(key) + ", " + pyQuote(name) +
			", ExtraArgs={\"VersionId\": " + pyQuote(version) + "})\n"
	}
	rc := "rclone copyto --s3-provider Other --s3-endpoint " + shellQuote(endpoint)
	if anonymous {
		rc += " --s3-access-key-id '' --s3-secret-access-key ''"
	} else {
		rc += " --s3-env-auth"
	}
	if version != "" {
		rc += " --s3-version-at " + shellQuote(version)
	}
	rc += " " + shellQuote(":s3:"+bucket+"/"+key) + " " + shellQuote("./"+name)
	out := []snippet{{"aws CLI", awsCmd}, {"boto3", py}}
	if version == "" {
		out = append(out, snippet{"rclone", rc})
	}
	return out
}

// shellQuote single-quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// pyQuote is s as a Python string literal (a JSON string is one).
func pyQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// shareChoices are the share-link expiries offered (at most S3's 7 days).
var shareChoices = []struct {
	Label   string
	Seconds int
}{{"1 hour", 3600}, {"1 day", 86400}, {"7 days", maxShareSeconds}}

// presign returns a SigV4 presigned GET URL of the file, signed with the
// session's key, valid for secs seconds.
func (c *Console) presign(ctx context.Context, r *http.Request, se *session, bucket, key, version string, secs int) (string, error) {
	u := scheme(r) + "://" + r.Host + "/" + bucket + "/" + auth.URIEncode(key, true) + "?X-Amz-Expires=" + strconv.Itoa(secs)
	if version != "" {
		u += "&versionId=" + auth.URIEncode(version, false)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	signed, _, err := v4.NewSigner().PresignHTTP(ctx, aws.Credentials{AccessKeyID: se.accessKey, SecretAccessKey: se.secretKey},
		req, "UNSIGNED-PAYLOAD", "s3", c.cfg.Region, c.cfg.Now().UTC().Truncate(time.Second))
	return signed, err
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
