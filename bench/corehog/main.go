// Command corehog makes the core it is pinned to slower for whatever else
// runs there: it spins for -share of every -period and sleeps the rest,
// for -duration at most (it is bounded: it never outlives a run by much).
// Started at a lower priority (nice) on the replayer's core, it is the
// bench scripts' reproduction of a slower or shared virtual CPU, so that a
// timing fix can be shown on a fast machine too (SLOWCORE=1 in
// bench/vegeta-compare.sh and bench/dispatcher-stalls.sh).
//
//	taskset -c 1 nice -n 5 go run ./bench/corehog -share 0.5 -period 10ms -duration 60s
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	share := flag.Float64("share", 0.5, "fraction of each period spent spinning, 0 to 1")
	period := flag.Duration("period", 10*time.Millisecond, "spin-then-sleep period")
	duration := flag.Duration("duration", time.Minute, "how long it runs at most")
	flag.Parse()
	if *share < 0 || *share > 1 || *period <= 0 {
		fmt.Fprintln(os.Stderr, "corehog: -share must be in [0,1] and -period > 0")
		os.Exit(2)
	}
	busy := time.Duration(*share * float64(*period))
	end := time.Now().Add(*duration)
	for start := time.Now(); start.Before(end); start = time.Now() {
		for time.Since(start) < busy {
		}
		if rest := *period - time.Since(start); rest > 0 {
			time.Sleep(rest)
		}
	}
}
