package synth

import (
	"cmp"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// Sources of a synthetic trace (its Meta.Source) that Advise knows.
const (
	SourceGen    = "synth:gen"
	SourceMatrix = "synth:matrix"
)

// Advise fills each failed check's Affects and Fix for a synthetic trace
// made by source (its Meta.Source: SourceGen, SourceMatrix, or anything
// else for a trace of unknown making), with the commands naming the real
// trace realFile ("" = REAL), the options and commands they name said in
// terms (nil: the libraries' names). Check advises as for an unknown
// source.
func (r *Report) Advise(source, realFile string, terms traces.Terms) {
	for i := range r.Checks {
		if c := &r.Checks[i]; !c.Pass {
			affects, fix := r.advice(c.Name, source, realFile)
			c.Affects, c.Fix = affects.Say(terms), fix.Say(terms)
			if realFile != "" {
				c.Fix = strings.ReplaceAll(c.Fix, " REAL", " "+quoteArg(realFile))
			}
		}
	}
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

// advice says, for a failed check, which conclusions a benchmark on the
// synthetic trace can get wrong because of it, and what to change in the
// synthetic trace (an option or a command; REAL stands for the real
// trace).
func (r *Report) advice(name, source, realFile string) (affects, fix traces.Text) {
	a, f := r.adviceWords(name, source, realFile)
	return traces.Textf(a.format, a.args...), traces.Textf(f.format, f.args...)
}

// words are a sentence as a format and its arguments (options and
// commands among them) for traces.Textf.
type words struct {
	format string
	args   []any
}

// add is w followed by format with its arguments.
func (w words) add(format string, args ...any) words {
	return words{w.format + format, append(w.args[:len(w.args):len(w.args)], args...)}
}

// wordsf is format with its arguments.
func wordsf(format string, args ...any) words { return words{format, args} }

// adviceWords are advice's sentences, before they are said.
func (r *Report) adviceWords(name, source, realFile string) (affects, fix words) {
	real := cmp.Or(realFile, "REAL")
	fitGen := wordsf("generate from a model fitted on the real trace (%s, then synth gen … model.json)", traces.NewCommand("synth", "fit").With(traces.CommandOut, "model.json").WithArgs(real))
	lengths := func(real, syn float64, what string, option traces.OptionRef) words {
		scale, ok := r.lengthScale(real, syn, what, option)
		switch {
		case source == SourceGen && ok:
			return scale
		case source == SourceGen:
			return wordsf("the model's length histograms hold at least %d values per bin, which smooths a short trace: fit on a longer window of the real trace (or with a smaller %s)", DefaultMinBinCount, traces.OptionRef("FitOptions.MinBinCount"))
		case source == SourceMatrix:
			return wordsf("a fixed-length matrix cannot match a spread of lengths: ").add(fitGen.format, fitGen.args...)
		}
		w := fitGen.add("; a fixed-length matrix cannot match a spread of lengths")
		if ok {
			w = w.add("; ").add(scale.format, scale.args...)
		}
		return w
	}
	switch name {
	case "ks.input_tokens":
		affects = wordsf("prefill time and TTFT, KV-cache use and how prompts share a batch: conclusions about prefill speed, max-num-batched-tokens, chunked prefill and KV-cache size")
		fix = lengths(r.Real.MeanInput, r.Synth.MeanInput, "prompts", "GenOptions.InputLengthScale")
	case "ks.output_tokens":
		affects = wordsf("decode time, TPOT and E2E, and how long a request holds its batch slot and KV cache: conclusions about decode speed and max-num-seqs")
		fix = lengths(r.Real.MeanOutput, r.Synth.MeanOutput, "outputs", "GenOptions.OutputLengthScale")
	case "ks.interarrival", "cv", "dispersion.1s", "dispersion.10s", "dispersion.60s":
		affects = wordsf("queueing under bursts and so the tail (p99 TTFT): conclusions about max-num-seqs, queue limits and how many replicas a load needs (inter-arrival CV %.2f real, %.2f synthetic)", r.Real.CV, r.Synth.CV)
		fix = wordsf("fit with narrower rate bins so that shorter bursts survive (%s 1s), and keep %s empirical (the default)", traces.OptionRef("FitOptions.Bin"), traces.OptionRef("GenOptions.Gaps"))
		switch {
		case r.SessionGaps != "":
			affects = wordsf("when a session's turns are sent in an open-loop replay, so how its requests overlap: conclusions about queueing and the tail")
			fix = wordsf("the gaps between a session's turns come from the model's sessions.inter_turn_gap_s: ").add(fitGen.format, fitGen.args...)
			if source == SourceGen {
				fix = wordsf("the gaps between a session's turns come from the model's sessions.inter_turn_gap_s: fit the model on REAL itself")
			}
		case source == SourceMatrix:
			fix = wordsf("a matrix's Poisson rows are never bursty: ").add(fitGen.format, fitGen.args...)
		}
	case "rate_error":
		affects = wordsf("the load, and with it every latency percentile: capacity conclusions (how much traffic before the SLO breaks)")
		fix = wordsf("match the real rate (%.3g req/s, synthetic %.3g)", r.Real.RatePerS, r.Synth.RatePerS)
		switch {
		case r.Synth.RatePerS <= 0:
		case source == SourceMatrix:
			fix = fix.add(": multiply the rows' RATErps by %.3g, or ", r.Real.RatePerS/r.Synth.RatePerS).add(fitGen.format, fitGen.args...).add(", which follows the real rate over time")
		default:
			fix = fix.add(": multiply %s by %.3g, or cover the same span with %s", traces.OptionRef("GenOptions.RateScale"), r.Real.RatePerS/r.Synth.RatePerS, traces.OptionRef("GenOptions.Duration"))
		}
	case "category_share_max_diff":
		affects = wordsf("which shared prefixes recur, so prefix-cache hits and the length mix: conclusions about prefix caching and routing")
		fix = wordsf("the shares differ most at %q", r.CategoryShareMaxDiffName)
		if mix, ok := r.RealMix(); ok && source != SourceMatrix {
			fix = fix.add("; generate with the real shares of requests: %s %s", traces.OptionRef("GenOptions.Mix"), mix)
		} else {
			fix = fix.add("; ").add(fitGen.format, fitGen.args...)
		}
	case "prefix_reuse":
		affects = wordsf("prefix-cache hits, so the prefill work and TTFT: conclusions about prefix caching, KV-cache size and cache-aware routing (real reuse %.0f%%, synthetic %.0f%%)", 100*r.Real.PrefixReuse, 100*r.Synth.PrefixReuse)
		fix = fitGen.add(" (it keeps the categories and block reuse)")
		if source == SourceGen {
			fix = wordsf("the model reuses blocks as it measured them on the window it was fitted on: fit it on this real trace (or a longer window of it); %s shifts the category shares", traces.OptionRef("GenOptions.Mix"))
		}
		if r.Real.PrefixReuse >= 0.01 && source != SourceGen {
			fix = fix.add("; in synth matrix, give the rows a warm shared prefix of about %.0f%% of IN (IN/OUT+PREFIXw@RATErps)", 100*r.Real.PrefixReuse)
		}
	case "sessions", "turns":
		affects = wordsf("conversations: how follow-ups resend their context (cache hits across turns, growing prompts) and, in a replay with %s closed, when they are sent (%d sessions of %.1f turns real, %d of %.1f synthetic)",
			replaySessions, r.Real.Sessions, r.Real.TurnsPerSess, r.Synth.Sessions, r.Synth.TurnsPerSess)
		fix = fitGen.add("; a model fitted on a trace with sessions keeps its follow-up turns")
		if source == SourceGen {
			// The user already fitted and generated: the model's sessions
			// were fitted on another trace or window than REAL.
			fix = wordsf("the model's sessions differ from REAL's beyond chance: fit the model on REAL itself (not another window or trace), or generate REAL's span (%s)", traces.OptionRef("GenOptions.Duration"))
		}
	case "prefix_reuse_by_turn", "prefix_reuse_by_category":
		affects = wordsf("which requests hit the prefix cache: a conversation's later turns and each category's system prompt; conclusions about prefix caching and cache-aware routing")
		fix = fitGen.add(" (it keeps each category's prefix and how follow-ups resend their context)")
		if source == SourceGen {
			fix = wordsf("fit the model on REAL itself with this version (model version 3 keeps how follow-ups resend their context)")
		}
	case "context_growth":
		affects = wordsf("how prompts grow over a conversation: long-context prefill and KV-cache pressure late in sessions")
		fix = fitGen.add("; %s caps follow-up prompts (default: the longest fitted prompt)", traces.OptionRef("GenOptions.MaxContextTokens"))
		if source == SourceGen {
			fix = wordsf("the model's follow-ups grow as on the trace it was fitted on: fit it on REAL itself (not another window or trace); %s caps follow-up prompts (default: the longest fitted prompt)", traces.OptionRef("GenOptions.MaxContextTokens"))
		}
	case "ks.think":
		affects = wordsf("when follow-ups are sent in a closed-loop replay (a replay with %s closed), so the load a slower server sees", replaySessions)
		fix = wordsf("fit on a trace whose rows carry think_ns or finish_ns (otherwise think times are estimated from arrival gaps, which include production's service time)")
	}
	// A generated trace whose prompts are scaled away from the real ones
	// misses on what prompt lengths carry (how many blocks repeat, how
	// prompts grow) because of the scale, not the fit the user already
	// made: say so rather than send them back to fit.
	if source == SourceGen && (strings.HasPrefix(name, "prefix_reuse") || name == "context_growth") {
		if scale, ok := r.lengthScale(r.Real.MeanInput, r.Synth.MeanInput, "prompts", "GenOptions.InputLengthScale"); ok {
			fix = scale.add("; the prompts' lengths set how many of their blocks repeat and how they grow, so bring them back first (ks.input_tokens)")
		}
	}
	return affects, fix
}

// replaySessions is replay's option that sends follow-ups closed loop.
const replaySessions = traces.OptionRef("replay.Options.Sessions")

// lengthScale suggests option (GenOptions.InputLengthScale or
// OutputLengthScale, which scale the one dimension alone) when the means
// are more than 10 % apart.
func (r *Report) lengthScale(real, syn float64, what string, option traces.OptionRef) (words, bool) {
	if syn <= 0 || math.Abs(real/syn-1) <= 0.10 {
		return words{}, false
	}
	return wordsf("the synthetic %s are %.2f× the real ones on average: multiplying %s by %.3g brings the mean back (it scales the %s alone)", what, syn/real, option, real/syn, what), true
}

// RealMix is the real category shares as GenOptions.Mix takes them
// (ParseMix), when every category is listed and none is derived from
// prefix blocks.
func (r *Report) RealMix() (string, bool) {
	if r.Real.Categories > len(r.Real.CategoryShares) || len(r.Real.CategoryShares) == 0 {
		return "", false
	}
	names := make([]string, 0, len(r.Real.CategoryShares))
	for k := range r.Real.CategoryShares {
		if strings.HasPrefix(k, blockCategoryPrefix) {
			return "", false
		}
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s=%.3g", k, r.Real.CategoryShares[k]))
	}
	return strings.Join(parts, ","), true
}
