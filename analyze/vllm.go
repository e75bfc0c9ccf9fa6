package analyze

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tokentrace/tokentrace/internal/commalist"
	"github.com/tokentrace/tokentrace/traces"
)

// VLLM metric names (vllm bench serve --percentile-metrics).
const (
	VLLMTTFT = "ttft"
	VLLMTPOT = "tpot"
	VLLMITL  = "itl"
	VLLME2EL = "e2el"
)

// VLLMMetrics lists the metrics WriteVLLM can print.
var VLLMMetrics = []string{VLLMTTFT, VLLMTPOT, VLLMITL, VLLME2EL}

// VLLMOptions mirrors the `vllm bench serve` flags that shape its output.
// Start from DefaultVLLMOptions: a field's zero is a value of its own,
// never its default.
type VLLMOptions struct {
	// PercentileMetrics selects the metric blocks (none: no blocks).
	// Defaults to ttft, tpot, itl (vLLM's default; add e2el for
	// end-to-end latency).
	PercentileMetrics []string
	// MetricPercentiles are the percentiles printed per metric. Defaults to
	// 99.
	MetricPercentiles []float64
	// MaxConcurrency prints "Maximum request concurrency" when > 0; 0
	// takes the results' metadata "max_concurrency", else prints none.
	// Defaults to 0.
	MaxConcurrency int
	// RequestRate prints "Request rate configured (RPS)" when > 0; 0
	// takes the results' metadata "request_rate", else means inf.
	// Defaults to 0.
	RequestRate float64
	// Date is the --save-result "date" (YYYYmmdd-HHMMSS). Defaults to "".
	Date string
}

// DefaultVLLMOptions returns vLLM's defaults.
func DefaultVLLMOptions() VLLMOptions {
	return VLLMOptions{PercentileMetrics: []string{VLLMTTFT, VLLMTPOT, VLLMITL}, MetricPercentiles: []float64{99},
		MaxConcurrency: 0, RequestRate: 0, Date: ""}
}

// ParseVLLMMetrics parses "ttft,tpot,itl,e2el".
func ParseVLLMMetrics(s string) ([]string, error) {
	return commalist.Parse(s, func(m string) (string, error) {
		if !slices.Contains(VLLMMetrics, m) {
			return "", fmt.Errorf("percentile metric %q: want some of %s", m, strings.Join(VLLMMetrics, ","))
		}
		return m, nil
	})
}

// ParsePercentiles parses "50,90,99" (values in (0, 100]).
func ParsePercentiles(s string) ([]float64, error) {
	return commalist.Parse(s, func(f string) (float64, error) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 || v > 100 {
			return 0, fmt.Errorf("percentile %q: want a number in (0, 100]", f)
		}
		return v, nil
	})
}

// Validate reports the first option that cannot be used as given, naming
// it in a *traces.OptionError.
func (o VLLMOptions) Validate() error {
	for _, m := range o.PercentileMetrics {
		if !slices.Contains(VLLMMetrics, m) {
			return traces.OptionErrorf("analyze", "VLLMOptions.PercentileMetrics", "%q: want some of %s", m, strings.Join(VLLMMetrics, ","))
		}
	}
	for _, p := range o.MetricPercentiles {
		if !(p > 0 && p <= 100) {
			return traces.OptionErrorf("analyze", "VLLMOptions.MetricPercentiles", "%v: want a number in (0, 100]", p)
		}
	}
	if o.MaxConcurrency < 0 {
		return traces.OptionErrorf("analyze", "VLLMOptions.MaxConcurrency", "%d: want >= 0", o.MaxConcurrency)
	}
	if !(o.RequestRate >= 0) {
		return traces.OptionErrorf("analyze", "VLLMOptions.RequestRate", "%v: want >= 0", o.RequestRate)
	}
	return nil
}

// fromMeta is o with the zeros that mean the results' metadata
// (MaxConcurrency, RequestRate) read from rep's sources.
func (o VLLMOptions) fromMeta(rep *Report) VLLMOptions {
	for _, s := range rep.Sources {
		if o.MaxConcurrency == 0 {
			o.MaxConcurrency, _ = strconv.Atoi(s.Meta.Get("max_concurrency"))
		}
		if o.RequestRate == 0 {
			o.RequestRate, _ = strconv.ParseFloat(s.Meta.Get("request_rate"), 64)
		}
	}
	return o
}

