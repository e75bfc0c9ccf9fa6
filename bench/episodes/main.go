// Command episodes reads a replay's results file and prints how many
// requests were sent more than -over late and how many separate episodes
// they formed (late sends scheduled within -gap of each other belong to
// one), with how far apart the episodes began: a steady interval is a
// sawtooth, something in the client that grows until it is flushed. The
// bench scripts print it beside lateness p99 and the floor.
//
//	go run ./bench/episodes results.jsonl
//	go run ./bench/episodes -over 1ms -gap 10ms results.parquet
//
// Its output line:
//
//	episodes late>500µs 12 of 100000 (0.012%) in 3 episodes, apart p10 1.2s p50 2.5s p90 3.1s, worst 1.4ms
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tokentrace/tokentrace/bench/internal/episode"
	"github.com/tokentrace/tokentrace/traces"
)

func main() {
	over := flag.Duration("over", 500*time.Microsecond, "a send later than this is late")
	gap := flag.Duration("gap", 5*time.Millisecond, "late sends scheduled closer than this share an episode")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: episodes [-over D] [-gap D] RESULTS")
		os.Exit(2)
	}
	r, err := traces.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "episodes:", err)
		os.Exit(1)
	}
	defer r.Close()
	var sends []episode.Send
	for rec, err := range traces.All(r) {
		if err != nil {
			fmt.Fprintln(os.Stderr, "episodes:", err)
			os.Exit(1)
		}
		if late, ok := rec.Lateness(); ok {
			sends = append(sends, episode.Send{Scheduled: time.Duration(rec.ScheduledNs), Late: late})
		}
	}
	fmt.Println(episode.Find(sends, *over, *gap))
}
