package chart

import (
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

// gonum labels the ticks of a 2.5 step with two decimals ("1250.00"); Ticks
// labels them with the digits they need.
func TestTicksNoUselessDecimals(t *testing.T) {
	for _, r := range [][2]float64{{0, 5000}, {0, 9000}, {0, 1}, {0.1, 0.9}, {0, 12.5}, {1000, 1e6}} {
		for _, tk := range (Ticks{}).Ticks(r[0], r[1]) {
			l := tk.Label
			if l == "" {
				continue
			}
			if strings.ContainsAny(l, "e") || (strings.Contains(l, ".") && strings.HasSuffix(l, "0")) {
				t.Errorf("range %v: tick %v labelled %q", r, tk.Value, l)
			}
		}
	}
	for v, want := range map[float64]string{1250: "1250", 0.5: "0.5", 0.1 + 0.2: "0.3", 1e6: "1000000", 2.5: "2.5", -0.0: "0"} {
		if got := TickLabel(v); got != want {
			t.Errorf("TickLabel(%v) = %q, want %q", v, got, want)
		}
	}
	var log []string
	for _, tk := range (Ticks{Log: true, Div: 1000}).Ticks(50, 20000) {
		if tk.Label != "" {
			log = append(log, tk.Label)
		}
	}
	if got := strings.Join(log, " "); got != "0.01 0.1 1 10 100" {
		t.Errorf("log ticks of 50 ms … 20 s in seconds: %s", got)
	}
}

// MsAxis shows milliseconds as seconds once the axis reaches 10 s.
func TestMsAxis(t *testing.T) {
	p := plot.New()
	MsAxis(&p.Y, "latency", 9000, false)
	if p.Y.Label.Text != "latency (ms)" {
		t.Errorf("9 s axis labelled %q", p.Y.Label.Text)
	}
	MsAxis(&p.X, "latency", 16500, true)
	if p.X.Label.Text != "latency (s), log scale" {
		t.Errorf("16.5 s log axis labelled %q", p.X.Label.Text)
	}
	var labels []string
	for _, tk := range p.X.Tick.Marker.Ticks(100, 16500) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if got := strings.Join(labels, " "); got != "0.1 1 10 100" {
		t.Errorf("ticks %s", got)
	}
}
