package validate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/synth"
)

// NextStep is a change to the synthetic workload that the reasons support:
// what to change and, where one exists, the command that makes it.
type NextStep struct {
	// Property is the reason's property, Evidence its evidence.
	Property string `json:"property"`
	Evidence string `json:"evidence"`
	// Change says what to change and why, in a sentence.
	Change string `json:"change"`
	// Commands make the change, in order (the files as validate was given
	// them; a name in capitals where it does not know one).
	Commands []string `json:"commands,omitempty"`
}

// How the synthetic workload was made, from its metadata.
const (
	sourceMatrix = "synth:matrix"
	sourceGen    = "synth:gen"
)

// nextSteps turns the reasons into changes: for each reason proven or
// moved by the ablation (or, without one, the prior's first two), the
// change to the synthetic workload that carries the property over.
func (r *Result) nextSteps(real, syn Workload) []NextStep {
	var out []NextStep
	given := map[string]bool{}
	for _, rs := range r.Reasons {
		if rs.Evidence == EvidenceDifference || len(out) == 2 {
			break
		}
		st := r.stepFor(rs.Property, real, syn)
		if st.Change == "" {
			continue
		}
		st.Evidence = rs.Evidence
		// A command an earlier step gives is not repeated.
		cmds := st.Commands[:0:0]
		for _, c := range st.Commands {
			if !given[c] {
				cmds = append(cmds, c)
			}
			given[c] = true
		}
		if len(cmds) == 0 && len(st.Commands) > 0 {
			st.Change += " (the commands above)"
		}
		st.Commands = cmds
		out = append(out, st)
	}
	return out
}

