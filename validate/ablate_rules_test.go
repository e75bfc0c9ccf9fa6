package validate

import (
	"math"
	"strings"
	"testing"
)

// conclusion is a judged conclusion of metric on target b against a.
func conclusion(metric string, real, syn Effect) Conclusion {
	o := DefaultOptions()
	return Conclusion{Metric: metric, Target: "b", Baseline: "a", Real: real, Synthetic: syn, Verdict: verdict(real, syn, &o)}
}

// The arithmetic of a transplant's effect on one conclusion: the share of
// the gap it closes, and whether it restores the real conclusion (the
// real decision, reached from the synthetic effect beyond its own
// interval; for a size that was off, a verdict of holds).
func TestGapClosedAndRestores(t *testing.T) {
	o := DefaultOptions()
	// Synthetic sees nothing, real a 40 % slow-down.
	c := conclusion("ttft_p50", eff(0.40, 0.30, 0.50), eff(0.00, -0.05, 0.05))
	if c.Verdict != VerdictNotSignificantSynthetic {
		t.Fatalf("setup: verdict %q", c.Verdict)
	}
	for _, tc := range []struct {
		name     string
		e        Effect
		gap      float64
		restores bool
		moves    bool
	}{
		{"at the real effect", eff(0.40, 0.30, 0.50), 1, true, true},
		{"half way, significant", eff(0.20, 0.10, 0.30), 0.5, true, true},
		{"past the real effect", eff(0.60, 0.50, 0.70), 1.5, true, true},
		{"inside the synthetic interval, however significant", eff(0.04, 0.03, 0.05), 0.1, false, false},
		{"half way but not significant", eff(0.20, -0.10, 0.50), 0.5, false, true},
		{"the other way", eff(-0.20, -0.30, -0.10), -0.5, false, false},
		{"a tenth of the way, beyond the noise", eff(0.06, 0.055, 0.065), 0.15, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if g := gapClosed(c, tc.e); math.Abs(g-tc.gap) > 1e-9 {
				t.Errorf("gap closed %g, want %g", g, tc.gap)
			}
			if got := restores(c, tc.e, &o); got != tc.restores {
				t.Errorf("restores = %v, want %v", got, tc.restores)
			}
			if got := movesTowardReal(c, tc.e); got != tc.moves {
				t.Errorf("moves toward the real effect = %v, want %v", got, tc.moves)
			}
		})
	}
	// A size that was off is restored only by a verdict of holds.
	off := conclusion("ttft_p99", eff(0.30, 0.28, 0.32), eff(1.20, 1.10, 1.30))
	if off.Verdict != VerdictMagnitudeOff {
		t.Fatalf("setup: verdict %q", off.Verdict)
	}
	if restores(off, eff(0.80, 0.75, 0.85), &o) {
		t.Error("a size half way (+80% against +30%) restored a magnitude that was off")
	}
	if !restores(off, eff(0.35, 0.30, 0.40), &o) {
		t.Error("a size at the real one (+35% against +30%) did not restore a magnitude that was off")
	}
	// No gap: nothing to close.
	same := conclusion("ttft_p50", eff(0.3, 0.2, 0.4), eff(0.3, 0.2, 0.4))
	if g := gapClosed(same, eff(0.5, 0.4, 0.6)); g != 0 {
		t.Errorf("no gap: closed %g, want 0", g)
	}
}

// A complement is judged as a transplant is, the conclusion mirrored: the
// real workload with a synthetic property that reaches the synthetic
// conclusion, beyond the real effect's own interval, shows the real
// property necessary.
func TestNecessaryMirrors(t *testing.T) {
	o := DefaultOptions()
	c := conclusion("ttft_p50", eff(0.40, 0.30, 0.50), eff(0.00, -0.05, 0.05))
	m := c.mirrored()
	if m.Real != c.Synthetic || m.Synthetic != c.Real || m.Verdict != c.Verdict {
		t.Fatalf("mirrored %+v", m)
	}
	for _, tc := range []struct {
		name string
		e    Effect
		want bool
		gap  float64
	}{
		{"no effect left: the synthetic decision", eff(0.01, -0.04, 0.06), true, 0.975},
		{"smaller but still significant", eff(0.20, 0.10, 0.30), false, 0.5},
		{"within the real interval", eff(0.35, -0.05, 0.70), false, 0.125},
		{"larger than the real effect", eff(0.60, 0.50, 0.70), false, -0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := necessary(c, tc.e, &o); got != tc.want {
				t.Errorf("necessary = %v, want %v", got, tc.want)
			}
			if g := gapClosed(m, tc.e); math.Abs(g-tc.gap) > 1e-9 {
				t.Errorf("share of the way to the synthetic effect %g, want %g", g, tc.gap)
			}
		})
	}
}