type vllmMetric struct {
	key, short, header string
	data               []float64 // sorted, ns
	dist               Dist
	sk                 *sketch // past Options.ExactRows (or pooled ITL's limit)
}

func (rep *Report) vllmMetric(m string) vllmMetric {
	switch m {
	case VLLMTPOT:
		return vllmMetric{m, "TPOT", "Time per Output Token (excl. 1st token)", rep.samples.tpot, rep.TPOT, rep.sketchOf(mTPOT)}
	case VLLMITL:
		return vllmMetric{m, "ITL", "Inter-token Latency", rep.samples.itl, rep.ITL, rep.itlSk}
	case VLLME2EL:
		return vllmMetric{m, "E2EL", "End-to-end Latency", rep.samples.e2e, rep.E2E, rep.sketchOf(mE2E)}
	}
	return vllmMetric{VLLMTTFT, "TTFT", "Time to First Token", rep.samples.ttft, rep.TTFT, rep.sketchOf(mTTFT)}
}

// sketchOf is the run's sketch of metric m when streaming, else nil.
func (rep *Report) sketchOf(m int) *sketch {
	if rep.acc == nil {
		return nil
	}
	return &rep.acc.m[m]
}

// percentile in ms; 0 for an empty metric (vLLM's "values or 0").
func (m vllmMetric) percentile(p float64) float64 {
	if m.dist.Count == 0 {
		return 0
	}
	if m.sk != nil && m.sk.mom.n > 0 {
		return m.sk.quantile(p/100) * msPerNs
	}
	if len(m.data) == 0 { // approximate (huge pooled ITL)
		if v := m.dist.Percentile(p); !math.IsNaN(v) {
			return v
		}
		return m.dist.P99
	}
	return Quantile(m.data, p/100) * msPerNs
}

// pWord is vLLM's percentile label: "99" or "99.9".
func pWord(p float64) string {
	if p == math.Trunc(p) {
		return strconv.Itoa(int(p))
	}
	return strconv.FormatFloat(p, 'f', -1, 64)
}

// center is Python's "{:c^n}".format(s): extra padding goes right.
func center(s string, n int, c string) string {
	pad := n - len(s)
	if pad <= 0 {
		return s
	}
	return strings.Repeat(c, pad/2) + s + strings.Repeat(c, pad-pad/2)
}

// WriteVLLM writes the report in the exact block layout of `vllm bench
// serve` (vllm/benchmarks/serve.py, "{:<40} {:<10}" lines), so scripts that
// scrape that output keep working. Token throughput lines use the server's
// usage counts; "Peak output token throughput" counts tokens per second
// (chunk token counts where known) rather than vLLM's chunks.
func (rep *Report) WriteVLLM(w io.Writer, o VLLMOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	o = o.fromMeta(rep)
	bw := bufio.NewWriter(w)
	i := func(label string, v int64) { fmt.Fprintf(bw, "%-40s %-10d\n", label, v) }
	f := func(label string, v float64) { fmt.Fprintf(bw, "%-40s %-10.2f\n", label, v) }
	fmt.Fprintln(bw, center(" Serving Benchmark Result ", 50, "="))
	i("Successful requests:", int64(rep.Completed))
	i("Failed requests:", int64(rep.Failed))
	if o.MaxConcurrency > 0 {
		i("Maximum request concurrency:", int64(o.MaxConcurrency))
	}
	if o.RequestRate > 0 && !math.IsInf(o.RequestRate, 0) {
		f("Request rate configured (RPS):", o.RequestRate)
	}
	f("Benchmark duration (s):", rep.DurationS)
	i("Total input tokens:", rep.InputTokens)
	i("Total generated tokens:", rep.OutputTokens)
	f("Request throughput (req/s):", rep.Throughput.RequestsPerS)
	if rep.Goodput != nil {
		f("Request goodput (req/s):", *rep.Goodput)
	}
	f("Output token throughput (tok/s):", rep.Throughput.OutputTokensPerS)
	f("Peak output token throughput (tok/s):", rep.Throughput.PeakOutputTokensPerS)
	f("Peak concurrent requests:", float64(rep.PeakConcurrency))
	f("Total token throughput (tok/s):", rep.Throughput.TotalTokensPerS)
	for _, name := range o.PercentileMetrics {
		m := rep.vllmMetric(name)
		fmt.Fprintln(bw, center(m.header, 50, "-"))
		f(fmt.Sprintf("Mean %s (ms):", m.short), m.dist.Mean)
		f(fmt.Sprintf("Median %s (ms):", m.short), m.percentile(50))
		for _, p := range o.MetricPercentiles {
			f(fmt.Sprintf("P%s %s (ms):", pWord(p), m.short), m.percentile(p))
		}
	}
	fmt.Fprintln(bw, strings.Repeat("=", 50))
	return bw.Flush()
}

