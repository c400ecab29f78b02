package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Row is one measured figure.
type Row struct {
	Workload    string // "1 tree walk", ...
	System      string // "wharf", "per-object", "zstd decode", "index"
	Variant     string // e.g. "frames 4 MiB"
	Concurrency int
	Metric      string
	Value       float64
	Unit        string
	// Model is how wharf reached the S3 model for this figure (ModelHTTP,
	// ModelInProcess); "" when the run had one model only.
	Model string
}

// Target is one goal from the issue and whether this run met it.
type Target struct {
	Name     string
	Measured string
	Goal     string
	Met      bool
}

// Report is what Run measured.
type Report struct {
	Header  []string // command line, machine, settings
	Rows    []Row
	Targets []Target
	// Walk holds the tree-walk figures for the chart (the first model's).
	Walk []WalkPoint

	model   string // Row.Model of the rows being added
	primary bool   // the first (or only) model is being run
}

// WalkPoint is one tree-walk run, for the chart.
type WalkPoint struct {
	System      string
	Concurrency int
	Seconds     float64
	GETs        int64
}

func (r *Report) add(row Row) {
	if row.Model == "" {
		row.Model = r.model
	}
	r.Rows = append(r.Rows, row)
}

// walk adds chart points, of the first model only.
func (r *Report) walk(p ...WalkPoint) {
	if r.primary || r.model == "" {
		r.Walk = append(r.Walk, p...)
	}
}

func (r *Report) target(name, measured, goal string, met bool) {
	if r.model != "" {
		name = "[" + r.model + "] " + name
	}
	r.Targets = append(r.Targets, Target{Name: name, Measured: measured, Goal: goal, Met: met})
}

// WriteCSV writes every row.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"workload", "system", "variant", "concurrency", "metric", "value", "unit", "model"})
	for _, row := range r.Rows {
		cw.Write([]string{row.Workload, row.System, row.Variant, strconv.Itoa(row.Concurrency), row.Metric,
			strconv.FormatFloat(row.Value, 'g', 6, 64), row.Unit, row.Model})
	}
	cw.Flush()
	return cw.Error()
}

// WriteMarkdown writes the header, one table per workload and the targets.
func (r *Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintln(w, "# wharf bench")
	fmt.Fprintln(w)
	for _, h := range r.Header {
		fmt.Fprintf(w, "- %s\n", h)
	}
	var workloads []string
	seen := map[string]bool{}
	for _, row := range r.Rows {
		if !seen[row.Workload] {
			seen[row.Workload] = true
			workloads = append(workloads, row.Workload)
		}
	}
	for _, wl := range workloads {
		fmt.Fprintf(w, "\n## %s\n\n", wl)
		// Columns: metrics in first-seen order; rows: system/variant/concurrency.
		var metrics []string
		mseen := map[string]bool{}
		type rk struct {
			sys, variant string
			conc         int
			model        string
		}
		var keys []rk
		kseen := map[rk]bool{}
		cell := map[rk]map[string]string{}
		for _, row := range r.Rows {
			if row.Workload != wl {
				continue
			}
			m := row.Metric
			if row.Unit != "" {
				m += " (" + row.Unit + ")"
			}
			if !mseen[m] {
				mseen[m] = true
				metrics = append(metrics, m)
			}
			k := rk{row.System, row.Variant, row.Concurrency, row.Model}
			if !kseen[k] {
				kseen[k] = true
				keys = append(keys, k)
				cell[k] = map[string]string{}
			}
			cell[k][m] = fmtValue(row.Value)
		}
		// With several S3 models, each line's figures for every model
		// stand one under the other, in the order the models ran.
		models := false
		for _, k := range keys {
			models = models || k.model != ""
		}
		order := map[rk]int{}
		for i, k := range keys {
			g := k
			g.model = ""
			if _, ok := order[g]; !ok {
				order[g] = i
			}
		}
		sort.SliceStable(keys, func(i, j int) bool {
			gi, gj := keys[i], keys[j]
			gi.model, gj.model = "", ""
			return order[gi] < order[gj]
		})
		mcol, mhead := "", ""
		if models {
			mcol, mhead = " S3 model |", "---|"
		}
		fmt.Fprintf(w, "| system | variant | clients |%s %s |\n", mcol, strings.Join(metrics, " | "))
		fmt.Fprintf(w, "|---|---|---|%s%s\n", mhead, strings.Repeat("---|", len(metrics)))
		for _, k := range keys {
			conc := "-"
			if k.conc > 0 {
				conc = strconv.Itoa(k.conc)
			}
			vals := make([]string, len(metrics))
			for i, m := range metrics {
				if v, ok := cell[k][m]; ok {
					vals[i] = v
				} else {
					vals[i] = ""
				}
			}
			mval := ""
			if models {
				mval = " " + k.model + " |"
			}
			fmt.Fprintf(w, "| %s | %s | %s |%s %s |\n", k.sys, k.variant, conc, mval, strings.Join(vals, " | "))
		}
	}
	if len(r.Targets) > 0 {
		fmt.Fprintln(w, "\n## Targets")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| target | measured | goal | met |")
		fmt.Fprintln(w, "|---|---|---|---|")
		for _, t := range r.Targets {
			met := "yes"
			if !t.Met {
				met = "**NO**"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.Name, t.Measured, t.Goal, met)
		}
	}
}

