package analyze

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// NearLimitRatio is the share of the measured unloaded TPOT that weight
// streaming must explain for decode to count as near the hardware limit.
const NearLimitRatio = 0.8

// Capacity holds the hardware and cost checks (null fields when their
// options are not given).
type Capacity struct {
	Bandwidth *BandwidthCheck `json:"bandwidth,omitempty"`
	Cost      *Cost           `json:"cost,omitempty"`
}

// BandwidthCheck compares the decode floor predicted by weight streaming
// (every decode step reads all weights once: ModelBytes / bandwidth) with
// the measured unloaded TPOT.
type BandwidthCheck struct {
	ModelBytes         float64 `json:"model_bytes"`
	BandwidthBytesPerS float64 `json:"bandwidth_bytes_per_s"`
	DecodeFloorMs      float64 `json:"decode_floor_ms"`
	// UnloadedTPOTMs is the median TPOT of the least-loaded requests (the
	// attribution's prefill model), else the overall TPOT p50.
	UnloadedTPOTMs float64 `json:"unloaded_tpot_ms"`
	// Ratio is DecodeFloorMs / UnloadedTPOTMs: 1 = decode runs at the
	// bandwidth limit.
	Ratio   float64 `json:"ratio"`
	Verdict string  `json:"verdict"`
}

// Cost is what the run cost at CostPerHour.
type Cost struct {
	PerHour      float64 `json:"cost_per_hour"`
	DurationS    float64 `json:"duration_s"`
	RunCost      float64 `json:"run_cost"`
	OutputTokens int64   `json:"output_tokens"`
	// PerMillionOutput is RunCost per million output tokens.
	PerMillionOutput float64 `json:"per_million_output_tokens"`
	// GoodOutputTokens are the output tokens of requests that met the SLO,
	// and PerMillionGood RunCost per million of them (null without an SLO).
	GoodOutputTokens *int64   `json:"good_output_tokens,omitempty"`
	PerMillionGood   *float64 `json:"per_million_good_tokens,omitempty"`
}

// byteUnits are the size suffixes ParseBytes knows (decimal and binary).
var byteUnits = []struct {
	s string
	m float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}, {"pb", 1e15},
	{"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"t", 1e12}, {"b", 1},
}

// ParseBytes parses a size such as "16GB", "16e9", "14.9GiB" or "500MB"
// (decimal units are powers of 1000, binary ones of 1024).
func ParseBytes(s string) (float64, error) {
	t := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
	mult := 1.0
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.s) {
			t, mult = strings.TrimSuffix(t, u.s), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q: want a positive size such as 16GB or 14.9GiB", s)
	}
	return v * mult, nil
}

// ParseBandwidth parses a rate such as "3.35TB/s" or "900GB/s" ("/s" optional).
func ParseBandwidth(s string) (float64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "/s"), "ps")
	v, err := ParseBytes(t)
	if err != nil {
		return 0, fmt.Errorf("%q: want a positive rate such as 3.35TB/s", s)
	}
	return v, nil
}

// CapacityCheck computes (once) and returns the bandwidth and cost checks
// asked for in the options (Options.ModelBytes with Options.Bandwidth,
// Options.CostPerHour); nil when none was.
func (rep *Report) CapacityCheck() *Capacity {
	if rep.Capacity != nil {
		return rep.Capacity
	}
	o := rep.opts
	var c Capacity
	if o.ModelBytes > 0 && o.Bandwidth > 0 {
		c.Bandwidth = bandwidthCheck(o.ModelBytes, o.Bandwidth, rep.Attribution.Prefill.UnloadedTPOTMs, rep.TPOT.P50, o.Terms)
	}
	if o.CostPerHour > 0 {
		var good *int64
		if !o.SLO.IsZero() {
			g := rep.goodOutputTokens()
			good = &g
		}
		c.Cost = costOf(o.CostPerHour, rep.DurationS, rep.OutputTokens, good)
	}
	if c.Bandwidth == nil && c.Cost == nil {
		return nil
	}
	rep.Capacity = &c
	return rep.Capacity
}

