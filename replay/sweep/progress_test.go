package sweep

import (
	"bytes"
	"context"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/internal/testtraces"
	"github.com/tokentrace/tokentrace/traces"
)

// TestProgressLines: every point of a sweep logs a counter line when it
// starts ("[2/3] 1× … replaying", before its replay, which may take a
// minute) and when it ends; a search's total is its bisection bound.
func TestProgressLines(t *testing.T) {
	var log bytes.Buffer
	cfg := DefaultOptions()
	cfg.Sim = kneeSim(32, 10*time.Millisecond)
	cfg.SLO, cfg.Percentile = traces.SLO{TTFT: 5 * time.Second}, 99
	cfg.Speeds, cfg.Repeat, cfg.Log = []float64{0.5, 1, 2}, 2, &log
	if _, err := Run(context.Background(), testtraces.Constant(10, 100, 8, 2), traces.NewMeta("test"), cfg); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	want := []string{
		`^sweep: \[1/3\] 0\.5× run 1/2: rate 50\.\d\d req/s offered, replaying$`,
		`^sweep: \[1/3\] 0\.5× run 2/2: rate 50\.\d\d req/s offered, replaying$`,
		`^sweep: \[1/3\] 0\.5×: 10 requests, .*: meets SLO .*\(\d+ s\)$`,
		`^sweep: \[2/3\] 1× run 1/2: rate 100\.\d\d req/s offered, replaying$`,
		`^sweep: \[2/3\] 1× run 2/2: `,
		`^sweep: \[2/3\] 1×: 10 requests`,
		`^sweep: \[3/3\] 2× run 1/2: `,
		`^sweep: \[3/3\] 2× run 2/2: `,
		`^sweep: \[3/3\] 2×: 10 requests`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d progress lines, want %d:\n%s", len(lines), len(want), log.String())
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(lines[i]) {
			t.Errorf("line %d %q, want %s", i+1, lines[i], w)
		}
	}
	// the search bound is never exceeded
	for _, c := range [][3]float64{{0.25, 8, 0.05}, {1.5, 3, 0.05}, {1, 1.04, 0.05}} {
		for _, knee := range []float64{0, c[0] * 1.01, math.Sqrt(c[0] * c[1]), c[1] * 2} {
			_, steps, _ := Search(context.Background(), c[0], c[1], c[2], func(_ context.Context, s float64) (bool, error) { return s <= knee, nil })
			if n := maxSearchSteps(c[0], c[1], c[2]); len(steps) > n {
				t.Errorf("search %v, knee %g: %d steps, bound %d", c, knee, len(steps), n)
			}
		}
	}
}
