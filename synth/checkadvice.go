package synth

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Sources of a synthetic trace (its Meta.Source) that Advise knows.
const (
	SourceGen    = "synth:gen"
	SourceMatrix = "synth:matrix"
)

// Advise fills each failed check's Affects and Fix for a synthetic trace
// made by source (its Meta.Source: SourceGen, SourceMatrix, or anything
// else for a trace of unknown making), with the commands naming the real
// trace realFile ("" = REAL). Check advises as for an unknown source.
func (r *Report) Advise(source, realFile string) {
	for i := range r.Checks {
		if c := &r.Checks[i]; !c.Pass {
			c.Affects, c.Fix = r.advice(c.Name, source)
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
func (r *Report) advice(name, source string) (affects, fix string) {
	fitGen := "generate from a model fitted on the real trace (tokentrace synth fit --out model.json REAL, then synth gen … model.json)"
	lengths := func(real, syn float64, what, option string) string {
		scale := r.lengthScale(real, syn, what, option)
		switch {
		case source == SourceGen && scale != "":
			return strings.TrimPrefix(scale, "; ")
		case source == SourceGen:
			return fmt.Sprintf("the model's length histograms hold at least %d values per bin, which smooths a short trace: fit on a longer window of the real trace (or with a smaller FitOptions.MinBinCount)", DefaultMinBinCount)
		case source == SourceMatrix:
			return "a fixed-length matrix cannot match a spread of lengths: " + fitGen
		}
		return fitGen + "; a fixed-length matrix cannot match a spread of lengths" + scale
	}
	switch name {
	case "ks.input_tokens":
		affects = "prefill time and TTFT, KV-cache use and how prompts share a batch: conclusions about prefill speed, max-num-batched-tokens, chunked prefill and KV-cache size"
		fix = lengths(r.Real.MeanInput, r.Synth.MeanInput, "prompts", "GenOptions.InputLengthScale")
	case "ks.output_tokens":
		affects = "decode time, TPOT and E2E, and how long a request holds its batch slot and KV cache: conclusions about decode speed and max-num-seqs"
		fix = lengths(r.Real.MeanOutput, r.Synth.MeanOutput, "outputs", "GenOptions.OutputLengthScale")
	case "ks.interarrival", "cv", "dispersion.1s", "dispersion.10s", "dispersion.60s":
		affects = fmt.Sprintf("queueing under bursts and so the tail (p99 TTFT): conclusions about max-num-seqs, queue limits and how many replicas a load needs (inter-arrival CV %.2f real, %.2f synthetic)", r.Real.CV, r.Synth.CV)
		fix = "fit with narrower rate bins so that shorter bursts survive (FitOptions.Bin 1s), and keep GenOptions.Gaps empirical (the default)"
		switch {
		case r.SessionGaps != "":
			affects = "when a session's turns are sent in an open-loop replay, so how its requests overlap: conclusions about queueing and the tail"
			fix = "the gaps between a session's turns come from the model's sessions.inter_turn_gap_s: " + fitGen
			if source == SourceGen {
				fix = "the gaps between a session's turns come from the model's sessions.inter_turn_gap_s: fit the model on REAL itself"
			}
		case source == SourceMatrix:
			fix = "a matrix's Poisson rows are never bursty: " + fitGen
		}
	case "rate_error":
		affects = "the load, and with it every latency percentile: capacity conclusions (how much traffic before the SLO breaks)"
		fix = fmt.Sprintf("match the real rate (%.3g req/s, synthetic %.3g)", r.Real.RatePerS, r.Synth.RatePerS)
		switch {
		case r.Synth.RatePerS <= 0:
		case source == SourceMatrix:
			fix += fmt.Sprintf(": multiply the rows' RATErps by %.3g, or %s, which follows the real rate over time", r.Real.RatePerS/r.Synth.RatePerS, fitGen)
		default:
			fix += fmt.Sprintf(": multiply GenOptions.RateScale by %.3g, or cover the same span with GenOptions.Duration", r.Real.RatePerS/r.Synth.RatePerS)
		}
	case "category_share_max_diff":
		affects = "which shared prefixes recur, so prefix-cache hits and the length mix: conclusions about prefix caching and routing"
		fix = fmt.Sprintf("the shares differ most at %q", r.CategoryShareMaxDiffName)
		if mix, ok := r.RealMix(); ok && source != SourceMatrix {
			fix += "; generate with the real shares of requests: GenOptions.Mix " + mix
		} else {
			fix += "; " + fitGen
		}
	case "prefix_reuse":
		affects = fmt.Sprintf("prefix-cache hits, so the prefill work and TTFT: conclusions about prefix caching, KV-cache size and cache-aware routing (real reuse %.0f%%, synthetic %.0f%%)", 100*r.Real.PrefixReuse, 100*r.Synth.PrefixReuse)
		fix = fitGen + " (it keeps the categories and block reuse)"
		if source == SourceGen {
			fix = "the model reuses blocks as it measured them on the window it was fitted on: fit it on this real trace (or a longer window of it); GenOptions.Mix shifts the category shares"
		}
		if r.Real.PrefixReuse >= 0.01 && source != SourceGen {
			fix += fmt.Sprintf("; in synth matrix, give the rows a warm shared prefix of about %.0f%% of IN (IN/OUT+PREFIXw@RATErps)", 100*r.Real.PrefixReuse)
		}
	case "sessions", "turns":
		affects = fmt.Sprintf("conversations: how follow-ups resend their context (cache hits across turns, growing prompts) and, with replay --sessions closed, when they are sent (%d sessions of %.1f turns real, %d of %.1f synthetic)", r.Real.Sessions, r.Real.TurnsPerSess, r.Synth.Sessions, r.Synth.TurnsPerSess)
		fix = fitGen + "; a model fitted on a trace with sessions keeps its follow-up turns"
		if source == SourceGen {
			// The user already fitted and generated: the model's sessions
			// were fitted on another trace or window than REAL.
			fix = "the model's sessions differ from REAL's beyond chance: fit the model on REAL itself (not another window or trace), or generate REAL's span (GenOptions.Duration)"
		}
	case "prefix_reuse_by_turn", "prefix_reuse_by_category":
		affects = "which requests hit the prefix cache: a conversation's later turns and each category's system prompt; conclusions about prefix caching and cache-aware routing"
		fix = fitGen + " (it keeps each category's prefix and how follow-ups resend their context)"
		if source == SourceGen {
			fix = "fit the model on REAL itself with this version (model version 3 keeps how follow-ups resend their context)"
		}
	case "context_growth":
		affects = "how prompts grow over a conversation: long-context prefill and KV-cache pressure late in sessions"
		fix = fitGen + "; GenOptions.MaxContextTokens caps follow-up prompts (default: the longest fitted prompt)"
		if source == SourceGen {
			fix = "the model's follow-ups grow as on the trace it was fitted on: fit it on REAL itself (not another window or trace); GenOptions.MaxContextTokens caps follow-up prompts (default: the longest fitted prompt)"
		}
	case "ks.think":
		affects = "when follow-ups are sent in a closed-loop replay (replay --sessions closed), so the load a slower server sees"
		fix = "fit on a trace whose rows carry think_ns or finish_ns (otherwise think times are estimated from arrival gaps, which include production's service time)"
	}
	// A generated trace whose prompts are scaled away from the real ones
	// misses on what prompt lengths carry (how many blocks repeat, how
	// prompts grow) because of the scale, not the fit the user already
	// made: say so rather than send them back to fit.
	if source == SourceGen && (strings.HasPrefix(name, "prefix_reuse") || name == "context_growth") {
		if scale := r.lengthScale(r.Real.MeanInput, r.Synth.MeanInput, "prompts", "GenOptions.InputLengthScale"); scale != "" {
			fix = strings.TrimPrefix(scale, "; ") + "; the prompts' lengths set how many of their blocks repeat and how they grow, so bring them back first (ks.input_tokens)"
		}
	}
	return affects, fix
}

// lengthScale suggests option (GenOptions.InputLengthScale or
// OutputLengthScale, which scale the one dimension alone) when the means
// are more than 10 % apart.
func (r *Report) lengthScale(real, syn float64, what, option string) string {
	if syn <= 0 || math.Abs(real/syn-1) <= 0.10 {
		return ""
	}
	return fmt.Sprintf("; the synthetic %s are %.2f× the real ones on average: multiplying %s by %.3g brings the mean back (it scales the %s alone)", what, syn/real, option, real/syn, what)
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
