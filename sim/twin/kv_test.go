package twin

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// TestFitKVCacheOfSlowServer fits the KV cache's size from a gateway's
// log of a server (send, first and last token, lengths) and its metrics
// series, where the server's latencies ran past what its steps explain (a
// busy machine): the step costs fitted first absorb the slowdown, and a
// simulation with the server's own cache then runs slower than the rows
// while the prior's cache, which never fills, matches their latencies
// better. What the server reported about its cache (usage at 100 %,
// preemptions) decides: the size read off the metrics is kept within 5 %.
// A cache that never filled keeps the prior.
func TestFitKVCacheOfSlowServer(t *testing.T) {
	costs := "step-fixed=6ms,prefill-per-token=30us,decode-per-seq=250us,attn-per-context-token=200ns,max-num-seqs=12,"
	for _, c := range []struct {
		name   string
		blocks int
		rate   float64
		// slow stretches every logged latency (first and last token
		// from the send).
		slow float64
		// want is the num-gpu-blocks the fit reports, and a phrase of
		// why.
		want     int
		wantFrom string
	}{
		{"a server on its model's time, its cache filled and preempting: the size read off the metrics",
			700, 10, 1, 700, "the prior's 26000 blocks never do"},
		{"a server 10 % slower than its steps, its cache filled and preempting: the size read off the metrics, though the prior's cache fits the latencies better",
			700, 10, 1.1, 700, "the prior's 26000 blocks never do"},
		{"a server 20 % slower than its steps at a higher load: the size read off the metrics",
			700, 12, 1.2, 700, "the prior's 26000 blocks never do"},
		{"a server 20 % slower whose cache never filled: the prior kept",
			4000, 10, 1.2, 26000, "prior: the cache never filled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hidden := mustConfig(t, costs+"num-gpu-blocks="+strconv.Itoa(c.blocks))
			recs := gatewayWorkload(300, c.rate, 7)
			logged := stretched(asLogged(measure(t, hidden, recs)), c.slow)
			samples := scraped(t, hidden, recs, 1e9)
			if c.slow != 1 {
				// The series a server with this cache reports while its
				// requests hold the blocks the logged rows say (its
				// usage agrees with the rows, as a real server's does);
				// its preemptions are the run's.
				for i := range samples {
					samples[i].KVCacheUsage = min(1, heldBlocks(logged, samples[i].TimeNs, hidden.BlockSize)/float64(c.blocks))
				}
			}
			res, err := Fit(context.Background(), []Input{{Name: "log", Rows: traces.Values(logged), Samples: samples}}, DefaultFitOptions())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range res.Report.Params {
				t.Logf("%s = %s (%v) %s", p.Key, p.Value, p.Fitted, p.From)
			}
			p := param(t, res, "num-gpu-blocks")
			got, err := strconv.Atoi(p.Value)
			if err != nil || !within(float64(got), float64(c.want), 0.05) || got != res.Options.NumGPUBlocks {
				t.Errorf("num-gpu-blocks = %s (options %d), want %d within 5 %%: %s", p.Value, res.Options.NumGPUBlocks, c.want, p.From)
			}
			if !strings.Contains(p.From, c.wantFrom) {
				t.Errorf("num-gpu-blocks from %q, want it to say %q", p.From, c.wantFrom)
			}
		})
	}
}

// gatewayWorkload is workload's arrivals with a gateway log's requests:
// prompts of 64 to 1563 tokens, outputs of 8 to 167, no shared prefixes
// or sessions.
func gatewayWorkload(n int, rate float64, seed uint64) []traces.Record {
	recs := workload(n, rate, seed)
	for i := range recs {
		r := &recs[i]
		r.InputTokens = 64 + (r.InputTokens-r.PrefixTokens-64)*1500/1984
		r.OutputTokens = 8 + (r.OutputTokens-8)*160/192
		r.Category, r.PrefixTokens, r.Session = "", 0, 0
	}
	return recs
}

// stretched is rows with their first and last token factor times as far
// from the send.
func stretched(rows []traces.Record, factor float64) []traces.Record {
	out := make([]traces.Record, len(rows))
	for i, r := range rows {
		if r.FirstTokenNs >= 0 {
			r.FirstTokenNs = r.SentNs + int64(float64(r.FirstTokenNs-r.SentNs)*factor)
			r.LastTokenNs = r.SentNs + int64(float64(r.LastTokenNs-r.SentNs)*factor)
		}
		out[i] = r
	}
	return out
}
