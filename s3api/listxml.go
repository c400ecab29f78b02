package s3api

import (
	"bytes"
	"encoding/xml"
	"strconv"
	"time"
)

// listXML is the one writer of the listing responses: ListObjects (v1),
// ListObjectsV2 and ListObjectVersions. The pages are written by hand:
// encoding/xml's reflection was two thirds of a 1000-key page's cost. Text
// goes through xml.EscapeText, the escaping encoding/xml itself uses
// (FuzzXMLElem checks that both decode alike).
//
// A page is open (root element, Name, Prefix), the operation's own marker
// elements, common (MaxKeys, Delimiter, IsTruncated, EncodingType), the
// entries built from key, lastModified, etag, size, storageClass, owner and
// restoreStatus (restore.go), commonPrefixes, and close. Keys, prefixes, markers and the
// delimiter go through enc, which is encoding-type=url when asked for.
type listXML struct {
	xmlWriter
	root  string
	enc   func(string) string
	owner string // the <Owner> element to write in entries, "" = none

	lastMod    time.Time // the last LastModified formatted, and its text:
	lastModStr string    // consecutive entries often share one
}

// newListXML opens a page of root for bucket, sized for n entries. Entries
// carry s's Owner element when withOwner is set.
func (s *server) newListXML(root, bucket string, lq listQuery, n int, withOwner bool) *listXML {
	w := &listXML{root: root, enc: func(v string) string { return v }}
	if lq.encodeURL {
		w.enc = encodeURLKey
	}
	if withOwner {
		w.owner = s.ownerXML
	}
	w.Grow(256 + 400*n)
	w.WriteString(xml.Header)
	w.WriteString("<" + root + ` xmlns="` + xmlNS + `">`)
	w.elem("Name", bucket)
	w.encElem("Prefix", lq.prefix)
	return w
}

// encElem writes <name>enc(text)</name>.
func (w *listXML) encElem(name, text string) { w.elem(name, w.enc(text)) }

// common writes MaxKeys, Delimiter (when set), IsTruncated and
// EncodingType (when encoding), in that order, as S3 does.
func (w *listXML) common(lq listQuery, truncated bool) {
	w.elem("MaxKeys", strconv.Itoa(lq.maxKeys))
	if lq.delimiter != "" {
		w.encElem("Delimiter", lq.delimiter)
	}
	w.elem("IsTruncated", strconv.FormatBool(truncated))
	if lq.encodeURL {
		w.elem("EncodingType", "url")
	}
}

func (w *listXML) key(k string) { w.encElem("Key", k) }

func (w *listXML) lastModified(t time.Time) {
	if !t.Equal(w.lastMod) || w.lastModStr == "" {
		w.lastMod, w.lastModStr = t, xmlTime(t)
	}
	w.elem("LastModified", w.lastModStr)
}

// etag writes the quoted ETag as encoding/xml would escape its quotes.
func (w *listXML) etag(e string) {
	w.WriteString("<ETag>&#34;")
	w.text(e)
	w.WriteString("&#34;</ETag>")
}

func (w *listXML) size(n int64) { w.elem("Size", strconv.FormatInt(n, 10)) }

// storageClass writes an entry's StorageClass (the file's coldest class).
func (w *listXML) storageClass(class string) {
	if class == "" || class == "STANDARD" {
		w.WriteString("<StorageClass>STANDARD</StorageClass>")
		return
	}
	w.elem("StorageClass", class)
}

// ownerElem writes the Owner element when the page carries owners.
func (w *listXML) ownerElem() { w.WriteString(w.owner) }

// commonPrefix writes one CommonPrefixes element.
func (w *listXML) commonPrefix(p string) {
	w.WriteString("<CommonPrefixes>")
	w.encElem("Prefix", p)
	w.WriteString("</CommonPrefixes>")
}

// close ends the page and returns its bytes.
func (w *listXML) close() []byte {
	w.WriteString("</" + w.root + ">")
	return w.Bytes()
}

// ownerElement is the <Owner> element of id and name, built once by New.
func ownerElement(id, name string) string {
	var w xmlWriter
	w.WriteString("<Owner>")
	w.elem("ID", id)
	w.elem("DisplayName", name)
	w.WriteString("</Owner>")
	return w.String()
}

// xmlWriter builds XML text by hand for the listing hot path.
type xmlWriter struct{ bytes.Buffer }

// elem writes <name>text</name> with text escaped as encoding/xml does.
func (w *xmlWriter) elem(name, text string) {
	w.WriteByte('<')
	w.WriteString(name)
	w.WriteByte('>')
	w.text(text)
	w.WriteString("</")
	w.WriteString(name)
	w.WriteByte('>')
}

// text writes character data escaped as encoding/xml does.
func (w *xmlWriter) text(s string) {
	if plainXMLText(s) {
		w.WriteString(s)
		return
	}
	_ = xml.EscapeText(&w.Buffer, []byte(s))
}

// plainXMLText reports whether s is printable ASCII needing no escaping.
func plainXMLText(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '&' || c == '<' || c == '>' || c == '"' || c == '\'' {
			return false
		}
	}
	return true
}
