package validate

import (
	"context"
	"math"
	"slices"
	"strings"
)

// Kinds of the combination search's counterfactual workloads.
const (
	// CounterfactualComplement is the real workload with one property of
	// the synthetic one: when it reaches the synthetic conclusion, the real
	// property is necessary to the real one.
	CounterfactualComplement = "complement"
	// CounterfactualPair is the synthetic workload with two properties of
	// the real one: when it reaches the real conclusion, the two together
	// restore it.
	CounterfactualPair = "pair"
)

// Combination is the ablation's search for what restores the conclusions
// that no single transplant restores: the complements (is a real property
// necessary?), then pairs of the properties that came nearest (are two
// enough together?), within a budget of extra runs.
type Combination struct {
	// Conclusions are the conclusions searched for ("ttft_p99 of pa"):
	// those no single transplant restores.
	Conclusions []string `json:"conclusions"`
	// Budget is the most extra runs the search may take
	// (Options.CombinationBudget; 0 when it is off), Runs the runs it took.
	Budget int `json:"budget"`
	Runs   int `json:"runs"`
	// Tried are the counterfactual workloads, in the order tried.
	Tried []Counterfactual `json:"tried,omitempty"`
	// Left are the counterfactual workloads the budget left unrun
	// ("complement: arrivals", "pair: prompt lengths and arrivals").
	Left []string `json:"left,omitempty"`
}

// Counterfactual is one workload of the combination search and what it did
// to the conclusions searched for.
type Counterfactual struct {
	// Kind is CounterfactualComplement or CounterfactualPair.
	Kind       string   `json:"kind"`
	Properties []string `json:"properties"`
	// NotBuilt says why it could not be built ("" = it was).
	NotBuilt string `json:"not_built,omitempty"`
	Requests int    `json:"requests,omitempty"`
	// Reaches counts the conclusions searched for whose decision it
	// reaches: a pair the real one (it restores them), a complement the
	// synthetic one (the real property is necessary to them).
	Reaches int `json:"reaches"`
	// GapClosed is the median share of the way from the effect it starts
	// from to the other: a pair from the synthetic effect towards the real
	// one, a complement from the real effect towards the synthetic one.
	GapClosed float64 `json:"gap_closed"`
	// Evidence is what it changed: its figures that moved from those of the
	// workload it was built from, each beside the lending workload's.
	Evidence string `json:"evidence,omitempty"`
	// MovedAway says it did not carry its properties (their figures moved
	// further from the lending workload's, none towards them): what it
	// reaches proves nothing, and it counts as no finding.
	MovedAway bool            `json:"moved_away,omitempty"`
	Effects   []AblatedEffect `json:"effects,omitempty"`
}

// Label names a counterfactual: "complement: arrivals", "pair: prompt
// lengths and arrivals".
func (cf *Counterfactual) Label() string {
	return cf.Kind + ": " + strings.Join(cf.Properties, " and ")
}

// reached lists the conclusions it reaches ("ttft_p99 of pa").
func (cf *Counterfactual) reached() []string {
	var out []string
	for _, e := range cf.Effects {
		if e.Restores || e.Necessary {
			out = append(out, e.Metric+" of "+e.Target)
		}
	}
	return out
}

// maxPairCandidates is how many of the nearest properties the pairs are
// drawn from (3 pairs).
const maxPairCandidates = 3

// search is one combination search under way.
type search struct {
	ab      *ablator
	c       *Combination
	open    []Conclusion // those no single transplant restores
	targets []Target
	cost    int // runs of one counterfactual workload
}

// combine searches what restores the conclusions of broken that no single
// transplant (singles) restores, within Options.CombinationBudget extra
// runs: first every complement, most promising first, then the pairs of
// the maxPairCandidates properties that came nearest (as a transplant or
// as a complement), until each conclusion has a pair that restores it.
// It returns nil when every conclusion has a single transplant that
// restores it.
func (ab *ablator) combine(ctx context.Context, singles []Transplant, broken []Conclusion) (*Combination, error) {
	var open []Conclusion
	for _, c := range broken {
		if !slices.ContainsFunc(singles, func(t Transplant) bool { return restoresIn(t.Effects, c) }) {
			open = append(open, c)
		}
	}
	if len(open) == 0 {
		return nil, nil
	}
	o := &ab.r.opts
	s := &search{ab: ab, c: &Combination{Budget: o.CombinationBudget}, open: open, targets: ab.r.targetsOf(open)}
	for _, c := range open {
		s.c.Conclusions = append(s.c.Conclusions, c.name())
	}
	for _, t := range s.targets {
		s.cost += runsOf(t, o)
	}
	order := slices.Clone(Properties)
	score := func(p string) float64 { return s.singleGap(singles, p) }
	slices.SortStableFunc(order, func(a, b string) int { return -cmpFloat(score(a), score(b)) })
	seed := uint64(2_000_000)
	for _, p := range order {
		if err := s.try(ctx, CounterfactualComplement, []string{p}, seed); err != nil {
			return s.c, err
		}
		seed += 1000
	}
	cands := s.candidates(singles)
	for i := range cands {
		for j := i + 1; j < len(cands) && !s.allRestored(); j++ {
			if err := s.try(ctx, CounterfactualPair, []string{cands[i], cands[j]}, seed); err != nil {
				return s.c, err
			}
			seed += 1000
		}
	}
	return s.c, nil
}

