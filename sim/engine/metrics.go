package engine

import (
	"bufio"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
)

// Bucket boundaries of vLLM V1's histograms (vllm/v1/metrics/loggers.py).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
		7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
		10.0, 20.0, 40.0, 80.0}
	requestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
		60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	iterationBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	// The NIXL connector's (vllm/distributed/kv_transfer/kv_connector/v1/
	// nixl_connector.py, NixlPromMetrics): transfer time, and bytes from
	// 2 KiB to 8 GiB in steps of 4.
	nixlTimeBuckets  = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0}
	nixlBytesBuckets = func() []float64 {
		var b []float64
		for i := 1; i < 25; i += 2 {
			b = append(b, float64(int64(1)<<(10+i)))
		}
		return b
	}()
)

// buckets125 is vLLM's build_1_2_5_buckets(max): 1, 2, 5, 10, 20, 50, ... ≤ max.
func buckets125(max int) []float64 {
	var b []float64
	for e := 1.0; ; e *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := m * e; v <= float64(max) {
				b = append(b, v)
			} else {
				return b
			}
		}
	}
}

// histogram is one of vLLM's Prometheus histograms: its name and help as
// vLLM exposes them, its buckets and what it counted.
type histogram struct {
	name, help string
	bounds     []float64
	counts     []uint64 // per bucket, not cumulative; last = +Inf
	sum        float64
	count      uint64
}

func newHistogram(name, help string, bounds []float64) *histogram {
	return &histogram{name: name, help: help, bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

// observe counts v in the first bucket whose bound is >= v (le semantics;
// sort.SearchFloat64s's answer, NaN included, without its call per probe:
// the inter-token histogram sees every output token of a fleet).
func (h *histogram) observe(v float64) {
	i, j := 0, len(h.bounds)
	for i < j {
		m := int(uint(i+j) >> 1)
		if !(h.bounds[m] >= v) {
			i = m + 1
		} else {
			j = m
		}
	}
	h.counts[i]++
	h.sum += v
	h.count++
}

// stats is what GET /metrics reports. The engine goroutine updates it under
// mu once per step; scrapes read it under mu.
type stats struct {
	mu sync.Mutex

	running, waiting int
	kvUsage          float64
	// kvUsagePeak is the highest kvUsage so far.
	kvUsagePeak float64

	promptTokens, generation  int64
	preemptions               int64
	prefixQueries, prefixHits int64
	success                   map[string]int64

	ttft, itl, tpot, e2e, queue, inference, prefill, decode *histogram
	promptLen, genLen, maxTokens, iterTokens                *histogram
	// hists are all of the above in the order vLLM exposes them.
	hists []*histogram

	// KV pulls of a decode replica under prefill/decode disaggregation,
	// as vLLM's NIXL connector exposes them (written once there was one).
	kvTime, kvBytes *histogram
	kvBytesPerToken int

	// The engine's step lateness in real time (lateness.go; realTime
	// set: exposed from the start, never by a Virtual engine).
	realTime                               bool
	stepLateness                           *histogram
	stepModelNs, stepLateNs, stepLateMaxNs int64
}

func newStats(maxModelLen int) *stats {
	lens := buckets125(maxModelLen)
	s := &stats{
		success:    map[string]int64{"stop": 0, "length": 0, "abort": 0},
		promptLen:  newHistogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", lens),
		genLen:     newHistogram("vllm:request_generation_tokens", "Number of generation tokens processed.", lens),
		iterTokens: newHistogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", iterationBuckets),
		maxTokens:  newHistogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", lens),
		ttft:       newHistogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets),
		itl:        newHistogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets),
		tpot:       newHistogram("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", itlBuckets),
		e2e:        newHistogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", requestLatencyBuckets),
		queue:      newHistogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestLatencyBuckets),
		inference:  newHistogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", requestLatencyBuckets),
		prefill:    newHistogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", requestLatencyBuckets),
		decode:     newHistogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", requestLatencyBuckets),
	}
	s.hists = []*histogram{s.promptLen, s.genLen, s.iterTokens, s.maxTokens, s.ttft, s.itl, s.tpot, s.e2e, s.queue, s.inference, s.prefill, s.decode}
	s.kvTime = newHistogram("vllm:nixl_xfer_time_seconds", "Histogram of transfer duration for NIXL KV Cache transfers.", nixlTimeBuckets)
	s.kvBytes = newHistogram("vllm:nixl_bytes_transferred", "Histogram of bytes transferred per NIXL KV Cache transfers.", nixlBytesBuckets)
	s.stepLateness = newHistogram(StepLatenessFamily, "How far each engine step ended behind its modelled end (wall clock).", stepLateBuckets)
	return s
}

