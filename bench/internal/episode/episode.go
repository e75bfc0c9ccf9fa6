// Package episode groups a run's late sends into episodes, for the bench
// scripts: a p99 says how late the worst 1 % were, not whether they came
// spread out or in bursts, and bursts that recur at a steady interval
// (a sawtooth) point at something that grows until it is flushed.
package episode

import (
	"fmt"
	"slices"
	"time"
)

// Send is one request's schedule and how late it was sent.
type Send struct {
	Scheduled, Late time.Duration
}

// Summary is what Find tells about a run's late sends.
type Summary struct {
	Over time.Duration // the threshold: a send later than this is late
	Gap  time.Duration // late sends closer than this (scheduled) share an episode
	N    int           // sends
	Late int           // sends later than Over
	// Episodes is how many separate episodes the late sends formed, and
	// Worst the latest send.
	Episodes int
	Worst    time.Duration
	// Apart holds p10, p50 and p90 of the time between the starts of
	// consecutive episodes (zero with fewer than two): a narrow spread
	// around a steady interval is a periodic episode structure.
	Apart [3]time.Duration
}

// Find sorts sends by schedule and groups those later than over into
// episodes: a late send scheduled within gap of the previous late one
// continues its episode.
func Find(sends []Send, over, gap time.Duration) Summary {
	s := Summary{Over: over, Gap: gap, N: len(sends)}
	slices.SortFunc(sends, func(a, b Send) int { return int(a.Scheduled - b.Scheduled) })
	var starts []time.Duration
	last := time.Duration(0)
	for _, x := range sends {
		s.Worst = max(s.Worst, x.Late)
		if x.Late <= over {
			continue
		}
		if s.Late == 0 || x.Scheduled-last > gap {
			s.Episodes++
			starts = append(starts, x.Scheduled)
		}
		s.Late++
		last = x.Scheduled
	}
	if len(starts) >= 2 {
		apart := make([]time.Duration, len(starts)-1)
		for i := range apart {
			apart[i] = starts[i+1] - starts[i]
		}
		slices.Sort(apart)
		for i, q := range []float64{0.1, 0.5, 0.9} {
			s.Apart[i] = apart[int(q*float64(len(apart)-1))]
		}
	}
	return s
}

// Share is the fraction of the sends that were late, in percent.
func (s Summary) Share() float64 {
	if s.N == 0 {
		return 0
	}
	return 100 * float64(s.Late) / float64(s.N)
}

// String is the line the bench scripts print:
//
//	episodes late>500µs 2844 of 100000 (2.844%) in 181 episodes, apart p10 40ms p50 43ms p90 47ms, worst 3.2ms
func (s Summary) String() string {
	line := fmt.Sprintf("episodes late>%v %d of %d (%.3f%%) in %d episodes", s.Over, s.Late, s.N, s.Share(), s.Episodes)
	if s.Episodes >= 2 {
		line += fmt.Sprintf(", apart p10 %v p50 %v p90 %v", round(s.Apart[0]), round(s.Apart[1]), round(s.Apart[2]))
	}
	return line + fmt.Sprintf(", worst %v", round(s.Worst))
}

func round(d time.Duration) time.Duration {
	if d >= time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
