package validate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// Explain modes (Options.Explain): how validate explains a conclusion that
// does not hold.
const (
	// ExplainAuto runs the ablation when every target simulates offline
	// (seconds), and otherwise says what it would cost and gives the
	// prior instead.
	ExplainAuto = "auto"
	// ExplainNone runs no ablation: the reasons are the prior.
	ExplainNone = "none"
	// ExplainAblation runs the ablation whatever the targets are (replays
	// of URL targets take the workloads' duration each).
	ExplainAblation = "ablation"
)

// The options the result's notes name.
const (
	optExplain           traces.OptionRef = "Options.Explain"
	optCombinationBudget traces.OptionRef = "Options.CombinationBudget"
	optMinEffect         traces.OptionRef = "Options.MinEffect"
)

// ExplainModes lists the valid Options.Explain values.
var ExplainModes = []string{ExplainAuto, ExplainNone, ExplainAblation}

// Ablation statuses (Ablation.Status).
const (
	AblationRan       = "ran"
	AblationNotNeeded = "not needed"
	AblationSkipped   = "skipped"
	AblationOff       = "off"
)

// Ablation is the explanation of the broken conclusions by ablation: the
// synthetic workload with one property of the real one transplanted at a
// time, rerun on the baseline and the targets whose conclusions broke.
type Ablation struct {
	// Status is AblationRan, AblationNotNeeded (every conclusion holds),
	// AblationSkipped (replayed targets and Options.Explain auto: Note says
	// what it would cost) or AblationOff (Options.Explain none).
	Status string `json:"status"`
	// Note says why it did not run and what running it would cost.
	Note string `json:"note,omitempty"`
	// Targets are the targets the counterfactual workloads ran on.
	Targets []string `json:"targets,omitempty"`
	// Runs is the number of extra runs (simulations or replays), Seconds
	// their wall time.
	Runs    int     `json:"runs"`
	Seconds float64 `json:"seconds"`
	// Properties are the transplants in Properties order.
	Properties []Transplant `json:"properties,omitempty"`
	// Combination is the search for what restores the conclusions no
	// single transplant restores (nil when a single one restores each).
	Combination *Combination `json:"combination,omitempty"`
}

// Transplant is what transplanting one property of the real workload did
// to the conclusions that did not hold.
type Transplant struct {
	Property string `json:"property"`
	// NotBuilt says why the property could not be transplanted ("" = it
	// was).
	NotBuilt string `json:"not_built,omitempty"`
	// Requests is the counterfactual workload's size.
	Requests int `json:"requests,omitempty"`
	// Restored counts the conclusions that did not hold (Broken of them:
	// Result.Counts.Broken) that the counterfactual workload reaches as the
	// real one does (the same direction and significance; for a magnitude
	// that was off, a verdict of holds). RestoredDecisions are those of
	// them whose decision did not carry over (of Result.Counts.NotCarried);
	// the others had their size off.
	Restored          int `json:"restored"`
	RestoredDecisions int `json:"restored_decisions"`
	Broken            int `json:"broken"`
	// GapClosed is the median share of the way from the synthetic effect
	// to the real one that the transplant moves it: 1 = all the way, 0 =
	// not at all, above 1 past the real effect, below 0 away from it.
	GapClosed float64 `json:"gap_closed"`
	// Closes says the transplant moved at least one effect towards the
	// real one by more than the synthetic effect's own interval.
	Closes bool `json:"closes"`
	// Evidence is what the transplant changed: the figures of the
	// counterfactual workload that moved from the synthetic workload's,
	// each beside the real workload's.
	Evidence string `json:"evidence,omitempty"`
	// MovedAway says the transplant did not carry its property: the
	// property's figures moved further from the real workload's (matching
	// by rank cut it), none towards them. Such a transplant is no reason.
	MovedAway bool            `json:"moved_away,omitempty"`
	Effects   []AblatedEffect `json:"effects,omitempty"`
}

// AblatedEffect is one conclusion under a counterfactual workload.
type AblatedEffect struct {
	Metric string `json:"metric"`
	Target string `json:"target"`
	// Effect is the change under the counterfactual workload.
	Effect Effect `json:"effect"`
	// GapClosed is the share of the way from the effect the
	// counterfactual starts from (the synthetic one; for a complement, the
	// real one) to the other that Effect lies.
	GapClosed float64 `json:"gap_closed"`
	// Restores: the counterfactual reaches the real conclusion.
	Restores bool `json:"restores"`
	// Necessary (a complement): the real workload with the synthetic
	// property reaches the synthetic conclusion, so the real property is
	// necessary to the real one.
	Necessary bool `json:"necessary,omitempty"`
}

// named reports whether the transplant is a reason: it carried its
// property, and restores a conclusion or closes part of a gap beyond noise
// and at least minGapClosed of the gaps in the median.
func (t *Transplant) named() bool {
	return t.NotBuilt == "" && !t.MovedAway && (t.Restored > 0 || t.Closes && t.GapClosed >= minGapClosed)
}