// bandwidthCheck compares bytes/bandwidth with the unloaded TPOT (ms);
// fallbackMs is used when unloadedMs is not positive; terms say the
// options the verdict names.
func bandwidthCheck(bytes, bw, unloadedMs, fallbackMs float64, terms traces.Terms) *BandwidthCheck {
	b := &BandwidthCheck{ModelBytes: bytes, BandwidthBytesPerS: bw, DecodeFloorMs: bytes / bw * 1e3, UnloadedTPOTMs: unloadedMs}
	if !(b.UnloadedTPOTMs > 0) {
		b.UnloadedTPOTMs = fallbackMs
	}
	switch {
	case !(b.UnloadedTPOTMs > 0):
		b.Verdict = fmt.Sprintf("decode floor %.2f ms per step; no TPOT was measured (no request had more than one output token)", b.DecodeFloorMs)
	default:
		b.Ratio = b.DecodeFloorMs / b.UnloadedTPOTMs
		switch {
		case b.Ratio > 1.05:
			b.Verdict = traces.Textf("measured unloaded TPOT %.2f ms is below the weight-streaming floor %.2f ms: check %s and %s (quantized weights, tensor parallelism, speculative decoding?)",
				b.UnloadedTPOTMs, b.DecodeFloorMs, traces.OptionRef("Options.ModelBytes"), traces.OptionRef("Options.Bandwidth")).Say(terms)
		case b.Ratio >= NearLimitRatio:
			b.Verdict = fmt.Sprintf("decode is near the hardware limit: weight streaming (%.2f ms) explains %.0f%% of the unloaded TPOT (%.2f ms); only more bandwidth, smaller weights or batching help", b.DecodeFloorMs, 100*b.Ratio, b.UnloadedTPOTMs)
		default:
			b.Verdict = fmt.Sprintf("decode is far from the hardware limit: weight streaming (%.2f ms) explains only %.0f%% of the unloaded TPOT (%.2f ms); the rest is overhead (scheduling, kernel launches, sampling, attention) worth profiling", b.DecodeFloorMs, 100*b.Ratio, b.UnloadedTPOTMs)
		}
	}
	return b
}

// costOf is the run's cost per million output (and good) tokens.
func costOf(perHour, durationS float64, outTokens int64, good *int64) *Cost {
	c := &Cost{PerHour: perHour, DurationS: durationS, OutputTokens: outTokens, RunCost: perHour * durationS / 3600}
	if outTokens > 0 {
		c.PerMillionOutput = c.RunCost / float64(outTokens) * 1e6
	}
	if good != nil {
		c.GoodOutputTokens = good
		if *good > 0 {
			v := c.RunCost / float64(*good) * 1e6
			c.PerMillionGood = &v
		}
	}
	return c
}

// goodOutputTokens sums the output tokens of the requests meeting the SLO
// (the same rule as goodput).
func (rep *Report) goodOutputTokens() int64 {
	slo := rep.opts.SLO
	if rep.acc != nil {
		return rep.acc.goodOut // streaming: counted on every row
	}
	var n int64
	for i := 0; i < rep.rows.n; i++ {
		r := rep.rows.at(i)
		if !r.ok {
			continue
		}
		if slo.Met(r.latencies()) {
			n += int64(r.out)
		}
	}
	return n
}

// writeCapacityText prints the capacity section (nothing when not asked).
func (rep *Report) writeCapacityText(p func(string, ...any)) {
	c := rep.CapacityCheck()
	if c == nil {
		return
	}
	p("\nCapacity\n")
	if b := c.Bandwidth; b != nil {
		p("  decode floor  %.2f ms per step (%s of weights at %s/s)\n", b.DecodeFloorMs, fmtBytes(b.ModelBytes), fmtBytes(b.BandwidthBytesPerS))
		p("  unloaded TPOT %.2f ms measured\n", b.UnloadedTPOTMs)
		p("  %s\n", b.Verdict)
	}
	if k := c.Cost; k != nil {
		p("  cost          %.4f for %.1f s at %.2f/hour\n", k.RunCost, k.DurationS, k.PerHour)
		p("  per 1M output tokens  %.4f (%d output tokens)\n", k.PerMillionOutput, k.OutputTokens)
		if k.GoodOutputTokens != nil {
			if k.PerMillionGood != nil {
				p("  per 1M goodput tokens %.4f (%d output tokens of requests meeting %s)\n", *k.PerMillionGood, *k.GoodOutputTokens, rep.opts.SLO)
			} else {
				p("  per 1M goodput tokens n/a (no request met %s)\n", rep.opts.SLO)
			}
		}
	}
}

func fmtBytes(v float64) string {
	for _, u := range []struct {
		s string
		m float64
	}{{"PB", 1e15}, {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}} {
		if v >= u.m {
			return strconv.FormatFloat(v/u.m, 'g', 4, 64) + " " + u.s
		}
	}
	return strconv.FormatFloat(v, 'g', 4, 64) + " B"
}

