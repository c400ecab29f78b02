package s3api

import (
	"encoding/xml"
	"testing"
)

// FuzzXMLElem: the hand-written listing XML decodes to exactly what
// encoding/xml's own output for the same text decodes to.
func FuzzXMLElem(f *testing.F) {
	for _, s := range []string{"", "plain/key.txt", `q&<>"'.txt`, "a b+c%41", "ü", "x\ty\r\n", "\x7f", "\xff\xfe", "]]>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var w xmlWriter
		w.elem("Key", s)
		var ours, theirs struct {
			XMLName xml.Name `xml:"Key"`
			V       string   `xml:",chardata"`
		}
		if err := xml.Unmarshal(w.Bytes(), &ours); err != nil {
			t.Fatalf("our XML for %q does not parse: %v (%s)", s, err, w.Bytes())
		}
		ref, err := xml.Marshal(struct {
			XMLName xml.Name `xml:"Key"`
			V       string   `xml:",chardata"`
		}{V: s})
		if err != nil {
			t.Fatal(err)
		}
		if err := xml.Unmarshal(ref, &theirs); err != nil {
			t.Fatal(err)
		}
		if ours.V != theirs.V {
			t.Fatalf("%q: ours decodes to %q, encoding/xml's to %q", s, ours.V, theirs.V)
		}
	})
}