// broken lists the conclusions that do not hold.
func (r *Result) broken() []Conclusion {
	var out []Conclusion
	for _, c := range r.Conclusions {
		if c.Verdict != VerdictHolds {
			out = append(out, c)
		}
	}
	return out
}

// ablate explains the broken conclusions by ablation, when Options.Explain
// and the targets allow it: one property at a time, then, for the
// conclusions no single property restores, the combination search.
func (r *Result) ablate(ctx context.Context, real, syn Workload) error {
	o := &r.opts
	broken := r.broken()
	a := &Ablation{}
	r.Ablation = a
	if len(broken) == 0 {
		a.Status = AblationNotNeeded
		return nil
	}
	targets := r.targetsOf(broken)
	allOffline := true
	for _, t := range targets {
		a.Targets = append(a.Targets, t.Name)
		allOffline = allOffline && offline(t, o)
	}
	switch {
	case o.Explain == ExplainNone:
		a.Status, a.Note = AblationOff, traces.Textf("no ablation (%s %s): the reasons are a prior from what the change acts through, not a proof", optExplain, ExplainNone).Say(o.Terms)
		return nil
	case o.Explain == ExplainAuto && !allOffline:
		a.Status, a.Note = AblationSkipped, r.ablationCost(real, syn, targets)
		return nil
	}
	a.Status = AblationRan
	start := time.Now()
	defer func() { a.Seconds = time.Since(start).Seconds() }()
	ab := newAblator(r, real, syn)
	for pi, prop := range Properties {
		tr, err := ab.single(ctx, uint64(1_000_000+1000*pi), prop, targets, broken)
		if err != nil {
			return err
		}
		a.Properties = append(a.Properties, tr)
	}
	c, err := ab.combine(ctx, a.Properties, broken)
	a.Combination = c
	return err
}

// targetsOf is the baseline and every target of cs, in Options.Targets
// order.
func (r *Result) targetsOf(cs []Conclusion) []Target {
	var out []Target
	for _, t := range r.opts.Targets {
		if t.Name == r.Baseline || slices.ContainsFunc(cs, func(c Conclusion) bool { return c.Target == t.Name }) {
			out = append(out, t)
		}
	}
	return out
}

// ablator runs the counterfactual workloads of an ablation and measures
// them against the conclusions they are built for.
type ablator struct {
	r         *Result
	real, syn Workload
	// prof are the real and the synthetic workloads' figures, which every
	// counterfactual's evidence is read against.
	prof      [2]profile
	blockSize int
	runs      int // extra runs so far
}

func newAblator(r *Result, real, syn Workload) *ablator {
	bs := r.opts.Replay.BlockSize
	return &ablator{r: r, real: real, syn: syn, blockSize: bs, prof: [2]profile{profileOf(real, bs), profileOf(syn, bs)}}
}

// single transplants prop of the real workload into the synthetic one,
// runs it on targets and measures it against broken.
func (ab *ablator) single(ctx context.Context, seed uint64, prop string, targets []Target, broken []Conclusion) (Transplant, error) {
	tr := Transplant{Property: prop, Broken: len(broken)}
	w, why := transplant(prop, ab.real, ab.syn, ab.blockSize)
	if why != "" {
		tr.NotBuilt = why
		return tr, nil
	}
	tr.Requests = len(w.reqs)
	pw := profileOf(w, ab.blockSize)
	tr.Evidence = moved([]string{prop}, ab.prof[1], pw, ab.prof[0], ab.syn.Name, ab.real.Name)
	tr.MovedAway = movedAway([]string{prop}, ab.prof[1], pw, ab.prof[0])
	effects, err := ab.measure(ctx, w, targets, broken, seed)
	if err != nil {
		return tr, err
	}
	var gaps []float64
	for _, ae := range effects {
		c := conclusionOf(broken, ae)
		if ae.Restores {
			tr.Restored++
			if !carriesOver(c) {
				tr.RestoredDecisions++
			}
		}
		if movesTowardReal(c, ae.Effect) {
			tr.Closes = true
		}
		gaps = append(gaps, ae.GapClosed)
	}
	tr.Effects, tr.GapClosed = effects, median(gaps)
	return tr, nil
}

// measure runs w on targets and measures its effect on each of cs (those
// it has a value for), as a transplant does: moved from the synthetic
// effect towards the real one. seed picks the bootstrap's streams.
func (ab *ablator) measure(ctx context.Context, w Workload, targets []Target, cs []Conclusion, seed uint64) ([]AblatedEffect, error) {
	o, r := &ab.r.opts, ab.r
	samples := map[string]sample{}
	for _, t := range targets {
		s, n, err := measure(ctx, w, t, o, r)
		ab.runs += n
		r.Ablation.Runs += n
		if err != nil {
			return nil, fmt.Errorf("ablation: %s on target %s: %w", w.Name, t.Name, err)
		}
		samples[t.Name] = s
		if o.Log != nil {
			fmt.Fprintf(o.Log, "validate: ablation: %s on %s (%d requests)\n", w.Name, t.Name, len(w.reqs))
		}
	}
	var out []AblatedEffect
	for ci, c := range cs {
		e, ok := effect(samples[r.Baseline], samples[c.Target], r.metric(c.Metric), o, seed+uint64(ci))
		if !ok {
			continue
		}
		out = append(out, AblatedEffect{Metric: c.Metric, Target: c.Target, Effect: e, GapClosed: gapClosed(c, e), Restores: restores(c, e, o)})
	}
	return out, nil
}

