// Command pmdemo plays the incident of bench/postmortem-demo.sh: two
// servers behind an imaginary gateway, a light load on both, then a burst
// of 64 requests within 150 ms on the first only, which overflows its
// batch. Each server's part is replayed against it at the same time, and
// the results are pooled into one trace the way the gateway would have
// logged it: one time origin (its wall-clock start recorded exactly, as
// capture --keep-start does), no server timing columns and no record of
// which server answered. It returns once the servers have been idle for
// a few seconds, so Prometheus has scraped the whole incident.
//
//	go run ./bench/pmdemo --a http://127.0.0.1:18431 --b http://127.0.0.1:18432 --out incident.parquet
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

func main() {
	a := flag.String("a", "", "base URL of the server the burst overflows")
	b := flag.String("b", "", "base URL of the other server")
	out := flag.String("out", "incident.parquet", "where to write the pooled trace")
	seed := flag.Uint64("seed", 16, "seed of the lengths and arrival times")
	promURL := flag.String("prometheus", "", "if set, wait until this Prometheus has scraped both servers 3 times")
	flag.Parse()
	if *a == "" || *b == "" {
		fmt.Fprintln(os.Stderr, "pmdemo: --a and --b are required")
		os.Exit(2)
	}
	if *promURL != "" {
		if err := waitScrapes(*promURL, 3); err != nil {
			fmt.Fprintln(os.Stderr, "pmdemo:", err)
			os.Exit(1)
		}
	}
	if err := run(context.Background(), [2]string{*a, *b}, *out, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "pmdemo:", err)
		os.Exit(1)
	}
}

// waitScrapes waits (30 s at most) until Prometheus has scraped every
// target of job vllm n times, so the incident starts inside its history.
func waitScrapes(promURL string, n int) error {
	q := promURL + "/api/v1/query?query=" + url.QueryEscape(`min(count_over_time(up{job="vllm"}[5m]))`)
	for range 300 {
		if resp, err := http.Get(q); err == nil {
			var body struct {
				Data struct {
					Result []struct {
						Value [2]any `json:"value"`
					} `json:"result"`
				} `json:"data"`
			}
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if len(body.Data.Result) > 0 {
				v, _ := body.Data.Result[0].Value[1].(string)
				if got, err := strconv.Atoi(v); err == nil && got >= n {
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("prometheus at %s did not scrape the servers %d times in 30 s", promURL, n)
}

// parts builds the two servers' parts: 24 warm-up requests 100 ms apart
// alternating between them, the burst on the first at 2.4 s, and 16 light
// requests on the second over the 1.6 s after it. Seqs are unique.
func parts(seed uint64) [2][]traces.Record {
	rng := rand.New(rand.NewPCG(seed, 29))
	logUniform := func(lo, hi float64) int32 {
		return int32(math.Round(math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))))
	}
	var p [2][]traces.Record
	add := func(k int, at time.Duration, in, out int32) {
		r := traces.NewRecord()
		r.ArrivalNs, r.InputTokens, r.OutputTokens = int64(at), in, out
		p[k] = append(p[k], r)
	}
	for i := range 24 {
		add(i%2, time.Duration(i)*100*time.Millisecond, logUniform(16, 1024), int32(4+rng.IntN(9)))
	}
	const burstAt = 2400 * time.Millisecond
	for range 64 {
		add(0, burstAt+time.Duration(rng.Int64N(int64(150*time.Millisecond))), logUniform(64, 512), int32(16+rng.IntN(17)))
	}
	for i := range 16 {
		add(1, burstAt+time.Duration(i)*100*time.Millisecond, logUniform(64, 512), int32(16+rng.IntN(17)))
	}
	seq := int64(0)
	for k := range p {
		slices.SortStableFunc(p[k], func(x, y traces.Record) int { return int(x.ArrivalNs - y.ArrivalNs) })
		for i := range p[k] {
			p[k][i].Seq = seq
			seq++
		}
	}
	return p
}

func run(ctx context.Context, urls [2]string, out string, seed uint64) error {
	p := parts(seed)
	var res [2]*replay.Result
	var errs [2]error
	var wg sync.WaitGroup
	for k := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ro := replay.DefaultOptions()
			ro.URL, ro.Run, ro.NoPreflight = urls[k], []string{"a", "b"}[k], true
			res[k], errs[k] = replay.Run(ctx, p[k], traces.NewMeta("pmdemo"), ro)
		}()
	}
	wg.Wait()
	var starts [2]time.Time
	for k := range res {
		if errs[k] != nil {
			return fmt.Errorf("replay against %s: %w", urls[k], errs[k])
		}
		var err error
		if starts[k], err = time.Parse(time.RFC3339Nano, res[k].Meta.Get(replay.MetaStartedAt)); err != nil {
			return fmt.Errorf("replay against %s: start time: %w", urls[k], err)
		}
	}
	origin := starts[0]
	if starts[1].Before(origin) {
		origin = starts[1]
	}
	var pooled []traces.Record
	var last int64
	for k := range res {
		shift := int64(starts[k].Sub(origin))
		for _, r := range res[k].Records {
			for _, t := range []*int64{&r.ScheduledNs, &r.SentNs, &r.FirstTokenNs, &r.LastTokenNs} {
				if *t >= 0 {
					*t += shift
				}
			}
			r.ChunkNs = slices.Clone(r.ChunkNs)
			for i := range r.ChunkNs {
				r.ChunkNs[i] += shift
			}
			r.ServerQueueNs, r.ServerPrefillNs, r.ServerDecodeNs = traces.NotReported, traces.NotReported, traces.NotReported
			r.Run = "production"
			last = max(last, r.LastTokenNs)
			pooled = append(pooled, r)
		}
	}
	slices.SortStableFunc(pooled, func(x, y traces.Record) int { return int(x.ArrivalNs - y.ArrivalNs) })
	m := traces.NewMeta("pmdemo:gateway")
	m.Set("capture.start", origin.UTC().Format(time.RFC3339Nano))
	m.Set("capture.start_precision", "exact")
	if err := traces.WriteAll(out, m, pooled); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "pmdemo: %d requests pooled into %s (start %s)\n", len(pooled), out, origin.UTC().Format(time.RFC3339))
	time.Sleep(time.Until(origin.Add(time.Duration(last) + 4*time.Second)))
	return nil
}
