package replay

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// resultMeta is the results file metadata (before the run's outcome).
func (r *runner) resultMeta(in traces.Meta) traces.Meta {
	m := in
	m.Extra = nil
	for k, v := range in.Extra {
		m.Set(k, v)
	}
	m.SchemaVersion = traces.SchemaVersion
	if m.Source == "" {
		m.Source = "replay"
	} else {
		m.Source = "replay:" + m.Source
	}
	if m.BlockSize == 0 {
		m.BlockSize = r.prompts.blockSize
	}
	m.Set(MetaTarget, RedactURL(r.o.URL))
	if r.o.SimTarget != "" {
		m.Set(MetaSim, r.o.SimTarget)
	}
	model := r.model
	if model == "" {
		model = r.defaultModel
		if model == "" {
			model = "(per record)"
		}
	}
	m.Set(MetaModel, model)
	m.Set(MetaSpeed, strconv.FormatFloat(r.o.Speed, 'g', -1, 64))
	m.Set(MetaRun, r.o.Run)
	m.Set(MetaShard, fmt.Sprintf("%d/%d", r.o.ShardIndex, r.o.ShardCount))
	if !r.t0.IsZero() {
		m.Set(MetaStartedAt, r.t0.UTC().Format(time.RFC3339Nano))
	}
	if r.chat.source != "" {
		m.Set(MetaChatCalibration, r.chat.source)
	}
	opts, _ := json.Marshal(r.o.public())
	m.Set(MetaOptions, string(opts))
	return m
}

func (r *runner) finishMeta(m *traces.Meta, s *Summary) {
	src := TimingSourceNone
	if s.TimingMatched > 0 {
		src = TimingSourceResponseMetrics
	}
	setTimingMeta(m, s, src)
	m.Set(MetaNotSent, strconv.Itoa(s.NotSent))
	if r.graph != nil {
		b, _ := json.Marshal(s.Sessions)
		m.Set(MetaSessions, string(b))
	}
	m.Set(MetaLatenessP99, strconv.FormatInt(int64(s.LatenessP99), 10))
	if s.Realtime == "" {
		m.Set(MetaRealtime, "SCHED_FIFO 1 (dispatcher thread)")
	} else {
		m.Set(MetaRealtime, "no: "+s.Realtime)
	}
	if s.CPUQuota != "" {
		m.Set(MetaCPUQuota, s.CPUQuota)
	}
	clockMeta(m, r.clock, s, r.o.StartAt) // clock.go
	r.replicaNote(m, s)                   // replica.go
}

func setTimingMeta(m *traces.Meta, s *Summary, src string) {
	m.Set(MetaTimingSource, src)
	m.Set(MetaTimingMatched, strconv.Itoa(s.TimingMatched))
	m.Set(MetaTimingUnmatched, strconv.Itoa(s.TimingUnmatched))
}

// AddTimingSource recounts the successful requests with and without server
// timings after another source (e.g. OTLPTimingSource, through
// OTLPReceiver.JoinRecords) filled more of them, and records the combined
// source ("response_metrics+otlp") and counts in the metadata.
func (res *Result) AddTimingSource(src string, joined int) {
	before := res.Summary.TimingMatched
	res.Summary.TimingMatched, res.Summary.TimingUnmatched = 0, 0
	for i := range res.Records {
		rec := &res.Records[i]
		if !rec.OK() || rec.SentNs < 0 {
			continue
		}
		if rec.ServerQueueNs >= 0 || rec.ServerPrefillNs >= 0 || rec.ServerDecodeNs >= 0 {
			res.Summary.TimingMatched++
		} else {
			res.Summary.TimingUnmatched++
		}
	}
	cur := res.Meta.Get(MetaTimingSource)
	switch {
	case joined == 0:
		// nothing new from src
	case cur == "" || cur == TimingSourceNone || before == 0:
		cur = src
	default:
		cur += "+" + src
	}
	if cur == "" {
		cur = TimingSourceNone
	}
	setTimingMeta(&res.Meta, &res.Summary, cur)
}

// publicOptions is what of Options goes in the metadata: no key, no header
// values, no URL credentials.
type publicOptions struct {
	API              string   `json:"api"`
	ForceAPI         bool     `json:"force_api,omitempty"`
	Speed            float64  `json:"speed"`
	WindowFrom       string   `json:"window_from,omitempty"`
	WindowTo         string   `json:"window_to,omitempty"`
	MaxConcurrency   int      `json:"max_concurrency,omitempty"`
	Warmup           int      `json:"warmup,omitempty"`
	Duration         string   `json:"duration,omitempty"`
	Sessions         string   `json:"sessions"`
	NoContextGrowth  bool     `json:"no_context_growth,omitempty"`
	Shard            string   `json:"shard"`
	StartAt          string   `json:"start_at,omitempty"`
	Timeout          string   `json:"timeout"`
	Drain            string   `json:"drain"`
	NoVLLMExtensions bool     `json:"no_vllm_extensions,omitempty"`
	ContinuousUsage  bool     `json:"continuous_usage,omitempty"`
	HeaderNames      []string `json:"header_names,omitempty"`
	APIKey           bool     `json:"api_key_set,omitempty"`
	BlockSize        int      `json:"block_size"`
	TokenIDs         string   `json:"token_ids"`
}

func (o *Options) public() publicOptions {
	p := publicOptions{
		API: o.API, ForceAPI: o.ForceAPI, Speed: o.Speed, MaxConcurrency: o.MaxConcurrency,
		Warmup: o.Warmup, Sessions: o.Sessions, NoContextGrowth: o.NoContextGrowth, Shard: fmt.Sprintf("%d/%d", o.ShardIndex, o.ShardCount),
		Timeout: o.Timeout.String(), Drain: o.Drain.String(), NoVLLMExtensions: o.NoVLLMExtensions,
		ContinuousUsage: o.ContinuousUsage, APIKey: o.APIKey != "", BlockSize: o.BlockSize,
		TokenIDs: fmt.Sprintf("%d,%d", o.TokenIDMin, o.TokenIDMax),
	}
	if o.WindowFrom != 0 || o.WindowTo != 0 {
		p.WindowFrom, p.WindowTo = o.WindowFrom.String(), o.WindowTo.String()
	}
	if o.Duration > 0 {
		p.Duration = o.Duration.String()
	}
	if !o.StartAt.IsZero() {
		p.StartAt = o.StartAt.UTC().Format(time.RFC3339Nano)
	}
	for k := range o.Headers {
		p.HeaderNames = append(p.HeaderNames, http.CanonicalHeaderKey(k))
	}
	slices.Sort(p.HeaderNames)
	return p
}
