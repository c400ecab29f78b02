package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestReportModelsSideBySide: with two S3 models each table gains an
// "S3 model" column, and a line's figures of both models stand next to
// each other (not one model's table after the other's); targets name their
// model. With one model the tables keep their old shape.
func TestReportModelsSideBySide(t *testing.T) {
	rep := &Report{}
	for _, m := range []string{ModelHTTP, ModelInProcess} {
		rep.model, rep.primary = m, m == ModelHTTP
		rep.add(Row{Workload: "w", System: "wharf", Variant: "a", Metric: "wall", Value: 1, Unit: "s"})
		rep.add(Row{Workload: "w", System: "per-object", Variant: "a", Metric: "wall", Value: 2, Unit: "s"})
		rep.walk(WalkPoint{System: "wharf", Concurrency: 1, Seconds: 1})
		rep.target("t", "1", "1", true)
	}
	var b bytes.Buffer
	rep.WriteMarkdown(&b)
	out := b.String()
	want := "| system | variant | clients | S3 model | wall (s) |\n|---|---|---|---|---|\n" +
		"| wharf | a | - | http | 1 |\n| wharf | a | - | inprocess | 1 |\n" +
		"| per-object | a | - | http | 2 |\n| per-object | a | - | inprocess | 2 |\n"
	if !strings.Contains(out, want) {
		t.Errorf("table:\n%s\nwant it to contain:\n%s", out, want)
	}
	for _, w := range []string{"| [http] t |", "| [inprocess] t |"} {
		if !strings.Contains(out, w) {
			t.Errorf("targets: want %q in\n%s", w, out)
		}
	}
	if len(rep.Walk) != 1 {
		t.Errorf("chart points: %d, want the first model's only", len(rep.Walk))
	}

	one := &Report{primary: true}
	one.add(Row{Workload: "w", System: "wharf", Variant: "a", Metric: "wall", Value: 1, Unit: "s"})
	b.Reset()
	one.WriteMarkdown(&b)
	if !strings.Contains(b.String(), "| system | variant | clients | wall (s) |\n|---|---|---|---|\n| wharf | a | - | 1 |\n") {
		t.Errorf("one model:\n%s", b.String())
	}
}