// A transplant is named a reason when it restores a conclusion, or moves
// one beyond noise and closes at least a tenth of the gaps in the median.
func TestTransplantNamed(t *testing.T) {
	for _, tc := range []struct {
		tr   Transplant
		want bool
	}{
		{Transplant{Restored: 1}, true},
		{Transplant{Closes: true, GapClosed: 0.3}, true},
		{Transplant{Closes: true, GapClosed: 0.05}, false},
		{Transplant{Closes: false, GapClosed: 0.9}, false},
		{Transplant{Restored: 2, NotBuilt: "no sessions"}, false},
	} {
		if got := tc.tr.named(); got != tc.want {
			t.Errorf("%+v: named %v, want %v", tc.tr, got, tc.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		x    []float64
		want float64
	}{
		{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1}, 2}, {[]float64{5, 1, 3}, 3}, {[]float64{-1, 4, 2, 10}, 3},
	} {
		if got := median(tc.x); got != tc.want {
			t.Errorf("median(%v) = %g, want %g", tc.x, got, tc.want)
		}
	}
	x := []float64{3, 1, 2}
	median(x)
	if x[0] != 3 {
		t.Error("median sorted its argument")
	}
}

// gapText says how far a transplant went in words a reader can check
// against the numbers.
func TestGapText(t *testing.T) {
	for g, want := range map[float64]string{
		0.4:   "closes 40% of the gap",
		1:     "closes 100% of the gap",
		1.3:   "overshoots the real effect (median 130% of the gap)",
		-0.25: "moves away from the real effect (median -25% of the gap)",
	} {
		if got := gapText(g); got != want {
			t.Errorf("gapText(%g) = %q, want %q", g, got, want)
		}
	}
}

// A transplant whose property's figures moved further from the real ones
// did not carry the property: it is no reason, pairs are not drawn from
// it, and the headline says the property is untested.
func TestTransplantThatMovedAway(t *testing.T) {
	from := profile{reuse: 0.27}
	real := profile{reuse: 0.29}
	if !movedAway([]string{PropPrefixReuse}, from, profile{reuse: 0.11}, real) {
		t.Error("27% → 11% against a real 29% did not move away")
	}
	if movedAway([]string{PropPrefixReuse}, from, profile{reuse: 0.28}, real) || movedAway([]string{PropPrefixReuse}, from, profile{reuse: 0.30}, real) {
		t.Error("a figure that did not move, or moved past the real one closer than before, moved away")
	}
	// One figure towards, one away: carried in part.
	s := profile{turns: 2, growthTokens: 200, followUps: 0.5, turnGapS: 1, turnReuse: 0.5}
	realS := profile{turns: 3, growthTokens: 100, followUps: 0.5, turnGapS: 1, turnReuse: 0.5}
	if movedAway([]string{PropSessions}, s, profile{turns: 3, growthTokens: 300, followUps: 0.5, turnGapS: 1, turnReuse: 0.5}, realS) {
		t.Error("turns towards, growth away: not carried at all")
	}

	r := judged(on("ttft_p99", "b", VerdictReversed))
	away := single(r, PropPrefixReuse, restoring(r, "ttft_p99 of b"))
	away.MovedAway = true
	r.Ablation = &Ablation{Status: AblationRan, Targets: []string{"a", "b"}, Properties: []Transplant{away}}
	r.explain()
	if len(r.Reasons) != 0 || away.named() {
		t.Errorf("reasons %+v from a transplant that did not carry its property", r.Reasons)
	}
	if got := r.ablationSentence(); !strings.Contains(got, "The prefix reuse transplant did not carry the real prefix reuse (its figures moved away from them), so that property is untested.") {
		t.Errorf("headline %q", got)
	}
	if out := text(t, r); !strings.Contains(out, "not carried over (not a reason): prefix reuse: ") {
		t.Errorf("the report does not list it as not carried over:\n%s", out)
	}
	sr := &search{open: r.broken()}
	if c := sr.candidates(r.Ablation.Properties); len(c) != 0 {
		t.Errorf("pair candidates %q include a property not carried", c)
	}
}