// quoteArg quotes a shell argument that needs it.
func quoteArg(s string) string {
	if s != "" && strings.IndexFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./=:@,+", c))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (r *Result) stepFor(prop string, real, syn Workload) NextStep {
	st := NextStep{Property: prop}
	f := r.Fidelity
	if f == nil {
		return st
	}
	realF := real.File
	if realF == "" {
		realF = "REAL.parquet"
	}
	// The model a synthetic trace from synth gen was drawn from.
	model := "MODEL.json"
	if strings.HasSuffix(strings.ToLower(syn.File), ".json") {
		model = syn.File
	}
	gen := func(flags, model string) string {
		return "tokentrace synth gen --seed 1 " + flags + "--out synth.parquet " + quoteArg(model)
	}
	fitGen := []string{"tokentrace synth fit --out model.json " + quoteArg(realF), gen("", "model.json")}
	source := syn.Meta.Source
	switch prop {
	case PropPrefixReuse:
		reuse := f.Real.PrefixReuse
		switch {
		case source == sourceMatrix:
			if cmd, ok := matrixCommand(syn, reuse, 1); ok {
				st.Change = fmt.Sprintf("give the matrix rows warm shared prefixes of the real share of prompt tokens (%.0f%%), or fit a model on the real trace, which keeps its prefix categories and block reuse", 100*reuse)
				st.Commands = append([]string{cmd}, fitGen...)
				return st
			}
			st.Change = "fit a model on the real trace and generate from it: the model keeps the real prefix categories and block reuse"
			st.Commands = fitGen
		case source == sourceGen && f.CategoryShareMaxDiff > synth.DefaultShareDiff:
			if mix, ok := realMix(f); ok {
				st.Change = fmt.Sprintf("the synthetic prefix reuse is %.0f%% against the real %.0f%%, and the category shares differ by up to %.0f points (%s): generate with the real category shares",
					100*f.Synth.PrefixReuse, 100*reuse, 100*f.CategoryShareMaxDiff, f.CategoryShareMaxDiffName)
				st.Commands = []string{gen("--mix "+quoteArg(mix)+" ", model)}
				return st
			}
			fallthrough
		case source == sourceGen:
			st.Change = fmt.Sprintf("the fitted model reuses prefixes differently from the real trace (%.0f%% of prefix blocks reused, real %.0f%%) with the same categories: fit it on a longer window of the real trace, so that its reuse distances are measured over more requests",
				100*f.Synth.PrefixReuse, 100*reuse)
		default:
			st.Change = "fit a model on the real trace and generate from it: the model keeps the real prefix categories and block reuse"
			st.Commands = fitGen
		}
	case PropPromptLengths, PropOutputLengths:
		what, rm, sm := "prompt", f.Real.MeanInput, f.Synth.MeanInput
		if prop == PropOutputLengths {
			what, rm, sm = "output", f.Real.MeanOutput, f.Synth.MeanOutput
		}
		switch {
		case source == sourceGen && sm > 0 && math.Abs(rm/sm-1) > 0.10:
			scale := metaFloat(syn, "synth.length_scale", 1) * rm / sm
			st.Change = fmt.Sprintf("the synthetic %s lengths are %.2f× the real ones on average: scale them back (--length-scale scales prompts, outputs and prefixes together)", what, sm/rm)
			st.Commands = []string{gen(fmt.Sprintf("--length-scale %.3g ", scale), model)}
		case source == sourceGen:
			st.Change = fmt.Sprintf("the fitted %s lengths are near the real ones on average (%.0f against %.0f tokens) but their distribution differs: the model's histograms hold at least %d values per bin, which smooths a short trace; fit on a longer window of the real trace (or with a smaller --min-bin-count)",
				what, sm, rm, synth.DefaultMinBinCount)
		case source == sourceMatrix:
			st.Change = fmt.Sprintf("a fixed-length matrix cannot carry the real %s length mix (mean %.0f tokens, and its spread): fit a model on the real trace instead", what, rm)
			st.Commands = fitGen
		default:
			st.Change = fmt.Sprintf("fit a model on the real trace and generate from it: it keeps the real %s length distribution (mean %.0f tokens)", what, rm)
			st.Commands = fitGen
		}
	case PropArrivals:
		rateOff := f.Synth.RatePerS > 0 && math.Abs(f.Real.RatePerS/f.Synth.RatePerS-1) > 0.10
		switch {
		case source == sourceGen && rateOff:
			scale := metaFloat(syn, "synth.rate_scale", 1) * f.Real.RatePerS / f.Synth.RatePerS
			st.Change = fmt.Sprintf("the synthetic rate is %.2f req/s against the real %.2f: scale the model's arrivals", f.Synth.RatePerS, f.Real.RatePerS)
			st.Commands = []string{gen(fmt.Sprintf("--rate-scale %.3g ", scale), model)}
		case source == sourceGen:
			st.Change = fmt.Sprintf("the synthetic arrivals are %s bursty than the real ones (inter-arrival CV %.2f against %.2f): fit the model with narrower rate bins so that shorter bursts survive", moreOrLess(f.Synth.CV, f.Real.CV), f.Synth.CV, f.Real.CV)
			st.Commands = []string{"tokentrace synth fit --bin 1s --out model.json " + quoteArg(realF), gen("", "model.json")}
		case source == sourceMatrix:
			st.Change = fmt.Sprintf("matrix rows arrive at fixed Poisson rates; the real traffic comes at %.2f req/s with bursts (inter-arrival CV %.2f): fit a model on the real trace, whose arrivals follow the real rate per 4 s and the gaps within", f.Real.RatePerS, f.Real.CV)
			st.Commands = fitGen
			if cmd, ok := matrixCommand(syn, -1, f.Real.RatePerS/f.Synth.RatePerS); ok && rateOff {
				st.Change += fmt.Sprintf(", or at least run the rows at the real mean rate (×%.2f)", f.Real.RatePerS/f.Synth.RatePerS)
				st.Commands = append(st.Commands, cmd)
			}
		default:
			st.Change = fmt.Sprintf("fit a model on the real trace and generate from it: it keeps the real rate over time (%.2f req/s) and burstiness (CV %.2f)", f.Real.RatePerS, f.Real.CV)
			st.Commands = fitGen
		}
	case PropSessions:
		if source == sourceGen {
			st.Change = fmt.Sprintf("the real conversations (%.1f turns per session) and the synthetic ones (%.1f) differ: fit the model on a longer window of the real trace, so that turns, context growth and think times are measured over more sessions", f.Real.TurnsPerSess, f.Synth.TurnsPerSess)
			return st
		}
		st.Change = fmt.Sprintf("the real traffic is conversations (%.1f turns per session, each turn resending the previous context): fit a model on the real trace, which keeps its follow-up turns and their context growth", f.Real.TurnsPerSess)
		st.Commands = fitGen
	}
	return st
}

