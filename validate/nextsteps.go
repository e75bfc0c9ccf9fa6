package validate

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/synth"
	"github.com/tokentrace/tokentrace/traces"
)

// NextStep is a change to the synthetic workload that the reasons support:
// what to change and, where one exists, the commands that make it and
// validate the result.
type NextStep struct {
	// Property is the reason's property, Evidence its evidence.
	Property string `json:"property"`
	Evidence string `json:"evidence"`
	// Change says what to change and why, in a sentence; where no command
	// can make the change it says what to do instead.
	Change string `json:"change"`
	// Commands make the change, in order, and validate the new workload:
	// they run as printed, from where validate ran, with the files as
	// validate was given them (a name in capitals where it was given none),
	// and write only new files, never an input.
	Commands []string `json:"commands,omitempty"`
}

// How the synthetic workload was made, from its metadata.
const (
	sourceMatrix = "synth:matrix"
	sourceGen    = "synth:gen"
)

// maxNextSteps bounds the steps: the best supported reasons' properties.
const maxNextSteps = 2

// nextSteps turns the reasons into changes: for the properties of the
// reasons proven, found necessary or given as a prior (the first
// maxNextSteps, a pair's two properties each), the change to the
// synthetic workload that carries the property over.
func (r *Result) nextSteps(real, syn Workload) []NextStep {
	if r.Fidelity == nil {
		return nil
	}
	cb := newCommander(r, real, syn)
	var out []NextStep
	seen := map[string]bool{}
	for _, rs := range r.Reasons {
		if rs.Evidence == EvidenceDifference {
			break
		}
		props := rs.Properties
		if len(props) == 0 {
			props = []string{rs.Property}
		}
		for _, prop := range props {
			if seen[prop] || len(out) == maxNextSteps {
				continue
			}
			seen[prop] = true
			st := r.stepFor(prop, cb)
			if st.Change == "" {
				continue
			}
			st.Evidence = rs.Evidence
			out = append(out, st)
		}
	}
	return out
}

// stepFor is the change that carries prop over, by how the synthetic
// workload was made.
func (r *Result) stepFor(prop string, cb *commander) NextStep {
	st := NextStep{Property: prop}
	switch prop {
	case PropPrefixReuse:
		r.prefixStep(&st, cb)
	case PropPromptLengths, PropOutputLengths:
		r.lengthStep(&st, cb)
	case PropArrivals:
		r.arrivalStep(&st, cb)
	case PropSessions:
		r.sessionStep(&st, cb)
	}
	return st
}

// fitGenStep is the step every source can take: a model fitted on the real
// trace (it keeps what), a workload generated from it, validated.
func (st *NextStep) fitGenStep(cb *commander, keeps string) {
	if out, ok := cb.gens[""]; ok {
		st.Change = fmt.Sprintf("a model fitted on the %s trace keeps %s too: the workload the step above generates (%s) carries it", cb.realName(), keeps, out)
		return
	}
	cmds, out := cb.fitGen("")
	st.Change = fmt.Sprintf("fit a model on the %s trace, which keeps %s, generate from it and validate that workload", cb.realName(), keeps)
	st.Commands = append(cmds, cb.validate(out)...)
}

func (r *Result) prefixStep(st *NextStep, cb *commander) {
	f := r.Fidelity
	reuse := f.Real.PrefixReuse
	switch source := cb.syn.Meta.Source; {
	case source == sourceMatrix:
		cmd, out, ok := cb.matrix(reuse, 1, "prefix")
		if !ok {
			st.fitGenStep(cb, "its prefix categories and block reuse")
			return
		}
		st.Commands = append([]string{cmd}, cb.validate(out)...)
		st.Change = fmt.Sprintf("rebuild the matrix with warm shared prefixes of the %s share of prompt tokens (%.0f%%) and validate it; or ", cb.realName(), 100*reuse)
		if done, ok := cb.gens[""]; ok {
			st.Change += fmt.Sprintf("take the workload the step above generates from a model fitted on the %s trace (%s), which keeps its prefix categories and block reuse", cb.realName(), done)
			return
		}
		alt, altOut := cb.fitGen("")
		st.Commands = append(st.Commands, alt...)
		st.Commands = append(st.Commands, cb.validate(altOut)...)
		st.Change += fmt.Sprintf("fit a model on the %s trace, which keeps its prefix categories and block reuse, and validate a workload generated from it", cb.realName())
	case source == sourceGen && f.CategoryShareMaxDiff > synth.DefaultShareDiff:
		if mix, ok := f.RealMix(); ok {
			cmds, out := cb.gen("mix", map[traces.OptionRef]string{genMix: mix})
			st.Commands = append(cmds, cb.validate(out)...)
			st.Change = fmt.Sprintf("the category shares differ by up to %.0f points (%s): generate with the %s shares and validate that workload",
				100*f.CategoryShareMaxDiff, f.CategoryShareMaxDiffName, cb.realName())
			return
		}
		fallthrough
	case source == sourceGen:
		st.Change = noOption(cb, "which prefixes a fitted model's requests share and how much of the previous turn a follow-up resends", PropPrefixReuse)
	default:
		st.fitGenStep(cb, "its prefix categories and block reuse")
	}
}

