package sweep

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// TestTableHeaderUnits: the sweep table's header says each column's unit
// (a second header line, aligned with its column), so "ttft p99 4210.0"
// reads as milliseconds and "offered 40.00" as requests per second.
func TestTableHeaderUnits(t *testing.T) {
	opts := DefaultOptions()
	opts.SLO, opts.Percentile = traces.SLO{TTFT: time.Second, TPOT: 50 * time.Millisecond}, 99
	res := &Result{opts: opts, Knee: 1,
		Steps: []Step{{Speed: 1, OfferedRPS: 40, RPS: 39.5, OutTokPerS: 5000, TTFTP50Ms: 80, TTFTP99Ms: 900, TPOTP50Ms: 20, TPOTP99Ms: 40,
			AtPct: map[string]float64{"ttft": 900, "tpot": 40}, OK: true, GoodRatio: 0.99}}}
	var b bytes.Buffer
	res.WriteTable(&b)
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 3 {
		t.Fatalf("table:\n%s", b.String())
	}
	head, units, row := lines[0], lines[1], lines[2]
	want := map[string]string{"speed": "×", "offered": "req/s", "achieved": "req/s", "output": "tok/s", "failed": "reqs",
		"ttft p50": "ms", "ttft p99": "ms", "tpot p99": "ms", "slo ttft@p99": "ms", "slo tpot@p99": "ms", "goodput": "% of req"}
	for col, unit := range want {
		i := strings.Index(head, col)
		if i < 0 {
			t.Errorf("header lacks %q:\n%s", col, head)
			continue
		}
		// the unit ends where the column name ends (right-aligned)
		end := len([]rune(head[:i])) + len([]rune(col))
		u := []rune(units)
		if end > len(u) || !strings.HasSuffix(string(u[:end]), unit) {
			t.Errorf("column %q: unit line does not end with %q under it:\n%s\n%s", col, unit, head, units)
		}
	}
	if !strings.Contains(row, "← knee") {
		t.Errorf("first data row is not the step: %q", row)
	}
}
