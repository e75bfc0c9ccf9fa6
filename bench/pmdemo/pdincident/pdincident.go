// Package pdincident is the incident of a disaggregated fleet that
// bench/pmdemo plays for bench/postmortem-pd-demo.sh and that the
// postmortem test of cmd/tokentrace checks: a fleet of one prefill and
// three decode replicas behind one endpoint (Fleet), a light load of
// short and medium prompts, then a burst of long prompts within BurstLen
// at BurstAt that the one prefill replica computes 512 tokens at a time,
// so they queue there while the decode pool idles. The results are
// kept the way the gateway in front would have logged them: no server
// timing columns and no record of which replicas served a request.
package pdincident

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

const (
	// Fleet is the fleet's simulator configuration, in validate's target
	// keys (tokentrace sim --prefill-replicas 1 --decode-replicas 3
	// --replica-config prefill.max-num-batched-tokens=512): the prefill
	// replica computes 512 prompt tokens a step, so a long prompt takes
	// several steps of its own rather than sharing one large step.
	Fleet = "prefill-replicas=1,decode-replicas=3,prefill.max-num-batched-tokens=512"
	// BurstAt is when the burst of long prompts starts, from the trace's
	// origin; BurstLen is how long it lasts.
	BurstAt  = 2400 * time.Millisecond
	BurstLen = 300 * time.Millisecond
)

// Records builds the trace: 24 light requests 100 ms apart (prompts of
// 64–2048 tokens), 32 long prompts (1500–3000 tokens) within the burst,
// and 16 light requests over the 1.6 s after it starts. Outputs are 16–32
// tokens, so the decode pool stays light.
func Records(seed uint64) []traces.Record {
	rng := rand.New(rand.NewPCG(seed, 33))
	logUniform := func(lo, hi float64) int32 {
		return int32(math.Round(math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))))
	}
	var recs []traces.Record
	add := func(at time.Duration, in int32) {
		r := traces.NewRecord()
		r.ArrivalNs, r.InputTokens, r.OutputTokens = int64(at), in, int32(16+rng.IntN(17))
		recs = append(recs, r)
	}
	for i := range 24 {
		add(time.Duration(i)*100*time.Millisecond, logUniform(64, 2048))
	}
	for range 32 {
		add(BurstAt+time.Duration(rng.Int64N(int64(BurstLen))), logUniform(1500, 3000))
	}
	for i := range 16 {
		add(BurstAt+time.Duration(i)*100*time.Millisecond, logUniform(64, 512))
	}
	slices.SortStableFunc(recs, func(x, y traces.Record) int { return int(x.ArrivalNs - y.ArrivalNs) })
	for i := range recs {
		recs[i].Seq = int64(i)
	}
	return recs
}

// Played is a played incident.
type Played struct {
	// Result is the replay as the fleet answered it (server timing and
	// replica columns intact).
	Result *replay.Result
	// Logged is the trace as the gateway logged it: the same requests
	// without server timings or replicas. Origin is the replay's wall-clock
	// start and Last its last token, from Origin.
	Logged []traces.Record
	Origin time.Time
	Last   time.Duration
}

// Play replays recs against the fleet at url with ro (its URL set here)
// and meta.
func Play(ctx context.Context, url string, recs []traces.Record, meta traces.Meta, ro replay.Options) (*Played, error) {
	ro.URL = url
	res, err := replay.Run(ctx, recs, meta, ro)
	if err != nil {
		return nil, fmt.Errorf("replay against %s: %w", url, err)
	}
	pl := &Played{Result: res}
	if pl.Origin, err = time.Parse(time.RFC3339Nano, res.Meta.Get(replay.MetaStartedAt)); err != nil {
		return nil, fmt.Errorf("replay against %s: start time: %w", url, err)
	}
	for _, r := range res.Records {
		r.ChunkNs = slices.Clone(r.ChunkNs)
		r.ServerQueueNs, r.ServerPrefillNs, r.ServerDecodeNs = traces.NotReported, traces.NotReported, traces.NotReported
		r.ServerKVTransferNs, r.ServerDecodeQueueNs = traces.NotReported, traces.NotReported
		r.Replica, r.PrefillReplica, r.RouteReason = "", "", ""
		r.Run = "production"
		pl.Last = max(pl.Last, time.Duration(r.LastTokenNs))
		pl.Logged = append(pl.Logged, r)
	}
	slices.SortStableFunc(pl.Logged, func(x, y traces.Record) int { return int(x.ArrivalNs - y.ArrivalNs) })
	return pl, nil
}

// StartMeta sets on m the trace's wall-clock start, Origin, recorded
// exactly (as capture --keep-start does).
func (pl *Played) StartMeta(m *traces.Meta) {
	m.Set("capture.start", pl.Origin.UTC().Format(time.RFC3339Nano))
	m.Set("capture.start_precision", "exact")
}
