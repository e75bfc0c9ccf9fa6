package analyze

import (
	"fmt"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// missingSeries fills rep.MissingMetrics with the metrics columns that hold
// no value in any pooled row of the series (a metric the server does not
// export, or one Prometheus had no series of), and warns: those columns
// are shown as not reported, never read as zeros.
func (rep *Report) missingSeries(s []traces.MetricsSample) {
	if len(s) == 0 {
		return
	}
	cols := []struct {
		name string
		has  func(x *traces.MetricsSample) bool
	}{
		{"waiting", func(x *traces.MetricsSample) bool { return x.Waiting >= 0 }},
		{"running", func(x *traces.MetricsSample) bool { return x.Running >= 0 }},
		{"kv_cache_usage", func(x *traces.MetricsSample) bool { return x.KVCacheUsage >= 0 }},
		{"prefix_hit_rate", func(x *traces.MetricsSample) bool { return x.PrefixHitRate >= 0 }},
		{"preemptions", func(x *traces.MetricsSample) bool { return x.Preemptions >= 0 }},
		{"queue_time_mean_ns", func(x *traces.MetricsSample) bool { return x.QueueTimeMeanNs >= 0 }},
		{"prefill_time_mean_ns", func(x *traces.MetricsSample) bool { return x.PrefillTimeMeanNs >= 0 }},
		{"decode_time_mean_ns", func(x *traces.MetricsSample) bool { return x.DecodeTimeMeanNs >= 0 }},
		{"requests_finished", func(x *traces.MetricsSample) bool { return x.RequestsFinished >= 0 }},
		{"prompt_tokens", func(x *traces.MetricsSample) bool { return x.PromptTokens >= 0 }},
		{"generation_tokens", func(x *traces.MetricsSample) bool { return x.GenerationTokens >= 0 }},
	}
	for _, c := range cols {
		found := false
		for i := range s {
			if c.has(&s[i]) {
				found = true
				break
			}
		}
		if !found {
			rep.MissingMetrics = append(rep.MissingMetrics, c.name)
		}
	}
	if len(rep.MissingMetrics) > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("server metrics: no values for %s in the %d-row series (the server does not export them, or Prometheus had no series of them): shown as not reported, never as zero, and left out of what needs them",
			strings.Join(rep.MissingMetrics, ", "), len(s)))
	}
}