func fmtValue(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// WriteSVG draws the tree-walk chart: wall time (log scale) and backend GETs
// per client concurrency, wharf against per-object reads.
func (r *Report) WriteSVG(w io.Writer) {
	pts := append([]WalkPoint(nil), r.Walk...)
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].Concurrency < pts[j].Concurrency })
	var concs []int
	cseen := map[int]bool{}
	for _, p := range pts {
		if !cseen[p.Concurrency] {
			cseen[p.Concurrency] = true
			concs = append(concs, p.Concurrency)
		}
	}
	systems := []string{"per-object", "wharf"}
	colors := map[string]string{"per-object": "#c0504d", "wharf": "#1f77b4"}
	get := func(sys string, c int) (WalkPoint, bool) {
		for _, p := range pts {
			if p.System == sys && p.Concurrency == c {
				return p, true
			}
		}
		return WalkPoint{}, false
	}
	const W, H = 900, 380
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	panel := func(x0 int, title string, val func(WalkPoint) float64, label func(float64) string) {
		const pw, ph, top = 400, 260, 60
		fmt.Fprintf(w, `<text x="%d" y="30" font-size="15" font-weight="bold">%s</text>`+"\n", x0, title)
		maxv := 0.0
		for _, p := range pts {
			maxv = math.Max(maxv, val(p))
		}
		if maxv <= 0 {
			maxv = 1
		}
		lmax := math.Log10(maxv*1.5 + 1)
		y := func(v float64) float64 { return float64(top+ph) - float64(ph)*math.Log10(v+1)/lmax }
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", x0, top+ph, x0+pw, top+ph)
		gw := pw / max(1, len(concs))
		for gi, c := range concs {
			gx := x0 + gi*gw
			for si, sys := range systems {
				p, ok := get(sys, c)
				if !ok {
					continue
				}
				v := val(p)
				bx := gx + 15 + si*(gw-30)/2
				bw := (gw-30)/2 - 6
				yy := y(v)
				fmt.Fprintf(w, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"/>`+"\n", bx, yy, bw, float64(top+ph)-yy, colors[sys])
				fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="middle">%s</text>`+"\n", bx+bw/2, yy-4, label(v))
			}
			fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle">%d client(s)</text>`+"\n", gx+gw/2, top+ph+18, c)
		}
	}
	panel(30, "Tree walk wall time, s (log scale)", func(p WalkPoint) float64 { return p.Seconds },
		func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) })
	panel(480, "Backend GET requests (log scale)", func(p WalkPoint) float64 { return float64(p.GETs) },
		func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) })
	for i, sys := range systems {
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="14" height="14" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			30+i*160, H-30, colors[sys], 50+i*160, H-19, sys)
	}
	fmt.Fprintln(w, "</svg>")
}
