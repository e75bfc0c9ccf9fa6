package analyze

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// A tiny deterministic serving model whose per-request queue, prefill and
// decode times are known, to check the estimator (the simulator-based
// accuracy tests come with sim). One FIFO prefill lane: a request
// waits for the lane (queue), prefills for 20 ms + 0.1 ms per uncached
// token, then decodes in parallel with others at a TPOT that grows with
// the number of requests sent in the previous 10 s. The network adds 1 ms
// before the first token (other).
type arrival struct {
	at       time.Duration
	in, out  int32
	cached   int32
	lateness time.Duration
}

func prefillOf(u int32) time.Duration { return 20*ms + time.Duration(u)*100*time.Microsecond }

func simulate(arr []arrival, tpotPerLoad float64) []traces.Record {
	sort.Slice(arr, func(i, j int) bool { return arr[i].at < arr[j].at })
	var laneFree time.Duration
	recs := make([]traces.Record, 0, len(arr))
	for i, a := range arr {
		start := max(a.at, laneFree)
		queue := start - a.at
		pre := prefillOf(a.in - a.cached)
		laneFree = start + pre
		recent := 0
		for j := i - 1; j >= 0 && a.at-arr[j].at < 10*time.Second; j-- {
			recent++
		}
		tpot := time.Duration(float64(10*ms) * (1 + tpotPerLoad*float64(recent)))
		decode := time.Duration(a.out-1) * tpot
		const other = time.Millisecond
		ttft := queue + pre + other
		r := rec(int64(i), a.at, a.lateness, ttft, ttft+decode, a.in, a.out, 1)
		r = withServer(r, queue, pre, decode, a.cached)
		recs = append(recs, r)
	}
	return recs
}

func poisson(rng *rand.Rand, from, to time.Duration, perS float64, mk func(at time.Duration) arrival) []arrival {
	var out []arrival
	for t := from; t < to; t += time.Duration(rng.ExpFloat64() / perS * 1e9) {
		out = append(out, mk(t))
	}
	return out
}

func TestEstimatedAttributionFindsTheCause(t *testing.T) {
	short := func(rng *rand.Rand) func(time.Duration) arrival {
		return func(at time.Duration) arrival {
			return arrival{at: at, in: 100 + rng.Int32N(500), out: 20 + rng.Int32N(40)}
		}
	}
	scenarios := []struct {
		name  string
		arr   func(rng *rand.Rand) []arrival
		tpotK float64
		want  string
		// wantText must appear in the diagnosis ("" = no check).
		wantText string
	}{
		{
			// Steady light load, then 150 requests in one second: they queue
			// for the prefill lane for seconds.
			name: "queueing burst",
			arr: func(rng *rand.Rand) []arrival {
				a := poisson(rng, 0, 400*time.Second, 4, short(rng))
				for i := range 150 {
					a = append(a, arrival{at: 200*time.Second + time.Duration(i)*6*ms, in: 100 + rng.Int32N(500), out: 20 + rng.Int32N(40)})
				}
				return a
			},
			want: "queue",
		},
		{
			// Light load of short prompts with 3 % prompts of 8–16 k tokens:
			// their own prefill makes the tail.
			name: "long-prompt prefill",
			arr: func(rng *rand.Rand) []arrival {
				mk := short(rng)
				return poisson(rng, 0, 1500*time.Second, 1, func(at time.Duration) arrival {
					a := mk(at)
					if rng.Float64() < 0.03 {
						a.in = 8000 + rng.Int32N(8000)
					}
					return a
				})
			},
			want: "prefill",
		},
		{
			// Long outputs; the rate triples for 100 s, and TPOT grows with
			// the load.
			name: "decode saturation",
			arr: func(rng *rand.Rand) []arrival {
				mk := func(at time.Duration) arrival {
					return arrival{at: at, in: 100 + rng.Int32N(500), out: 100 + rng.Int32N(300)}
				}
				a := poisson(rng, 0, 600*time.Second, 2, mk)
				return append(a, poisson(rng, 300*time.Second, 400*time.Second, 6, mk)...)
			},
			tpotK: 0.05,
			want:  "decode",
		},
		{
			// A client that falls behind by up to 3 s in one stretch.
			name: "client lateness",
			arr: func(rng *rand.Rand) []arrival {
				mk := short(rng)
				return poisson(rng, 0, 500*time.Second, 2, func(at time.Duration) arrival {
					a := mk(at)
					if at > 250*time.Second && at < 260*time.Second {
						a.lateness = time.Duration(rng.Int64N(int64(3 * time.Second)))
					}
					return a
				})
			},
			want:     "lateness",
			wantText: "Client lateness",
		},
		{
			// 4–5 k-token prompts sharing a 3.5 k prefix that the cache
			// serves, except for 4 % of requests that miss it.
			name: "cache misses",
			arr: func(rng *rand.Rand) []arrival {
				return poisson(rng, 0, 5000*time.Second, 0.3, func(at time.Duration) arrival {
					a := arrival{at: at, in: 4000 + rng.Int32N(1000), out: 5 + rng.Int32N(10), cached: 3500}
					if rng.Float64() < 0.04 {
						a.cached = 0
					}
					return a
				})
			},
			want:     "prefill",
			wantText: "Cache misses",
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 11))
			recs := simulate(sc.arr(rng), sc.tpotK)
			ctx := context.Background()
			truth, err := Analyze(ctx, recs, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			o := DefaultOptions()
			o.IgnoreServerTimings = true
			est, err := Analyze(ctx, recs, o)
			if err != nil {
				t.Fatal(err)
			}
			if truth.Attribution.Dominant != sc.want {
				t.Fatalf("scenario is wrong: the truth's dominant cause is %s, want %s (shares %+v)", truth.Attribution.Dominant, sc.want, truth.Attribution.Share)
			}
			if est.Attribution.Source != SourceEstimated || est.Attribution.Dominant != sc.want {
				t.Errorf("estimated dominant = %s (%s), want %s; shares %+v", est.Attribution.Dominant, est.Attribution.Source, sc.want, est.Attribution.Share)
			}
			ts, es := truth.Attribution.Share.Array(), est.Attribution.Share.Array()
			for k := range ts {
				if math.Abs(ts[k]-es[k]) > 0.10 {
					t.Errorf("%s share: estimated %.3f, truth %.3f (more than 10 points apart)", ComponentNames[k], es[k], ts[k])
				}
			}
			// Per tail request: the estimated largest component is the true one.
			trueArg := map[int64]int{}
			for r, err := range truth.PerRequest() {
				if err != nil {
					t.Fatal(err)
				}
				trueArg[r.Seq] = argmax(clampPos([nComponents]float64{float64(r.Lateness), float64(r.Queue), float64(r.Prefill), float64(r.Decode), float64(r.Other)}))
			}
			var n, agree int
			for r, err := range est.PerRequest() {
				if err != nil {
					t.Fatal(err)
				}
				if !r.Tail {
					continue
				}
				n++
				if argmax(clampPos([nComponents]float64{float64(r.Lateness), float64(r.Queue), float64(r.Prefill), float64(r.Decode), float64(r.Other)})) == trueArg[r.Seq] {
					agree++
				}
			}
			if n == 0 || float64(agree) < 0.9*float64(n) {
				t.Errorf("per-request dominant cause right for %d of %d tail requests, want ≥ 90%%", agree, n)
			}
			if d := strings.Join(est.Attribution.Diagnosis, " "); sc.wantText != "" && !strings.Contains(d, sc.wantText) {
				t.Errorf("diagnosis lacks %q: %s", sc.wantText, d)
			}
			if len(est.Attribution.Diagnosis) < 2 {
				t.Errorf("diagnosis too short: %q", est.Attribution.Diagnosis)
			}
			t.Logf("%s: %d tail requests, truth %+v, estimated %+v, per-request agreement %d/%d; prefill model %+v\n  %s",
				sc.name, n, truth.Attribution.Share, est.Attribution.Share, agree, n, est.Attribution.Prefill, est.Attribution.Diagnosis)
		})
	}
}

