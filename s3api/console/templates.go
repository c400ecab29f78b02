package console

// The page templates (html/template: every value is escaped for where it
// lands) and the stylesheet. No page has any script.

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
)

// pageData is what every template receives.
type pageData struct {
	Title   string
	V       visitor
	Who     string // the logged-in access key, "" = anonymous
	CSRF    string
	Logins  bool
	Error   string
	Flash   string
	Login   string // the login form's CSRF token
	Buckets []bucketRow

	Bucket, Prefix, Filter string
	Crumbs                 []crumb
	Entries                []entryRow
	Files                  int
	FirstURL, NextURL      string

	File         *fileInfo
	Preview      *preview
	Versions     []versionRow
	VersionsErr  string
	Snippets     []snippet
	ShareChoices any
	ShareURL     string
	ShareErr     string
	ShareExpiry  string
	AllowRestore bool
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// isBidiControl reports whether r is a bidirectional formatting
// character (Unicode UAX #9: ALM, LRM, RLM, the embeddings, overrides
// and isolates): inside a name it reorders what is shown, so that
// "invoice\u202Efdp.exe" reads "invoiceexe.pdf".
func isBidiControl(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// shown is s for display in a page: each bidi control written out as
// [U+XXXX], so a name reads as the bytes it holds. Links and form values
// keep the real name.
func shown(s string) string {
	if !strings.ContainsFunc(s, isBidiControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isBidiControl(r) {
			fmt.Fprintf(&b, "[%U]", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

var funcs = template.FuncMap{
	"shown": shown,
	"bytes": humanBytes,
	"comma": func(n any) string {
		s := fmt.Sprint(n)
		var out []byte
		for i := range s {
			if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
				out = append(out, ',')
			}
			out = append(out, s[i])
		}
		return string(out)
	},
}

const layout = `{{define "top"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{shown .Title}} · wharf</title><link rel="stylesheet" href="/-/console/style.css"><link rel="icon" href="/-/console/favicon.png"></head>
<body><header><a class="brand" href="/-/console/">wharf</a>
<nav>{{if .Who}}<span class="who" id="who">{{.Who}}</span>
<form method="post" action="/-/console/logout" class="inline"><input type="hidden" name="csrf" value="{{.CSRF}}"><button type="submit" id="logout">Log out</button></form>
{{else if .Logins}}<a href="/-/console/login" id="login-link">Log in</a>{{end}}</nav></header><main>
{{if .Crumbs}}<p class="crumbs">{{range $i, $c := .Crumbs}}{{if $i}} / {{end}}<a href="{{$c.URL}}">{{shown $c.Name}}</a>{{end}}</p>{{end}}
{{if .Error}}<p class="error" id="error">{{shown .Error}}</p>{{end}}{{end}}
{{define "bottom"}}</main></body></html>{{end}}

{{define "error"}}{{template "top" .}}{{template "bottom" .}}{{end}}

{{define "login"}}{{template "top" .}}<h1>Log in</h1>
<form method="post" action="/-/console/login" id="login-form">
<input type="hidden" name="csrf" value="{{.Login}}">
<p><label>Access key <input name="access_key" id="access_key" autocomplete="username" required></label></p>
<p><label>Secret key <input name="secret_key" id="secret_key" type="password" autocomplete="current-password" required></label></p>
<p><button type="submit" id="login-submit">Log in</button></p></form>{{template "bottom" .}}{{end}}

{{define "buckets"}}{{template "top" .}}<h1>Buckets</h1>
{{if not .Buckets}}<p>No bucket you may read.</p>{{else}}
<table id="buckets"><thead><tr><th>Bucket</th><th>Kind</th><th>Serves</th><th class="num">Files</th><th class="num">Bytes</th><th class="num">In Glacier / Deep Archive</th></tr></thead><tbody>
{{range .Buckets}}<tr><td><a class="bucket" href="/-/console/b/{{.Name}}">{{.Name}}</a></td><td>{{.Kind}}</td>
<td>{{if eq .State "open"}}{{.Served}}{{else}}{{.State}}{{end}}</td><td class="num">{{comma .Files}}</td>
<td class="num">{{if .Share}}{{bytes .Bytes}}{{else}}…{{end}}</td><td class="num">{{if .Share}}{{.Share}}{{else}}…{{end}}</td></tr>
{{end}}</tbody></table>{{end}}{{template "bottom" .}}{{end}}

{{define "browse"}}{{template "top" .}}<h1>{{.Bucket}}/{{shown .Prefix}}</h1>
<form method="get" action="/-/console/b/{{.Bucket}}" class="filter"><input type="hidden" name="prefix" value="{{.Prefix}}">
<label>Names starting with <input name="filter" id="filter" value="{{.Filter}}"></label> <button type="submit">Filter</button></form>
<table id="entries"><thead><tr><th>Name</th><th class="num">Size</th><th>Modified</th><th>Storage class</th></tr></thead><tbody>
{{range .Entries}}{{if .Folder}}<tr class="folder"><td><a class="folder" href="{{.URL}}">{{shown .Name}}</a></td><td></td><td></td><td></td></tr>
{{else}}<tr class="file"><td><a class="file" href="{{.URL}}">{{shown .Name}}</a></td><td class="num" title="{{comma .Size}} bytes">{{bytes .Size}}</td><td>{{.MTime}}</td><td>{{.Class}}</td></tr>
{{end}}{{else}}<tr><td colspan="4">Nothing here.</td></tr>{{end}}</tbody></table>
<p class="pager">{{if .FirstURL}}<a href="{{.FirstURL}}" id="first-page">First page</a> {{end}}{{if .NextURL}}<a href="{{.NextURL}}" id="next-page">Next page</a>{{end}}
<span class="count">{{comma .Files}} files in the bucket</span></p>{{template "bottom" .}}{{end}}

{{define "file"}}{{template "top" .}}{{with .File}}<h1>{{shown .Name}}</h1>
{{if eq $.Flash "started"}}<p class="flash" id="flash">Restore started.</p>{{else if eq $.Flash "running"}}<p class="flash" id="flash">A restore is already running.</p>{{else if eq $.Flash "done"}}<p class="flash" id="flash">Already restored.</p>{{end}}
<table class="facts" id="facts">
<tr><th>Key</th><td><code>{{shown .Key}}</code></td></tr>
<tr><th>Size</th><td id="size">{{comma .Size}} bytes ({{bytes .Size}})</td></tr>
<tr><th>Modified</th><td>{{.MTime}}</td></tr>
<tr><th>ETag</th><td><code>{{.ETag}}</code></td></tr>
<tr><th>sha256</th><td><code>{{if .SHA256}}{{.SHA256}}{{else}}none in the manifest{{end}}</code></td></tr>
<tr><th>Verified by</th><td>{{.Verified}}</td></tr>
<tr><th>Version</th><td><code>{{.VersionID}}</code></td></tr>
<tr><th>Storage class</th><td id="class">{{.Class}}{{if .Tier}} ({{.Tier}}){{end}}</td></tr>
{{if .Restore}}<tr><th>Restore</th><td id="restore-state">{{.Restore}}</td></tr>{{end}}
</table>
<p class="actions">{{if .Readable}}<a href="{{.DownloadURL}}" id="download" download>Download</a>{{else}}<span id="archived-note">Archived: this file must be restored before it can be read or downloaded.</span>{{end}}</p>
{{if .CanRestore}}<form method="post" action="{{.RestoreURL}}" id="restore-form" class="box">
<input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="key" value="{{.Key}}">{{if .Asked}}<input type="hidden" name="version" value="{{.Asked}}">{{end}}
<p>Restoring reads back <strong id="restore-cost">{{.ArchivedObjects}} archived object{{if ne .ArchivedObjects 1}}s{{end}}, {{bytes .ArchivedBytes}} ({{comma .ArchivedBytes}} bytes)</strong> from the archive class; your storage provider bills the retrieval.</p>
<label>Days <input name="days" value="7" size="3"></label>
<label>Tier <select name="tier"><option>Standard</option><option>Bulk</option><option>Expedited</option></select></label>
<button type="submit" id="restore-button">Restore</button></form>{{end}}
{{end}}
{{with .Preview}}<h2>Preview</h2><div class="preview" id="preview">
{{if eq .Kind "image"}}<img id="preview-image" src="{{.ImageURL}}" alt="{{shown $.File.Name}}"{{if .Width}} width="{{.Width}}" height="{{.Height}}"{{end}}>
<p class="note">{{.ImageType}}{{if .Width}}, {{.Width}} × {{.Height}} pixels{{end}}</p>
{{else if eq .Kind "csv"}}<table id="preview-table">{{range $i, $r := .Rows}}<tr>{{range $r}}{{if eq $i 0}}<th>{{.}}</th>{{else}}<td>{{.}}</td>{{end}}{{end}}</tr>{{end}}</table>
{{else if eq .Kind "zarr"}}<table id="preview-zarr" class="facts">{{range .Zarr}}<tr><th>{{index . 0}}</th><td><code>{{index . 1}}</code></td></tr>{{end}}</table>
{{else if eq .Kind "error"}}<p class="error">The preview could not be read: {{.Err}}</p>
{{else if eq .Kind "empty"}}<p>Empty file.</p>
{{else}}<pre id="preview-text" class="{{.Kind}}">{{.Text}}</pre>{{end}}
{{if .Truncated}}<p class="note">The first bytes only.</p>{{end}}</div>{{end}}
<h2>Versions</h2>{{if .VersionsErr}}<p class="error">{{.VersionsErr}}</p>{{end}}
<table id="versions"><thead><tr><th>Version</th><th>Modified</th><th class="num">Size</th><th>ETag</th></tr></thead><tbody>
{{range .Versions}}<tr{{if .Current}} class="current"{{end}}><td>{{if .URL}}<a class="version" href="{{.URL}}">{{.ID}}</a>{{else}}{{.ID}}{{end}}{{if .Latest}} (latest){{end}}{{if .Deleted}} delete marker{{end}}</td>
<td>{{.MTime}}</td><td class="num">{{if not .Deleted}}{{comma .Size}}{{end}}</td><td><code>{{.ETag}}</code></td></tr>{{end}}</tbody></table>
{{if .ShareChoices}}<h2>Share link</h2><form method="get" action="/-/console/f/{{.Bucket}}" id="share-form"><input type="hidden" name="key" value="{{.File.Key}}">
{{if .File.Asked}}<input type="hidden" name="version" value="{{.File.Asked}}">{{end}}
<label>Valid for <select name="share">{{range .ShareChoices}}<option value="{{.Seconds}}">{{.Label}}</option>{{end}}</select></label> <button type="submit" id="share-button">Make link</button></form>
{{if .ShareErr}}<p class="error">{{.ShareErr}}</p>{{end}}{{if .ShareURL}}<p>Anyone with this link can download the file until {{.ShareExpiry}}:</p><pre id="share-url">{{.ShareURL}}</pre>{{end}}{{end}}
<h2>With an S3 client</h2>{{range .Snippets}}<h3>{{.Client}}</h3><pre class="snippet">{{.Code}}</pre>{{end}}
{{template "bottom" .}}{{end}}
`

var pages = template.Must(template.New("console").Funcs(funcs).Parse(layout))

// render writes template name with d.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, d pageData) {
	d.Logins = c.cfg.Logins
	d.CSRF = d.V.csrf
	if d.V.sess != nil {
		d.Who = d.V.sess.accessKey
	}
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, d); err != nil {
		c.cfg.Logger.Error().Err(err).Str("page", name).Msg("console template")
		http.Error(w, "console: page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// fail answers with an error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, v *visitor, status int, msg string) {
	d := pageData{Title: http.StatusText(status), Error: msg}
	if v != nil {
		d.V = *v
	}
	c.render(w, r, status, "error", d)
}

const styleCSS = `body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2733;background:#f7f8fa}
header{display:flex;justify-content:space-between;align-items:center;padding:.6em 1.2em;background:#16324f;color:#fff}
header a{color:#fff}.brand{font-weight:700;text-decoration:none;font-size:1.2em}
nav .who{margin-right:.8em;opacity:.8}.inline{display:inline}
main{padding:1em 1.5em;max-width:1200px}h1{font-size:1.4em;word-break:break-all}
table{border-collapse:collapse;background:#fff;margin:.5em 0}th,td{padding:.3em .7em;border-bottom:1px solid #e3e6ea;text-align:left;vertical-align:top}
td.num,th.num{text-align:right}.facts th{width:10em;color:#4a5563}code{word-break:break-all}
pre{background:#fff;border:1px solid #e3e6ea;padding:.7em;overflow:auto;max-height:40em;white-space:pre-wrap;word-break:break-all}
.error{color:#9b1c1c;background:#fde8e8;padding:.5em}.flash{background:#e6f4ea;padding:.5em}
.box{background:#fff;border:1px solid #e3e6ea;padding:.2em 1em 1em}.note{color:#4a5563;font-size:.9em}
.crumbs a{word-break:break-all}.pager a{margin-right:1em}.count{color:#4a5563}
.preview img{max-width:none;border:1px solid #e3e6ea;background:#fff}tr.current{background:#f1f6fb}
`
