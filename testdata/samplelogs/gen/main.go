// Command gen writes made-up openai-jsonl gateway logs, the demo's input
// (see capture.WriteSampleLogs). All text is invented.
//
//	go run ./testdata/samplelogs/gen -out testdata/samplelogs/sample.jsonl -seed 1
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tokentrace/tokentrace/capture"
)

func main() {
	out := flag.String("out", "-", "output file (- = stdout)")
	seed := flag.Int64("seed", 1, "random seed")
	dur := flag.Duration("duration", capture.DefaultSampleOptions().Duration, "span of arrivals")
	rate := flag.Float64("rate", capture.DefaultSampleOptions().Rate, "new conversations per second outside the burst")
	flag.Parse()
	o := capture.DefaultSampleOptions()
	o.Duration, o.Rate = *dur, *rate
	w := os.Stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		w = f
	}
	start := time.Now()
	if err := capture.WriteSampleLogs(context.Background(), w, *seed, o); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if w != os.Stdout {
		if err := w.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "gen: wrote %s in %v\n", *out, time.Since(start).Round(time.Millisecond))
}
