package backend

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Bounds of a store server's own text in an error (classifyS3ErrIn): AWS
// codes are short names and its messages a sentence; anything longer is a
// broken or hostile server's, which would otherwise reach every log line
// and page that shows the error.
const (
	maxServerCode    = 128
	maxServerMessage = 1024
)

// PrintableText is s with every unprintable rune escaped ("\n", "\x1b",
// "\u202e", an invalid byte as "\xff"), cut past max bytes (max > 0) at a
// rune or escape boundary with "..." and the length it had. It is the one
// rule for text from outside (a store server's error message, a client's
// or an uploader's key, a form's field) that reaches a log line, as its
// message or a field, or a page: zerolog's console format writes
// messages as is, so a newline forged a line and an escape sequence
// acted on the operator's terminal; its JSON format (and the console's
// quoting of fields) escapes ASCII controls but writes a C1 control
// (U+009B is a terminal's CSI) or a bidi override as is, and a JSON
// reader gets ESC back; a long text made lines that pipelines split.
func PrintableText(s string, max int) string {
	clean := max <= 0 || len(s) <= max
	if clean {
		for _, r := range s {
			if r == utf8.RuneError || !unicode.IsPrint(r) {
				clean = false
				break
			}
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	limit := max - len("...")
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && n <= 1:
			piece = fmt.Sprintf("\\x%02x", s[i])
		case r == '\n':
			piece = "\\n"
		case unicode.IsPrint(r):
			piece = s[i : i+n]
		case r < 0x80:
			piece = fmt.Sprintf("\\x%02x", r)
		default:
			piece = fmt.Sprintf("\\u%04x", r)
		}
		if max > 0 && b.Len()+len(piece) > limit && (i+n < len(s) || b.Len()+len(piece) > max) {
			fmt.Fprintf(&b, "... (%d bytes)", len(s))
			return b.String()
		}
		b.WriteString(piece)
		i += n
	}
	return b.String()
}

// maxErrorBody bounds the body of an S3 error response (status 300 and
// up) that the SDK reads: it copies the whole body into memory before
// parsing it, and AWS's are well under 4 KiB.
const maxErrorBody = 64 << 10

// errorBodyLimit is a deserialize middleware placed next to the
// transport: it bounds the body of an error response to maxErrorBody
// before the operation's deserializer copies it (a broken or hostile
// server's endless error body is then a bad response, not memory held
// outside any budget). Data responses (2xx) are untouched.
func errorBodyLimit() middleware.DeserializeMiddleware {
	return middleware.DeserializeMiddlewareFunc("wharfErrorBodyLimit", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleDeserialize(ctx, in)
		if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp != nil && resp.StatusCode >= 300 && resp.Body != nil {
			resp.Body = &boundedBody{ReadCloser: resp.Body, left: maxErrorBody}
		}
		return out, md, err
	})
}

// boundedBody ends (io.EOF) after left bytes: the error document is then
// cut, fails to parse, and the error is judged by its status alone. (An
// error there would make the SDK warn on stderr, outside wharf's log,
// when it drains the body; the rest is never read, Close drops the
// connection.)
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
