package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/replay/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// TestITLPerTokenAgainstSimTruth replays one request at a time against the
// simulator at stream intervals 1, 4 and 16, without continuous usage
// stats, so the client sees chunks of several tokens and only the usage
// total. analyze's per-token ITL (estimated from that total) must match
// the simulator's own per-token decode time within 1 ms, and say it is an
// estimate where chunks carry several tokens.
func TestITLPerTokenAgainstSimTruth(t *testing.T) {
	for _, n := range []int{1, 4, 16} {
		t.Run(fmt.Sprintf("stream-interval-%d", n), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			so := sim.DefaultOptions()
			so.StreamInterval = n
			srv, err := sim.Start(ctx, so)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			// One request in flight at a time: 33 output tokens take about
			// 0.2 s on the default step model; arrivals 300 ms apart.
			var recs []traces.Record
			for i := range 12 {
				r := traces.NewRecord()
				r.Seq, r.ArrivalNs = int64(i), int64(i)*int64(300*time.Millisecond)
				r.InputTokens, r.OutputTokens = 64, 33
				recs = append(recs, r)
			}
			ro := replay.DefaultOptions()
			ro.URL = srv.URL
			ro.Run = "itl"
			res, err := replay.Run(ctx, recs, traces.NewMeta("itl-test"), ro)
			if err != nil {
				t.Fatal(err)
			}
			srv.Close()

			// Truth: the engine's decode time spread over the tokens after
			// the first.
			var truth []float64
			for _, tr := range srv.Truth() {
				if tr.ServerDecodeNs > 0 && tr.ServerOutputTokens > 1 {
					truth = append(truth, float64(tr.ServerDecodeNs)/float64(tr.ServerOutputTokens-1)/1e6)
				}
			}
			if len(truth) != len(recs) {
				t.Fatalf("simulator truth for %d of %d requests", len(truth), len(recs))
			}
			slices.Sort(truth)
			want := traces.Quantile(truth, 0.5)

			// Without per-request metrics the results carry the client's
			// view only: chunk arrival times and the usage total.
			for i := range res.Records {
				r := &res.Records[i]
				if r.Status != traces.StatusOK {
					t.Fatalf("request %d: %s (%s)", r.Seq, r.Status, r.Error)
				}
				if n > 1 && len(r.ChunkTokens) > 0 {
					t.Fatalf("request %d: chunk token counts reported without continuous usage", r.Seq)
				}
			}
			rep, err := analyze.Analyze(ctx, res.Records, analyze.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			got := rep.ITLPerToken.P50
			t.Logf("stream interval %d: per-token ITL p50 %.3f ms (estimated for %d requests), truth %.3f ms; per-chunk ITL p50 %.3f ms",
				n, got, rep.ITLPerTokenEstimated, want, rep.ITL.P50)
			if rep.ITLPerToken.Count == 0 || math.Abs(got-want) > 1 {
				t.Errorf("per-token ITL p50 %.3f ms, simulator truth %.3f ms: off by more than 1 ms", got, want)
			}
			if n > 1 && rep.ITLPerTokenEstimated != len(recs) {
				t.Errorf("%d of %d requests marked estimated", rep.ITLPerTokenEstimated, len(recs))
			}
			if th := rep.Throughput; th.PeakOutputTokensPerS < th.OutputTokensPerS {
				t.Errorf("peak %.1f tok/s below the mean %.1f", th.PeakOutputTokensPerS, th.OutputTokensPerS)
			}
		})
	}
}