// WriteVLLMJSON writes the report with the keys and order of `vllm bench
// serve --save-result` (without --save-detailed): run settings, aggregates,
// latencies (s, per request in dispatch order, 0 for failures), queue_times
// (client lateness in s), peaks, and mean_/median_/std_/p{P}_ per metric.
func (rep *Report) WriteVLLMJSON(w io.Writer, o VLLMOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	o = o.fromMeta(rep)
	var b bytes.Buffer
	first := true
	kv := func(k string, v any) {
		if !first {
			b.WriteString(", ")
		}
		first = false
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(v)
		if err != nil {
			vb = []byte("null")
		}
		b.Write(kb)
		b.WriteString(": ")
		b.Write(vb)
	}
	var meta = func(k string) string {
		for _, s := range rep.Sources {
			if v := s.Meta.Get(k); v != "" {
				return v
			}
		}
		return ""
	}
	tokenizer := ""
	for _, s := range rep.Sources {
		if s.Meta.Tokenizer != "" {
			tokenizer = s.Meta.Tokenizer
			break
		}
	}
	orNull := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	b.WriteString("{")
	kv("date", o.Date)
	kv("endpoint_type", "openai-chat")
	kv("backend", "openai-chat")
	kv("label", orNull(meta("run")))
	kv("model_id", orNull(meta("model")))
	kv("tokenizer_id", orNull(tokenizer))
	kv("num_prompts", rep.Requests)
	if o.RequestRate > 0 {
		kv("request_rate", o.RequestRate)
	} else {
		kv("request_rate", "inf")
	}
	kv("burstiness", 1.0)
	if o.MaxConcurrency > 0 {
		kv("max_concurrency", o.MaxConcurrency)
	} else {
		kv("max_concurrency", nil)
	}
	kv("duration", rep.DurationS)
	kv("completed", rep.Completed)
	kv("failed", rep.Failed)
	kv("total_input_tokens", rep.InputTokens)
	kv("total_output_tokens", rep.OutputTokens)
	kv("request_throughput", rep.Throughput.RequestsPerS)
	kv("request_goodput", rep.Goodput)
	kv("output_throughput", rep.Throughput.OutputTokensPerS)
	kv("total_token_throughput", rep.Throughput.TotalTokensPerS)
	lat := make([]float64, 0, rep.rows.n)
	qt := make([]float64, 0, rep.rows.n)
	for k := range rep.rows.n {
		r := rep.rows.at(int(k))
		e, ok := r.e2e()
		if !ok || !r.ok {
			e = 0
		}
		lat = append(lat, e/1e9)
		qt = append(qt, r.latenessOr0()/1e9)
	}
	kv("latencies", lat)
	kv("queue_times", qt)
	kv("max_output_tokens_per_s", rep.Throughput.PeakOutputTokensPerS)
	kv("max_concurrent_requests", rep.PeakConcurrency)
	kv("rtfx", 0.0)
	for _, name := range o.PercentileMetrics {
		m := rep.vllmMetric(name)
		kv("mean_"+name+"_ms", m.dist.Mean)
		kv("median_"+name+"_ms", m.percentile(50))
		kv("std_"+name+"_ms", m.dist.Std)
		for _, p := range o.MetricPercentiles {
			kv("p"+pWord(p)+"_"+name+"_ms", m.percentile(p))
		}
	}
	b.WriteString("}\n")
	_, err := w.Write(b.Bytes())
	return err
}