// A scraped metrics series beside the results file is picked up: the
// server's waiting queue around the tail shows in the attribution, the
// windows and the diagnosis.
func TestServerMetricsSeries(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	mk := func(at time.Duration) arrival {
		return arrival{at: at, in: 100 + rng.Int32N(500), out: 20 + rng.Int32N(40)}
	}
	arr := poisson(rng, 0, 100*time.Second, 4, mk)
	for i := range 100 {
		arr = append(arr, arrival{at: 50*time.Second + time.Duration(i)*6*ms, in: 300, out: 30})
	}
	recs := simulate(arr, 0)
	var samples []traces.MetricsSample
	for ts := time.Duration(0); ts < 110*time.Second; ts += time.Second {
		s := traces.NewMetricsSample(int64(ts))
		s.Waiting, s.Running, s.KVCacheUsage, s.Preemptions = 1, 4, 0.2, 0
		if ts >= 50*time.Second && ts < 58*time.Second {
			s.Waiting, s.KVCacheUsage = 80, 0.9
		}
		samples = append(samples, s)
	}
	dir := t.TempDir()
	res := filepath.Join(dir, "run.jsonl")
	if err := traces.WriteAll(res, traces.NewMeta("replay"), recs); err != nil {
		t.Fatal(err)
	}
	if err := traces.WriteSamples(traces.SamplesPathFor(res), traces.NewMeta("replay"), samples); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.IgnoreServerTimings = true
	rep := mustAnalyzeFiles(t, []string{res}, o)
	sl := rep.Attribution.ServerLoad
	if sl == nil || sl.TailWaiting == nil || *sl.TailWaiting < 40 || *sl.AllWaiting > 20 {
		t.Fatalf("server load = %+v, want the tail's waiting queue far above the run's", sl)
	}
	if d := strings.Join(rep.Attribution.Diagnosis, " "); !strings.Contains(d, "waiting queue held") {
		t.Errorf("diagnosis lacks the server queue: %s", d)
	}
	peak := 0.0
	for _, w := range rep.Windows {
		if w.ServerWaitingMax != nil {
			peak = max(peak, *w.ServerWaitingMax)
		}
	}
	if peak != 80 {
		t.Errorf("windows' peak server waiting = %v, want 80", peak)
	}
}
