// Package incident is the incident that bench/pmdemo plays for
// bench/postmortem-demo.sh and that the postmortem test of cmd/tokentrace
// checks: two servers behind an imaginary gateway, a light load on both,
// then a burst of 64 requests within BurstLen at BurstAt on the first only,
// which overflows a 16-sequence batch. Each server's part is replayed
// against it at the same time, and the results are pooled into one trace
// the way the gateway would have logged it: one time origin, no server
// timing columns and no record of which server answered.
package incident

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

const (
	// BurstAt is when the burst on the first server starts, from the
	// trace's origin; BurstLen is how long it lasts.
	BurstAt  = 2400 * time.Millisecond
	BurstLen = 150 * time.Millisecond
)

// Parts builds the two servers' parts: 24 warm-up requests 100 ms apart
// alternating between them, the burst on the first, and 16 light requests
// on the second over the 1.6 s after the burst starts. Seqs are unique over
// both parts.
func Parts(seed uint64) [2][]traces.Record {
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
	for range 64 {
		add(0, BurstAt+time.Duration(rng.Int64N(int64(BurstLen))), logUniform(64, 512), int32(16+rng.IntN(17)))
	}
	for i := range 16 {
		add(1, BurstAt+time.Duration(i)*100*time.Millisecond, logUniform(64, 512), int32(16+rng.IntN(17)))
	}
	seq := int64(0)
	for k := range p {
		slices.SortStableFunc(p[k], byArrival)
		for i := range p[k] {
			p[k][i].Seq = seq
			seq++
		}
	}
	return p
}

func byArrival(x, y traces.Record) int { return int(x.ArrivalNs - y.ArrivalNs) }

// Played is a played incident.
type Played struct {
	// Results are each part's replay as the server answered it (run "a"
	// and "b", server timing columns intact).
	Results [2]*replay.Result
	// Pooled is the trace as the gateway logged it, in arrival order, its
	// times from Origin, the earlier of the two replays' starts; Last is
	// its last token, from Origin.
	Pooled []traces.Record
	Origin time.Time
	Last   time.Duration
}

// Play replays parts[k] against urls[k] at the same time, with ro (its URL
// and Run set per part) and meta, and pools the results.
func Play(ctx context.Context, urls [2]string, parts [2][]traces.Record, meta traces.Meta, ro replay.Options) (*Played, error) {
	var pl Played
	var errs [2]error
	var wg sync.WaitGroup
	for k := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := ro
			o.URL, o.Run = urls[k], []string{"a", "b"}[k]
			pl.Results[k], errs[k] = replay.Run(ctx, parts[k], meta, o)
		}()
	}
	wg.Wait()
	var starts [2]time.Time
	for k, res := range pl.Results {
		if errs[k] != nil {
			return nil, fmt.Errorf("replay against %s: %w", urls[k], errs[k])
		}
		var err error
		if starts[k], err = time.Parse(time.RFC3339Nano, res.Meta.Get(replay.MetaStartedAt)); err != nil {
			return nil, fmt.Errorf("replay against %s: start time: %w", urls[k], err)
		}
	}
	pl.Origin = starts[0]
	if starts[1].Before(pl.Origin) {
		pl.Origin = starts[1]
	}
	for k, res := range pl.Results {
		shift := int64(starts[k].Sub(pl.Origin))
		for _, r := range res.Records {
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
			pl.Last = max(pl.Last, time.Duration(r.LastTokenNs))
			pl.Pooled = append(pl.Pooled, r)
		}
	}
	slices.SortStableFunc(pl.Pooled, byArrival)
	return &pl, nil
}

// StartMeta sets on m the trace's wall-clock start, Origin, recorded
// exactly (as capture --keep-start does).
func (pl *Played) StartMeta(m *traces.Meta) {
	m.Set("capture.start", pl.Origin.UTC().Format(time.RFC3339Nano))
	m.Set("capture.start_precision", "exact")
}