func (r *Result) lengthStep(st *NextStep, cb *commander) {
	f := r.Fidelity
	what, rm, sm, key, alone, option := "prompt", f.Real.MeanInput, f.Synth.MeanInput, "input", "prompts and their prefixes alone", genInputScale
	if st.Property == PropOutputLengths {
		what, rm, sm, key, alone, option = "output", f.Real.MeanOutput, f.Synth.MeanOutput, "output", "outputs alone", genOutputScale
	}
	switch source := cb.syn.Meta.Source; {
	case source == sourceGen && sm > 0 && math.Abs(rm/sm-1) > 0.10:
		scale := metaFloat(cb.syn, "synth."+key+"_length_scale", 1) * rm / sm
		cmds, out := cb.gen(key+"s", map[traces.OptionRef]string{option: strconv.FormatFloat(scale, 'g', 3, 64)})
		st.Commands = append(cmds, cb.validate(out)...)
		st.Change = fmt.Sprintf("the synthetic %s lengths are %.2f× the %s ones on average: generate with them scaled by %.3g (%s) and validate that workload",
			what, sm/rm, cb.realName(), scale, alone)
	case source == sourceGen:
		cmds, out := cb.fitGen("min-bin-count", traces.CommandOption{Option: "FitOptions.MinBinCount", Value: "1"})
		st.Commands = append(cmds, cb.validate(out)...)
		st.Change = fmt.Sprintf("the fitted %s lengths are near the %s ones on average (%.0f against %.0f tokens) but spread differently: a model's %s histograms hold at least %d values per bin, which smooths a short trace's tails; fit with bins of one value, generate and validate that workload",
			what, cb.realName(), sm, rm, key, synth.DefaultMinBinCount)
	case source == sourceMatrix:
		st.fitGenStep(cb, fmt.Sprintf("its %s length mix (mean %.0f tokens, and its spread), which a fixed-length matrix cannot carry,", what, rm))
	default:
		st.fitGenStep(cb, fmt.Sprintf("its %s length distribution (mean %.0f tokens)", what, rm))
	}
}

func (r *Result) arrivalStep(st *NextStep, cb *commander) {
	f := r.Fidelity
	rateOff := f.Synth.RatePerS > 0 && math.Abs(f.Real.RatePerS/f.Synth.RatePerS-1) > 0.10
	switch source := cb.syn.Meta.Source; {
	case source == sourceGen && rateOff:
		scale := metaFloat(cb.syn, "synth.rate_scale", 1) * f.Real.RatePerS / f.Synth.RatePerS
		cmds, out := cb.gen("rate", map[traces.OptionRef]string{genRateScale: strconv.FormatFloat(scale, 'g', 3, 64)})
		st.Commands = append(cmds, cb.validate(out)...)
		st.Change = fmt.Sprintf("the synthetic rate is %.2f req/s against the %s %.2f: generate with the arrivals scaled by %.3g and validate that workload", f.Synth.RatePerS, cb.realName(), f.Real.RatePerS, scale)
	case source == sourceGen:
		cmds, out := cb.fitGen("bin", traces.CommandOption{Option: "FitOptions.Bin", Value: "1s"})
		st.Commands = append(cmds, cb.validate(out)...)
		st.Change = fmt.Sprintf("the synthetic arrivals are %s bursty than the %s ones (inter-arrival CV %.2f against %.2f): fit with rate bins of 1 s instead of %v, so that shorter bursts survive, generate and validate that workload",
			moreOrLess(f.Synth.CV, f.Real.CV), cb.realName(), f.Synth.CV, f.Real.CV, synth.DefaultBin)
	case source == sourceMatrix:
		st.fitGenStep(cb, fmt.Sprintf("its rate over time (%.2f req/s) and bursts (inter-arrival CV %.2f), where matrix rows arrive at fixed Poisson rates,", f.Real.RatePerS, f.Real.CV))
		if cmd, out, ok := cb.matrix(-1, f.Real.RatePerS/f.Synth.RatePerS, "rate"); ok && rateOff {
			st.Change += fmt.Sprintf("; or at least run the rows at the %s mean rate (×%.2f) and validate them", cb.realName(), f.Real.RatePerS/f.Synth.RatePerS)
			st.Commands = append(st.Commands, cmd)
			st.Commands = append(st.Commands, cb.validate(out)...)
		}
	default:
		st.fitGenStep(cb, fmt.Sprintf("its rate over time (%.2f req/s) and burstiness (CV %.2f)", f.Real.RatePerS, f.Real.CV))
	}
}

