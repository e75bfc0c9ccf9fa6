package traces

import (
	"cmp"
	"context"
	"io"
	"math"
	"slices"
	"time"
)

// Summary describes a trace or results file: what inspect prints. JSON keys
// are stable snake_case.
type Summary struct {
	// Rows is the number of records read.
	Rows int64 `json:"rows"`
	// SkippedRows counts malformed rows skipped (non-strict reading).
	SkippedRows int64 `json:"skipped_rows"`
	// BadRows counts the bad rows by Problem (its Key: "negative",
	// "out_of_arrival_order", ...): the skipped rows and the rows out of
	// arrival order, which are kept.
	BadRows map[string]int64 `json:"bad_rows,omitempty"`
	// Truncated is set when the file ended in the middle of a row.
	Truncated bool `json:"truncated,omitempty"`
	// DurationS is last arrival − first arrival, in seconds.
	DurationS float64 `json:"duration_s"`
	// RateRPS is the mean request rate, 1 / mean inter-arrival gap
	// ((rows − 1) / duration); 0 with fewer than two rows or no duration.
	RateRPS float64 `json:"rate_rps"`
	// BurstinessCV is the coefficient of variation (population standard
	// deviation / mean) of the inter-arrival gaps: 1 for Poisson arrivals,
	// above 1 for bursty traffic, 0 for a constant rate.
	BurstinessCV float64 `json:"burstiness_cv"`
	// InputTokens and OutputTokens summarize the request lengths.
	InputTokens  Dist `json:"input_tokens"`
	OutputTokens Dist `json:"output_tokens"`
	// Categories are the prefix categories by descending count ("" = none).
	Categories []Share `json:"categories"`
	// Sessions is the number of distinct non-zero sessions.
	Sessions int64 `json:"sessions"`
	// Models are the models by descending count.
	Models []Share `json:"models"`
	// Outcome summarizes rows with an outcome (results files); nil otherwise.
	Outcome *OutcomeSummary `json:"outcome,omitempty"`
	// Meta is the file's metadata.
	Meta Meta `json:"meta"`
}

// Dist is a distribution summary; quantiles use Quantile.
type Dist struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
	Sum  float64 `json:"sum"`
}

// Share is a label's count and its fraction of the rows.
type Share struct {
	Name  string  `json:"name"`
	Count int64   `json:"count"`
	Share float64 `json:"share"`
}

// OutcomeSummary summarizes the outcome columns.
type OutcomeSummary struct {
	// Requests is the number of rows with an outcome.
	Requests int64 `json:"requests"`
	// OK and Failed split Requests by Status == StatusOK.
	OK     int64 `json:"ok"`
	Failed int64 `json:"failed"`
	// ByStatus counts every status.
	ByStatus map[string]int64 `json:"by_status"`
	// TTFTMs and E2EMs are over successful requests, LatenessMs (sent −
	// scheduled) over every request that was sent; milliseconds.
	TTFTMs     Latency `json:"ttft_ms"`
	E2EMs      Latency `json:"e2e_ms"`
	LatenessMs Latency `json:"lateness_ms"`
}