// restoresIn reports whether effects restore c.
func restoresIn(effects []AblatedEffect, c Conclusion) bool {
	return slices.ContainsFunc(effects, func(e AblatedEffect) bool {
		return e.Restores && e.Metric == c.Metric && e.Target == c.Target
	})
}

// try builds one counterfactual workload and, when the budget allows, runs
// it and measures it against the open conclusions (a complement against
// them mirrored: from the real effect towards the synthetic one).
func (s *search) try(ctx context.Context, kind string, props []string, seed uint64) error {
	ab := s.ab
	cf := Counterfactual{Kind: kind, Properties: props}
	var w Workload
	var from, lender profile
	cs := s.open
	if kind == CounterfactualComplement {
		w, cf.NotBuilt = transplant(props[0], ab.syn, ab.real, ab.blockSize)
		from, lender = ab.prof[0], ab.prof[1]
		cs = make([]Conclusion, len(s.open))
		for i, c := range s.open {
			cs[i] = c.mirrored()
		}
	} else {
		w, cf.NotBuilt = transplantAll(props, ab.real, ab.syn, ab.blockSize)
		from, lender = ab.prof[1], ab.prof[0]
	}
	if cf.NotBuilt != "" {
		s.c.Tried = append(s.c.Tried, cf)
		return nil
	}
	if len(s.c.Left) > 0 || s.c.Runs+s.cost > s.c.Budget {
		s.c.Left = append(s.c.Left, cf.Label())
		return nil
	}
	cf.Requests = len(w.reqs)
	fromName, lenderName := ab.syn.Name, ab.real.Name
	if kind == CounterfactualComplement {
		fromName, lenderName = lenderName, fromName
	}
	pw := profileOf(w, ab.blockSize)
	cf.Evidence = moved(props, from, pw, lender, fromName, lenderName)
	cf.MovedAway = movedAway(props, from, pw, lender)
	before := ab.runs
	effects, err := ab.measure(ctx, w, s.targets, cs, seed)
	s.c.Runs += ab.runs - before
	if err != nil {
		return err
	}
	var gaps []float64
	for i := range effects {
		e := &effects[i]
		if kind == CounterfactualComplement {
			e.Necessary, e.Restores = e.Restores, false
		}
		if cf.MovedAway {
			e.Restores, e.Necessary = false, false
		}
		if e.Restores || e.Necessary {
			cf.Reaches++
		}
		gaps = append(gaps, e.GapClosed)
	}
	cf.Effects, cf.GapClosed = effects, median(gaps)
	s.c.Tried = append(s.c.Tried, cf)
	return nil
}

// singleGap is the median share of the gap the single transplant of prop
// closed on the open conclusions (−∞ when it was not built).
func (s *search) singleGap(singles []Transplant, prop string) float64 {
	for _, t := range singles {
		if t.Property != prop || t.NotBuilt != "" {
			continue
		}
		var gaps []float64
		for _, e := range t.Effects {
			if slices.ContainsFunc(s.open, func(c Conclusion) bool { return c.Metric == e.Metric && c.Target == e.Target }) {
				gaps = append(gaps, e.GapClosed)
			}
		}
		return median(gaps)
	}
	return math.Inf(-1)
}

// candidates are the properties pairs are drawn from: those whose single
// transplant was built and carried them, nearest first by the larger of
// the share of the gap their transplant closed and the share their
// complement opened, at most maxPairCandidates.
func (s *search) candidates(singles []Transplant) []string {
	score := map[string]float64{}
	var out []string
	for _, p := range Properties {
		g := s.singleGap(singles, p)
		if math.IsInf(g, -1) || slices.ContainsFunc(singles, func(t Transplant) bool { return t.Property == p && t.MovedAway }) {
			continue
		}
		for _, cf := range s.c.Tried {
			if cf.Kind == CounterfactualComplement && cf.Properties[0] == p && cf.NotBuilt == "" && !cf.MovedAway {
				g = max(g, cf.GapClosed)
			}
		}
		score[p] = g
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(a, b string) int { return -cmpFloat(score[a], score[b]) })
	return out[:min(len(out), maxPairCandidates)]
}

// allRestored reports whether some pair tried restores every open
// conclusion.
func (s *search) allRestored() bool {
	for _, c := range s.open {
		if !slices.ContainsFunc(s.c.Tried, func(cf Counterfactual) bool {
			return cf.Kind == CounterfactualPair && restoresIn(cf.Effects, c)
		}) {
			return false
		}
	}
	return true
}