func (r *Result) sessionStep(st *NextStep, cb *commander) {
	if cb.syn.Meta.Source == sourceGen {
		st.Change = noOption(cb, "how many turns a fitted model's sessions have, the time between them and how much of the previous turn a follow-up resends", PropSessions)
		return
	}
	st.fitGenStep(cb, fmt.Sprintf("its conversations (%.1f turns per session, each turn resending the context before it)", r.Fidelity.Real.TurnsPerSess))
}

// noOption is the advice where no synth option sets what differs: judge
// the change on the real trace, keep the synthetic workload for the
// others.
func noOption(cb *commander, what, prop string) string {
	return fmt.Sprintf("no synth fit or gen option sets %s (the figures above), so a workload generated again keeps them: decide changes that act through %s on the %s trace (its runs above are that decision), and keep the %s workload for changes that do not",
		what, prop, cb.realName(), cb.syn.Name)
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

// commander builds the command lines of the next steps: the one place
// that turns what to do into tokentrace commands (traces.Command, said in
// Options.Terms: the CLI's flags). Its commands name the files validate
// was given and write new files beside the synthetic one, never over an
// input or a file an earlier command writes.
type commander struct {
	r         *Result
	real, syn Workload
	realFile  string
	synFile   string
	dir       string
	used      map[string]bool
	// fits are the models printed fits write, gens the workloads printed
	// fits and gens write, by the fit's options.
	fits, gens map[string]string
}

// synth gen's options the next steps set.
const (
	genSeed        traces.OptionRef = "GenOptions.Seed"
	genDuration    traces.OptionRef = "GenOptions.Duration"
	genRateScale   traces.OptionRef = "GenOptions.RateScale"
	genLengthScale traces.OptionRef = "GenOptions.LengthScale"
	genInputScale  traces.OptionRef = "GenOptions.InputLengthScale"
	genOutputScale traces.OptionRef = "GenOptions.OutputLengthScale"
	genMix         traces.OptionRef = "GenOptions.Mix"
	genGaps        traces.OptionRef = "GenOptions.Gaps"
)

func newCommander(r *Result, real, syn Workload) *commander {
	cb := &commander{r: r, real: real, syn: syn, realFile: real.File, synFile: syn.File, used: map[string]bool{}, fits: map[string]string{}, gens: map[string]string{}}
	if cb.realFile == "" {
		cb.realFile = "REAL.parquet"
	}
	if cb.synFile == "" {
		cb.synFile = "SYNTHETIC.parquet"
	}
	cb.dir = filepath.Dir(cb.synFile)
	cb.used[filepath.Clean(cb.realFile)] = true
	cb.used[filepath.Clean(cb.synFile)] = true
	return cb
}

func (cb *commander) realName() string { return cb.real.Name }

// say is c in the validation's terms.
func (cb *commander) say(c traces.Command) string { return c.Say(cb.r.opts.Terms) }

// file is a new file beside the synthetic workload: STEM.EXT, else
// STEM-2.EXT, and so on.
func (cb *commander) file(stem, ext string) string {
	for i := 1; ; i++ {
		name := stem + ext
		if i > 1 {
			name = fmt.Sprintf("%s-%d%s", stem, i, ext)
		}
		path := filepath.Join(cb.dir, name)
		if !cb.used[path] {
			cb.used[path] = true
			return path
		}
	}
}

// stem is a file's name without its directory and extension.
func stem(path string) string {
	b := filepath.Base(path)
	return strings.TrimSuffix(b, filepath.Ext(b))
}

// userModel is the model the synthetic workload was generated from, when
// validate was given it (a .json SYNTHETIC).
func (cb *commander) userModel() string {
	if strings.HasSuffix(strings.ToLower(cb.syn.File), ".json") {
		return cb.syn.File
	}
	return ""
}

// fit is the synth fit of the real trace with opts (tag names them in the
// model's file name: "min-bin-count" and its value) and the model file it
// writes; a fit printed before with the same options is not printed again
// (its model is used).
func (cb *commander) fit(tag string, opts ...traces.CommandOption) (cmds []string, model string) {
	c := traces.NewCommand("synth", "fit")
	c.Options = opts
	key := c.String()
	if m, ok := cb.fits[key]; ok {
		return nil, m
	}
	suffix := ""
	if tag != "" {
		suffix = "-" + tag + opts[0].Value
	}
	model = cb.file(stem(cb.realFile)+"-model"+suffix, ".json")
	cb.fits[key] = model
	return []string{cb.say(c.With(traces.CommandOut, model).WithArgs(cb.realFile))}, model
}

// fitGen fits a model on the real trace with opts (tag names them in the
// files' names, "" for none) and generates from it as the synthetic
// workload was generated.
func (cb *commander) fitGen(tag string, opts ...traces.CommandOption) (cmds []string, out string) {
	cmds, model := cb.fit(tag, opts...)
	genTag := "fit"
	if tag != "" {
		genTag = tag
	}
	cmd, out := cb.genFrom(model, genTag, nil)
	cb.gens[tag] = out
	return append(cmds, cmd), out
}

// gen generates from the synthetic workload's own model (the one validate
// was given, else one fitted on the real trace) with the options in set
// changed.
func (cb *commander) gen(tag string, set map[traces.OptionRef]string) (cmds []string, out string) {
	model := cb.userModel()
	if model == "" {
		cmds, model = cb.fit("")
	}
	cmd, out := cb.genFrom(model, tag, set)
	return append(cmds, cmd), out
}

// genFrom is the synth gen command that generates from model with the
// synthetic workload's generation options (seed, duration, scales, mix,
// gaps, from its metadata) and set over them, and the file it writes.
func (cb *commander) genFrom(model, tag string, set map[traces.OptionRef]string) (cmd, out string) {
	m := cb.syn.Meta
	opts := map[traces.OptionRef]string{genSeed: "1"}
	if m.Source == sourceGen {
		opts[genSeed] = m.Get("synth.seed")
		if d, err := strconv.ParseInt(m.Get("synth.duration_ns"), 10, 64); err == nil && d > 0 {
			opts[genDuration] = time.Duration(d).String()
		}
		for key, option := range map[string]traces.OptionRef{"synth.rate_scale": genRateScale, "synth.length_scale": genLengthScale,
			"synth.input_length_scale": genInputScale, "synth.output_length_scale": genOutputScale, "synth.mix": genMix, "synth.gaps": genGaps} {
			opts[option] = m.Get(key)
		}
	}
	for k, v := range set {
		opts[k] = v
	}
	defaults := map[traces.OptionRef]string{genRateScale: "1", genLengthScale: "1", genInputScale: "1", genOutputScale: "1", genGaps: synth.GapsEmpirical, genMix: ""}
	c := traces.NewCommand("synth", "gen")
	for _, option := range []traces.OptionRef{genSeed, genDuration, genRateScale, genLengthScale, genInputScale, genOutputScale, genMix, genGaps} {
		if v := opts[option]; v != "" && v != defaults[option] {
			c = c.With(option, v)
		}
	}
	out = cb.file(stem(cb.synFile)+"-"+tag, ".parquet")
	return cb.say(c.With(traces.CommandOut, out).WithArgs(model)), out
}

// matrix rebuilds the synth matrix command of the synthetic workload
// (from its metadata) with every row given a warm shared prefix of share
// × its prompt length (share < 0: the rows keep their prefixes) and its
// rate multiplied by rateScale, and the file it writes.
func (cb *commander) matrix(share, rateScale float64, tag string) (cmd, out string, ok bool) {
	m := cb.syn.Meta
	rows, err := synth.ParseRows(m.Get("synth.rows"))
	if err != nil {
		return "", "", false
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
		p := row.PrefixTokens // a cold row's is 0: the same as none
		if share >= 0 {
			p = min(int32(math.Round(share*float64(row.InputTokens))), row.InputTokens)
		}
		spec := fmt.Sprintf("%d/%d@%s", row.InputTokens, row.OutputTokens, load)
		if p >= 1 {
			spec = fmt.Sprintf("%d/%d+%dw@%s", row.InputTokens, row.OutputTokens, p, load)
		}
		specs = append(specs, spec)
	}
	c := traces.NewCommand("synth", "matrix").With("MatrixOptions.Rows", strings.Join(specs, ","))
	option := func(key string, name traces.OptionRef, def string, format func(string) string) {
		if v := m.Get(key); v != "" && v != def {
			c = c.With(name, format(v))
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
	option("synth.row_duration_ns", "MatrixOptions.RowDuration", strconv.FormatInt(int64(synth.DefaultRowDuration), 10), dur)
	option("synth.sat_requests", "MatrixOptions.SatRequests", strconv.Itoa(synth.DefaultSatRequests), same)
	option("synth.row_gap_ns", "MatrixOptions.RowGap", strconv.FormatInt(int64(synth.DefaultRowGap), 10), dur)
	option("synth.arrival", "MatrixOptions.Arrival", synth.MatrixArrivalPoisson, same)
	option("synth.seed", "MatrixOptions.Seed", strconv.Itoa(synth.DefaultMatrixSeed), same)
	out = cb.file(stem(cb.synFile)+"-"+tag, ".parquet")
	return cb.say(c.With(traces.CommandOut, out)), out, true
}

// validate is the validate command that judges a new synthetic workload
// as this validation judged its own: the same targets and judging
// options, the same real trace. URL targets are left to the user (a
// replay's options, such as an API key file, are not in the result), so
// then there is none.
func (cb *commander) validate(synFile string) []string {
	o := &cb.r.opts
	c := traces.NewCommand("validate")
	for _, t := range o.Targets {
		if t.URL != "" {
			return nil
		}
		c = c.With("Options.Targets", t.Name+"="+t.Config)
	}
	def := DefaultOptions()
	def.Metrics = DefaultMetricsFor(o.SLO)
	if names, defNames := metricNames(o.Metrics), metricNames(def.Metrics); names != defNames {
		c = c.With("Options.Metrics", names)
	}
	option := func(name traces.OptionRef, v, d any) {
		if v == d {
			return
		}
		s := fmt.Sprint(v)
		if f, ok := v.(float64); ok {
			s = strconv.FormatFloat(f, 'g', 6, 64)
		}
		c = c.With(name, s)
	}
	if !o.SLO.IsZero() {
		c = c.With("Options.SLO", o.SLO.String())
	}
	option("Options.Speed", o.Speed, def.Speed)
	option("Options.Repeat", o.Repeat, def.Repeat)
	if o.Realtime {
		c = c.With("Options.Realtime", "")
	}
	option("Options.Resamples", o.Resamples, def.Resamples)
	option("Options.Confidence", o.Confidence, def.Confidence)
	option("Options.Seed", o.Seed, def.Seed)
	if o.MinEffect != def.MinEffect {
		c = c.With("Options.MinEffect", strconv.FormatFloat(o.MinEffect, 'g', -1, 64)) // a fraction, as the option takes it
	}
	option("Options.MagnitudeTolerance", o.MagnitudeTolerance, def.MagnitudeTolerance)
	option("Options.Explain", o.Explain, def.Explain)
	option("Options.CombinationBudget", o.CombinationBudget, def.CombinationBudget)
	return []string{cb.say(c.WithArgs(cb.realFile, synFile))}
}

func metricNames(ms []Metric) string {
	var n []string
	for _, m := range ms {
		n = append(n, m.Name)
	}
	return strings.Join(n, ",")
}