// Latency is a latency distribution in milliseconds.
type Latency struct {
	N   int64   `json:"n"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Summarize reads r to the end and summarizes it. It holds about 24 bytes per
// row (arrivals and lengths, for quantiles). On a read error (a truncated
// file, a malformed row in strict mode) it returns the summary of the rows
// read so far together with the error.
func Summarize(ctx context.Context, r Reader) (Summary, error) {
	var (
		s        Summary
		arrivals []int64
		in, out  []float64
		cats     = map[string]int64{}
		models   = map[string]int64{}
		sessions = map[int64]struct{}{}
		oc       OutcomeSummary
		ttft     []float64
		e2e      []float64
		late     []float64
	)
	oc.ByStatus = map[string]int64{}
	buf := make([]Record, 4096)
	var rerr error
	for {
		if err := ctx.Err(); err != nil {
			rerr = err
			break
		}
		n, err := r.Read(buf)
		for i := range buf[:n] {
			rec := &buf[i]
			arrivals = append(arrivals, rec.ArrivalNs)
			in = append(in, float64(rec.InputTokens))
			out = append(out, float64(rec.OutputTokens))
			cats[rec.Category]++
			models[rec.Model]++
			if rec.Session != 0 {
				sessions[rec.Session] = struct{}{}
			}
			if !rec.HasOutcome() {
				continue
			}
			oc.Requests++
			oc.ByStatus[rec.Status]++
			if l, ok := rec.Lateness(); ok {
				late = append(late, ms(l))
			}
			if !rec.OK() {
				oc.Failed++
				continue
			}
			oc.OK++
			if d, ok := rec.TTFT(); ok {
				ttft = append(ttft, ms(d))
			}
			if d, ok := rec.E2E(); ok {
				e2e = append(e2e, ms(d))
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			rerr = err
			break
		}
	}
	st := r.Stats()
	s.Meta = r.Meta()
	s.Rows = int64(len(arrivals))
	s.SkippedRows, s.Truncated = st.Skipped, st.Truncated
	for p, b := range st.Bad {
		if b.Rows > 0 {
			if s.BadRows == nil {
				s.BadRows = map[string]int64{}
			}
			s.BadRows[Problem(p).Key()] = b.Rows
		}
	}
	slices.Sort(arrivals)
	if len(arrivals) > 1 {
		span := arrivals[len(arrivals)-1] - arrivals[0]
		s.DurationS = float64(span) / 1e9
		if span > 0 {
			s.RateRPS = float64(len(arrivals)-1) / s.DurationS
			s.BurstinessCV = gapCV(arrivals)
		}
	}
	s.InputTokens, s.OutputTokens = dist(in), dist(out)
	s.Categories, s.Models = shares(cats, s.Rows), shares(models, s.Rows)
	s.Sessions = int64(len(sessions))
	if oc.Requests > 0 {
		oc.TTFTMs, oc.E2EMs, oc.LatenessMs = latency(ttft), latency(e2e), latency(late)
		s.Outcome = &oc
	}
	return s, rerr
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// gapCV is the coefficient of variation of the gaps of sorted arrivals.
func gapCV(sorted []int64) float64 {
	n := float64(len(sorted) - 1)
	mean := float64(sorted[len(sorted)-1]-sorted[0]) / n
	if mean == 0 {
		return 0
	}
	var ss float64
	for i := 1; i < len(sorted); i++ {
		d := float64(sorted[i]-sorted[i-1]) - mean
		ss += d * d
	}
	return math.Sqrt(ss/n) / mean
}

func dist(x []float64) Dist {
	if len(x) == 0 {
		return Dist{}
	}
	slices.Sort(x)
	var sum float64
	for _, v := range x {
		sum += v
	}
	return Dist{
		P50: Quantile(x, 0.5), P90: Quantile(x, 0.9), P99: Quantile(x, 0.99),
		Max: x[len(x)-1], Mean: sum / float64(len(x)), Sum: sum,
	}
}

func latency(x []float64) Latency {
	if len(x) == 0 {
		return Latency{}
	}
	slices.Sort(x)
	return Latency{N: int64(len(x)), P50: Quantile(x, 0.5), P90: Quantile(x, 0.9), P99: Quantile(x, 0.99), Max: x[len(x)-1]}
}

// shares sorts labels by descending count, then name.
func shares(m map[string]int64, total int64) []Share {
	out := make([]Share, 0, len(m))
	for k, v := range m {
		sh := 0.0
		if total > 0 {
			sh = float64(v) / float64(total)
		}
		out = append(out, Share{Name: k, Count: v, Share: sh})
	}
	slices.SortFunc(out, func(a, b Share) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}