// groupKey is the --by value of r.
func groupKey(by string, r *traces.Record) string {
	switch by {
	case ByClass:
		return r.Class
	case ByCategory:
		return r.Category
	case ByModel:
		return r.Model
	case ByReplica:
		return r.Replica
	}
	return ""
}

// AttributeGroups gives every group of rep (made with Options.By from recs)
// its own tail attribution: each group's records are analyzed alone with
// rep's options, so e.g. the interactive class's p99 is explained by its
// own components (queueing behind a batch load, prefill interference).
func AttributeGroups(ctx context.Context, rep *Report, recs []traces.Record) error {
	if rep.opts.By == "" || len(rep.Groups) == 0 {
		return nil
	}
	o := rep.opts
	o.By, o.KeepRequests = "", false
	parts := map[string][]traces.Record{}
	for i := range recs {
		if recs[i].Status == "" {
			continue
		}
		k := groupKey(rep.opts.By, &recs[i])
		parts[k] = append(parts[k], recs[i])
	}
	for i := range rep.Groups {
		g := &rep.Groups[i]
		sub, err := Analyze(ctx, parts[g.Value], o)
		if err != nil {
			continue // a group with no successful request has no attribution
		}
		at := sub.Attribution
		g.Attribution = &at
	}
	return nil
}

// AttributeGroupsFiles is AttributeGroups reading the named results files
// (the ones rep was made from) again, streaming: one Analyzer per group,
// so memory stays bounded. When rep passed Options.ExactRows, the groups
// share that budget (each gets ExactRows / groups rows, sampled past it);
// otherwise every group fits and is exact.
func AttributeGroupsFiles(ctx context.Context, rep *Report, names []string) error {
	if rep.opts.By == "" || len(rep.Groups) == 0 {
		return nil
	}
	o := rep.opts
	o.By, o.KeepRequests = "", false
	if rep.Sampling != nil {
		o.ExactRows = max(o.ExactRows/len(rep.Groups), 1)
	}
	subs := make(map[string]*Analyzer, len(rep.Groups))
	for _, g := range rep.Groups {
		a, err := New(o)
		if err != nil {
			return err
		}
		subs[g.Value] = a
	}
	by := rep.opts.By
	add := func(r *traces.Record) {
		if r.Status == "" {
			return
		}
		if a := subs[groupKey(by, r)]; a != nil {
			a.Add(r)
		}
	}
	for _, name := range names {
		rd, err := traces.OpenWith(name, rep.opts.Read)
		if err != nil {
			return err
		}
		err = drain(ctx, rd, add)
		rd.Close()
		if err != nil {
			return fmt.Errorf("read results %s: %w", name, err)
		}
	}
	for i := range rep.Groups {
		g := &rep.Groups[i]
		sub, err := subs[g.Value].Close(ctx)
		delete(subs, g.Value)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue // a group with no successful request has no attribution
		}
		at := sub.Attribution
		g.Attribution = &at
	}
	return nil
}

// writeGroupAttributionText prints each group's dominant tail component.
func (rep *Report) writeGroupAttributionText(p func(string, ...any)) {
	ga := rep.groupAttr()
	if len(ga) == 0 {
		return
	}
	p("\nTail attribution by %s\n", rep.Groups[0].By)
	ks := rep.groupComponents()
	for _, g := range ga {
		var parts []string
		for j, k := range ks {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", ComponentNames[k], 100*g.Shares[j]))
		}
		p("  %-14s %s ≥ %s: dominant %s (%s)\n", trunc(g.Value, 14), g.Tail, g.Threshold, g.Dominant, strings.Join(parts, ", "))
		for _, d := range g.Diagnosis {
			p("  %-14s - %s\n", "", d)
		}
	}
}

// metaKeyRank orders differing metadata so what a reader most needs comes
// first: the run's label and --metadata, then the server's
// self-description, then everything else.
func metaKeyRank(k string) int {
	k = strings.TrimPrefix(k, "extra.")
	switch {
	case strings.HasPrefix(k, "run."):
		return 0
	case strings.HasPrefix(k, "server."):
		return 1
	}
	return 2
}

// compareMetaKeys sorts metadata keys by metaKeyRank, then by name.
func compareMetaKeys(a, b string) int {
	if ra, rb := metaKeyRank(a), metaKeyRank(b); ra != rb {
		return ra - rb
	}
	return strings.Compare(a, b)
}
