package sweep

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

func TestParseSpeeds(t *testing.T) {
	got, err := ParseSpeeds("2, 0.5,1x,1,3")
	if err != nil || !slices.Equal(got, []float64{0.5, 1, 2, 3}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"0", "1,-2", "abc", "", ",", "NaN", "Inf"} {
		var oe *traces.OptionError
		if _, err := ParseSpeeds(bad); !errors.As(err, &oe) || oe.Option != "Options.Speeds" {
			t.Errorf("ParseSpeeds(%q): %v, want an option error naming Options.Speeds", bad, err)
		}
	}
}

func TestSearch(t *testing.T) {
	for _, c := range []struct {
		why  string
		knee float64
		want func(best float64) bool
	}{
		{"a knee inside the range is bracketed within the tolerance", 2.3, func(b float64) bool { return b <= 2.3 && b >= 2.3/1.05 }},
		{"everything passing returns the upper bound", 100, func(b float64) bool { return b == 8 }},
		{"nothing passing returns 0", 0.1, func(b float64) bool { return b == 0 }},
	} {
		n := 0
		best, steps, err := Search(context.Background(), 0.25, 8, 0.05, func(_ context.Context, s float64) (bool, error) {
			n++
			return s <= c.knee, nil
		})
		if err != nil || !c.want(best) || len(steps) != n {
			t.Errorf("%s: best %v after %d steps (%v)", c.why, best, n, err)
		}
		if n > 2+int(math.Ceil(math.Log2(math.Log(32)/math.Log(1.05)))) {
			t.Errorf("%s: %d evaluations, more than a bisection needs", c.why, n)
		}
	}
	boom := errors.New("boom")
	if _, _, err := Search(context.Background(), 1, 2, 0.05, func(context.Context, float64) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("eval error not returned: %v", err)
	}
	if _, _, err := Search(context.Background(), 2, 1, 0.05, nil); err == nil {
		t.Error("inverted range accepted")
	}
}

func FuzzParseSpeeds(f *testing.F) {
	for _, s := range []string{"0.5,1,1.5,2,3", "0", "1x,2x", ",,", "1e400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSpeeds(s)
		if err != nil {
			return
		}
		if len(v) == 0 || !slices.IsSorted(v) {
			t.Fatalf("ParseSpeeds(%q) = %v", s, v)
		}
		for _, x := range v {
			if !(x > 0) || math.IsInf(x, 0) {
				t.Fatalf("ParseSpeeds(%q) = %v", s, v)
			}
		}
	})
}