// realMix is the real category shares as synth gen's --mix, when the
// categories can be mixed (named, not derived from prefix blocks, and all
// of them listed).
func realMix(f *synth.Report) (string, bool) {
	if f.Real.Categories > len(f.Real.CategoryShares) {
		return "", false
	}
	names := make([]string, 0, len(f.Real.CategoryShares))
	for k := range f.Real.CategoryShares {
		if strings.HasPrefix(k, "prefix-") {
			return "", false
		}
		names = append(names, k)
	}
	slices.Sort(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s=%.3g", k, f.Real.CategoryShares[k]))
	}
	return strings.Join(parts, ","), len(parts) > 0
}

func moreOrLess(a, b float64) string {
	if a > b {
		return "more"
	}
	return "less"
}

func metaFloat(w Workload, key string, def float64) float64 {
	if v, err := strconv.ParseFloat(w.Meta.Get(key), 64); err == nil && v > 0 {
		return v
	}
	return def
}

// matrixCommand rebuilds the synth matrix command of syn (from its
// metadata) with every row given a warm shared prefix of share × its
// prompt length (share < 0: the rows keep their prefixes) and its rate
// multiplied by rateScale.
func matrixCommand(syn Workload, share, rateScale float64) (string, bool) {
	rows, err := synth.ParseRows(syn.Meta.Get("synth.rows"))
	if err != nil {
		return "", false
	}
	var specs []string
	for _, row := range rows {
		load := "sat"
		if !row.Saturation {
			load = strconv.FormatFloat(row.RatePerS, 'g', -1, 64) + "rps"
			if rateScale != 1 {
				load = strconv.FormatFloat(row.RatePerS*rateScale, 'g', 3, 64) + "rps"
			}
		}
		p := row.PrefixTokens
		if share >= 0 {
			p = min(int32(math.Round(share*float64(row.InputTokens))), row.InputTokens)
		}
		spec := fmt.Sprintf("%d/%d@%s", row.InputTokens, row.OutputTokens, load)
		if p >= 1 {
			spec = fmt.Sprintf("%d/%d+%dw@%s", row.InputTokens, row.OutputTokens, p, load)
		}
		specs = append(specs, spec)
	}
	cmd := "tokentrace synth matrix --rows " + quoteArg(strings.Join(specs, ","))
	flag := func(key, name string, def string, format func(string) string) {
		if v := syn.Meta.Get(key); v != "" && v != def {
			cmd += " --" + name + " " + format(v)
		}
	}
	dur := func(v string) string {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return v
		}
		return time.Duration(n).String()
	}
	same := func(v string) string { return v }
	flag("synth.row_duration_ns", "row-duration", strconv.FormatInt(int64(synth.DefaultRowDuration), 10), dur)
	flag("synth.sat_requests", "sat-requests", strconv.Itoa(synth.DefaultSatRequests), same)
	flag("synth.row_gap_ns", "row-gap", strconv.FormatInt(int64(synth.DefaultRowGap), 10), dur)
	flag("synth.arrival", "arrival", synth.MatrixArrivalPoisson, same)
	flag("synth.seed", "seed", strconv.Itoa(synth.DefaultMatrixSeed), same)
	out := syn.File
	if out == "" || strings.HasSuffix(strings.ToLower(out), ".json") {
		out = "matrix.parquet"
	}
	return cmd + " --out " + quoteArg(out), true
}