// kvPulled records one KV pull of tokens tokens that took sec seconds (mu
// held).
func (s *stats) kvPulled(sec float64, tokens int) {
	s.kvTime.observe(sec)
	if s.kvBytesPerToken > 0 {
		s.kvBytes.observe(float64(tokens) * float64(s.kvBytesPerToken))
	}
}

func (s *stats) prefixQuery(queried, hit int) {
	s.mu.Lock()
	s.prefixQueries += int64(queried)
	s.prefixHits += int64(hit)
	s.mu.Unlock()
}

func (s *stats) preemption() {
	s.mu.Lock()
	s.preemptions++
	s.mu.Unlock()
}

// iteration records one step's scheduled tokens (mu held).
func (s *stats) iteration(tokens int) { s.iterTokens.observe(float64(tokens)) }

// finished records a request that ended normally (mu held).
func (s *stats) finished(r *request, reason string, now int64) {
	sec := func(ns int64) float64 { return float64(ns) / 1e9 }
	s.success[reason]++
	s.e2e.observe(sec(now - r.arrival))
	s.queue.observe(sec(r.firstSched - r.arrival))
	s.inference.observe(sec(r.lastTok - r.firstSched))
	s.prefill.observe(sec(r.firstTok - r.firstSched))
	s.decode.observe(sec(r.lastTok - r.firstTok))
	if r.numOut > 1 {
		s.tpot.observe(sec(r.lastTok-r.firstTok) / float64(r.numOut-1))
	}
	s.promptLen.observe(float64(r.promptLen))
	s.genLen.observe(float64(r.numOut))
	s.maxTokens.observe(float64(r.maxTokens))
}

// writeProm writes the Prometheus text exposition the way vLLM's
// prometheus_client does: HELP and TYPE lines, counters with a _total
// suffix, labels sorted by name, numbers as Python floats.
func (s *stats) writeProm(w io.Writer, model string) error {
	return writeProm(w, model, []MetricsSource{{Meter: Meter{s}}})
}

// writeProm writes the exposition of several engines: each family once,
// with every source's samples, told apart by the source's labels.
func writeProm(w io.Writer, model string, srcs []MetricsSource) error {
	bw := bufio.NewWriter(w)
	// labels are a sample's: engine, the family's own label, model_name,
	// then the source's (all sorting after model_name).
	labels := func(src *MetricsSource, own ...[2]string) [][2]string {
		l := make([][2]string, 0, 3+len(src.Labels))
		l = append(l, [2]string{"engine", "0"})
		l = append(l, own...)
		l = append(l, [2]string{"model_name", model})
		return append(l, src.Labels...)
	}
	each := func(f func(src *MetricsSource, st *stats)) {
		for i := range srcs {
			st := srcs[i].Meter.st
			st.mu.Lock()
			f(&srcs[i], st)
			st.mu.Unlock()
		}
	}
	gauge := func(name, help string, v func(*stats) float64) {
		header(bw, name, help, "gauge")
		each(func(src *MetricsSource, st *stats) { sample(bw, name, labels(src), v(st)) })
	}
	counter := func(name, help string, v func(*stats) int64) {
		header(bw, name+"_total", help, "counter")
		each(func(src *MetricsSource, st *stats) { sample(bw, name+"_total", labels(src), float64(v(st))) })
	}
	hist := func(pick func(*stats) *histogram, cond func(*stats) bool) {
		first := pick(srcs[0].Meter.st)
		header(bw, first.name, first.help, "histogram")
		each(func(src *MetricsSource, st *stats) {
			h := pick(st)
			if cond != nil && !cond(st) {
				return
			}
			var cum uint64
			for i, b := range h.bounds {
				cum += h.counts[i]
				sample(bw, h.name+"_bucket", labels(src, [2]string{"le", pyFloat(b)}), float64(cum))
			}
			cum += h.counts[len(h.bounds)]
			sample(bw, h.name+"_bucket", labels(src, [2]string{"le", "+Inf"}), float64(cum))
			sample(bw, h.name+"_count", labels(src), float64(h.count))
			sample(bw, h.name+"_sum", labels(src), h.sum)
		})
	}
	if len(srcs) == 0 {
		return nil
	}
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", func(st *stats) float64 { return float64(st.running) })
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", func(st *stats) float64 { return float64(st.waiting) })
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", func(st *stats) float64 { return st.kvUsage })
	counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", func(st *stats) int64 { return st.prefixQueries })
	counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", func(st *stats) int64 { return st.prefixHits })
	counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", func(st *stats) int64 { return st.preemptions })
	counter("vllm:prompt_tokens", "Number of prefill tokens processed.", func(st *stats) int64 { return st.promptTokens })
	counter("vllm:generation_tokens", "Number of generation tokens processed.", func(st *stats) int64 { return st.generation })
	header(bw, "vllm:request_success_total", "Count of successfully processed requests.", "counter")
	each(func(src *MetricsSource, st *stats) {
		for _, reason := range []string{"abort", "length", "stop"} {
			sample(bw, "vllm:request_success_total", labels(src, [2]string{"finished_reason", reason}), float64(st.success[reason]))
		}
	})
	for k := range srcs[0].Meter.st.hists {
		hist(func(st *stats) *histogram { return st.hists[k] }, nil)
	}
	pulled := false
	each(func(_ *MetricsSource, st *stats) { pulled = pulled || st.kvTime.count > 0 })
	if pulled {
		// Only the engines that pulled KV (decode replicas) have the
		// connector's series, as in vLLM.
		hist(func(st *stats) *histogram { return st.kvTime }, func(st *stats) bool { return st.kvTime.count > 0 })
		bytes := false
		each(func(_ *MetricsSource, st *stats) { bytes = bytes || st.kvBytes.count > 0 })
		if bytes {
			hist(func(st *stats) *histogram { return st.kvBytes }, func(st *stats) bool { return st.kvBytes.count > 0 })
		}
	}
	rt := false
	each(func(_ *MetricsSource, st *stats) { rt = rt || st.realTime })
	if rt {
		// The simulator's own step lateness (lateness.go), of the engines
		// that run in real time.
		isRT := func(st *stats) bool { return st.realTime }
		hist(func(st *stats) *histogram { return st.stepLateness }, isRT)
		header(bw, StepModelFamily, "Modelled time of the engine steps counted in tokentrace_sim_step_lateness_seconds.", "counter")
		each(func(src *MetricsSource, st *stats) {
			if st.realTime {
				sample(bw, StepModelFamily, labels(src), float64(st.stepModelNs)/1e9)
			}
		})
	}
	return bw.Flush()
}

