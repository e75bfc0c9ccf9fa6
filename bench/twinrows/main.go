// Command twinrows writes the results of a simulated replay (what a
// streaming replay against a server would record: sends, every chunk's
// time, the server's timings) for the twin's benchmarks: sim fit and sim
// check on a million rows.
//
//	go run ./bench/twinrows -rows 1000000 -out results.parquet
package main

import (
	"context"
	"flag"
	"fmt"
	"iter"
	"os"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/sim/twin"
	"github.com/tokentrace/tokentrace/traces"
)

func main() {
	rows := flag.Int("rows", 1000000, "requests to simulate")
	rate := flag.Float64("rate", 40, "arrivals per second")
	config := flag.String("sim", "step-fixed=4ms,prefill-per-token=20us,decode-per-seq=60us,attn-per-context-token=50ns,max-num-seqs=64", "the simulated server's configuration")
	out := flag.String("out", "results.parquet", "results file to write")
	flag.Parse()
	if err := run(*rows, *rate, *config, *out); err != nil {
		fmt.Fprintln(os.Stderr, "twinrows:", err)
		os.Exit(1)
	}
}

func run(n int, rate float64, config, out string) error {
	o := sim.DefaultOptions()
	if err := sim.ApplyConfig(&o, config); err != nil {
		return err
	}
	w, err := traces.Create(out, traces.NewMeta("replay"))
	if err != nil {
		return err
	}
	batch := make([]traces.Record, 0, 4096)
	_, err = twin.Predict(context.Background(), o, trace(n, rate), measuredRun(), func(r traces.Record) error {
		batch = append(batch, r.Clone())
		if len(batch) == cap(batch) {
			_, err := w.Write(batch)
			batch = batch[:0]
			return err
		}
		return nil
	})
	if err == nil {
		_, err = w.Write(batch)
	}
	if err != nil {
		traces.Abort(w)
		return err
	}
	return w.Close()
}

// trace streams n requests at rate per second (seeded): prompts of 64 to
// 1563 tokens, outputs of 4 to 43.
func trace(n int, rate float64) iter.Seq2[traces.Record, error] {
	return func(yield func(traces.Record, error) bool) {
		x := uint64(5)
		at := 0.0
		for i := range n {
			x += 0x9E3779B97F4A7C15
			z := (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
			z = (z ^ (z >> 27)) * 0x94D049BB133111EB
			z ^= z >> 31
			at += float64(z%2000) / 1000 / rate * 1e9
			r := traces.NewRecord()
			r.Seq, r.ArrivalNs = int64(i), int64(at)
			r.InputTokens, r.OutputTokens = int32(64+z%1500), int32(4+(z>>20)%40)
			if !yield(r, nil) {
				return
			}
		}
	}
}

// measuredRun are the prediction's options with its rows labelled as a
// measured run's.
func measuredRun() twin.PredictOptions {
	po := twin.DefaultPredictOptions()
	po.Run = "measured"
	return po
}
