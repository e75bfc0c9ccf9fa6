// Command vegetalate computes schedule lateness from vegeta results, so
// vegeta can be compared with tokentrace replay on the measure that matters
// for trace replay. vegeta records each hit's actual send time but not its
// intended one; at a constant rate r the i-th hit was due at began + i/r.
// began is not recorded either. vegeta's pacer never sends a hit before it
// is due, so began is at most min_i(t_i − i/r); taking exactly that makes
// the earliest-relative hit 0 late and every figure a lower bound on
// vegeta's true lateness (it favours vegeta). Taking the first send as
// began instead gave negative lateness when vegeta's first hit was late
// and the pacer caught up.
//
// Its second line counts the sends late by more than -over and the
// episodes they formed, as bench/episodes does for tokentrace's results.
//
//	vegeta encode -to json results.bin | vegetalate -rate 1000
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"time"

	"github.com/tokentrace/tokentrace/bench/internal/episode"
)

func main() {
	rate := flag.Float64("rate", 0, "constant attack rate (requests/s)")
	over := flag.Duration("over", 500*time.Microsecond, "a send later than this is late (the episodes line)")
	gap := flag.Duration("gap", 5*time.Millisecond, "late sends scheduled closer than this share an episode")
	flag.Parse()
	if *rate <= 0 {
		log.Fatal("vegetalate: -rate is required")
	}
	var ts []time.Time
	codes := map[int]int{}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r struct {
			Timestamp time.Time `json:"timestamp"`
			Code      int       `json:"code"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			log.Fatalf("vegetalate: %v", err)
		}
		ts = append(ts, r.Timestamp)
		codes[r.Code]++
	}
	if len(ts) == 0 {
		log.Fatal("vegetalate: no results")
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	due := func(i int) time.Duration { return time.Duration(float64(i) / *rate * 1e9) }
	began := ts[0]
	for i, t := range ts {
		if b := t.Add(-due(i)); b.Before(began) {
			began = b
		}
	}
	late := make([]time.Duration, len(ts))
	sends := make([]episode.Send, len(ts))
	for i, t := range ts {
		late[i] = t.Sub(began.Add(due(i)))
		sends[i] = episode.Send{Scheduled: due(i), Late: late[i]}
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	p := func(q float64) time.Duration { return late[int(q*float64(len(late)-1))] }
	fmt.Printf("requests %d codes %v\nlateness p50 %v p99 %v max %v\n", len(ts), codes, p(0.5), p(0.99), late[len(late)-1])
	fmt.Println(episode.Find(sends, *over, *gap))
}