// Meter is one engine's metrics: what its /metrics reports.
type Meter struct{ st *stats }

// MetricsSource is an engine's metrics with the labels that tell it apart
// from the others in one exposition (WriteMetrics).
type MetricsSource struct {
	Meter Meter
	// Labels are added to every sample after vLLM's own (engine, model_name
	// and the family's); their names must sort after "model_name" (pod,
	// role, ...), in order.
	Labels [][2]string
}

// WriteMetrics writes one Prometheus exposition of several engines (a
// fleet's replicas): vLLM's families, each once, with every source's
// samples and labels.
func WriteMetrics(w io.Writer, model string, srcs []MetricsSource) error {
	return writeProm(w, model, srcs)
}

// Counters are an engine's counters and gauges, as its /metrics reports
// them.
type Counters struct {
	Running, Waiting               int
	KVUsage                        float64
	PrefixQueries, PrefixHits      int64 // tokens
	Preemptions                    int64
	PromptTokens, GenerationTokens int64
	// Finished counts requests that ended normally; Aborted the others.
	Finished, Aborted int64
	// KVPulls counts the KV pulls of a decode replica; KVPullSeconds is
	// their summed time.
	KVPulls       int64
	KVPullSeconds float64
	// KVUsagePeak is the highest KVUsage after any step so far: not in
	// /metrics (a scrape sees the gauge when it comes), but how full an
	// offline run's cache got (the twin's fit asks whether it filled).
	KVUsagePeak float64
}

// Counters returns m's counters now.
func (m Meter) Counters() Counters {
	st := m.st
	st.mu.Lock()
	defer st.mu.Unlock()
	return Counters{
		Running: st.running, Waiting: st.waiting, KVUsage: st.kvUsage, KVUsagePeak: st.kvUsagePeak,
		PrefixQueries: st.prefixQueries, PrefixHits: st.prefixHits, Preemptions: st.preemptions,
		PromptTokens: st.promptTokens, GenerationTokens: st.generation,
		Finished: st.success["stop"] + st.success["length"], Aborted: st.success["abort"],
		KVPulls: int64(st.kvTime.count), KVPullSeconds: st.kvTime.sum,
	}
}

func header(w *bufio.Writer, name, help, typ string) {
	w.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

func sample(w *bufio.Writer, name string, labels [][2]string, v float64) {
	w.WriteString(name)
	w.WriteByte('{')
	for i, l := range labels {
		if i > 0 {
			w.WriteByte(',')
		}
		w.WriteString(l[0] + `="` + escapeLabel(l[1]) + `"`)
	}
	w.WriteString("} ")
	w.WriteString(pyFloat(v))
	w.WriteByte('\n')
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

// pyFloat formats v like Python's repr(float) ("1.0", "0.001", "1e-05"),
// which is how vLLM's JSON and Prometheus output print floats.
func pyFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	a := math.Abs(v)
	if a != 0 && (a < 1e-4 || a >= 1e16) {
		s := strconv.FormatFloat(v, 'e', -1, 64)
		return s
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

func appendPyFloat(dst []byte, v float64) []byte { return append(dst, pyFloat(v)...) }