// conclusionOf is the conclusion of cs an effect was measured for.
func conclusionOf(cs []Conclusion, ae AblatedEffect) Conclusion {
	for _, c := range cs {
		if c.Metric == ae.Metric && c.Target == ae.Target {
			return c
		}
	}
	return Conclusion{}
}

// name is a conclusion as reports list it: "ttft_p99 of pa".
func (c Conclusion) name() string { return c.Metric + " of " + c.Target }

// ablationCost says what an ablation over replayed targets would cost.
func (r *Result) ablationCost(real, syn Workload, targets []Target) string {
	o := &r.opts
	var props, runs int
	var secs float64
	for _, prop := range Properties {
		w, why := transplant(prop, real, syn, o.Replay.BlockSize)
		if why != "" {
			continue
		}
		props++
		span := spanS(w)
		for _, t := range targets {
			n := runsOf(t, o)
			runs += n
			if !offline(t, o) {
				secs += float64(n) * span / o.Speed
			}
		}
	}
	note := fmt.Sprintf("ablation not run: the targets are replayed in real time, so it would take %d more runs (%d counterfactual workloads on %s), about %s of replay", runs, props, targetNames(targets), fmtSeconds(secs))
	if b := o.CombinationBudget; b > 0 {
		note += traces.Textf(", and up to %d more (%s) where no single property restores a conclusion", b, optCombinationBudget).Say(o.Terms)
	}
	return note + traces.Textf("; run it with %s %s", optExplain, ExplainAblation).Say(o.Terms)
}

// spanS is a loaded workload's span in seconds.
func spanS(w Workload) float64 {
	if len(w.reqs) == 0 {
		return 0
	}
	return float64(w.reqs[len(w.reqs)-1].arrival-w.reqs[0].arrival) / 1e9
}

func targetNames(ts []Target) string {
	var n []string
	for _, t := range ts {
		n = append(n, t.Name)
	}
	return strings.Join(n, ", ")
}

func fmtSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute).String()
	case d >= time.Minute:
		return d.Round(time.Second).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

// gapClosed is the share of the way from the synthetic effect to the real
// one that e lies: (e − synthetic) / (real − synthetic), 1 at the real
// effect, above 1 past it, below 0 on the far side of the synthetic one
// (0 when there was no gap).
func gapClosed(c Conclusion, e Effect) float64 {
	gap := c.Real.Change - c.Synthetic.Change
	if gap == 0 {
		return 0
	}
	return (e.Change - c.Synthetic.Change) / gap
}

// minGapClosed is the share of a gap a transplant must close, beyond the
// synthetic effect's own interval, to count as part of the reason.
const minGapClosed = 0.10

// movesTowardReal: e closes at least minGapClosed of the gap to the real
// effect and lies outside the synthetic effect's interval (a move beyond
// its noise).
func movesTowardReal(c Conclusion, e Effect) bool {
	return gapClosed(c, e) >= minGapClosed && outside(e, c.Synthetic)
}

// outside reports whether e lies outside s's interval: a move beyond the
// synthetic effect's own noise (a decision that flips within it proves
// nothing).
func outside(e, s Effect) bool { return e.Change < s.CILow || e.Change > s.CIHigh }

// decision is an effect as a decision reads it: its direction when
// significant, else 0 (no difference).
func decision(e Effect) int {
	switch {
	case !e.Significant:
		return 0
	case e.Change > 0:
		return 1
	}
	return -1
}

// restores reports whether e reaches the real conclusion where the
// synthetic one did not: the same decision (direction and significance),
// moved from the synthetic effect towards the real one (past it counts)
// and out of the synthetic effect's interval, and for a conclusion whose
// decision already carried over (magnitude off), a verdict of holds.
func restores(c Conclusion, e Effect, o *Options) bool {
	if decision(e) != decision(c.Real) || gapClosed(c, e) <= 0 || !outside(e, c.Synthetic) {
		return false
	}
	if c.Verdict == VerdictMagnitudeOff {
		return verdict(c.Real, e, o) == VerdictHolds
	}
	return true
}

// mirrored is c seen from the other side: the real and the synthetic
// effects swapped, so that a complement (the real workload with one
// property of the synthetic one) is judged as a transplant is.
func (c Conclusion) mirrored() Conclusion {
	c.Real, c.Synthetic = c.Synthetic, c.Real
	return c
}

// necessary reports whether e, the effect on the real workload with one
// property of the synthetic one, reaches the synthetic conclusion where
// the real workload did not (restores, mirrored): without its own
// property the real workload decides as the synthetic one does, so that
// property is necessary to the real conclusion.
func necessary(c Conclusion, e Effect, o *Options) bool { return restores(c.mirrored(), e, o) }

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func (r *Result) metric(name string) Metric {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m
		}
	}
	return Metric{Name: name}
}
