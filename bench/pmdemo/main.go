// Command pmdemo plays the incident of bench/postmortem-demo.sh (package
// incident: a burst on one of two servers, the results pooled as the
// gateway would have logged them) and writes the pooled trace with its
// wall-clock start recorded exactly, as capture --keep-start does. With
// --fleet it plays bench/postmortem-pd-demo.sh's instead (package
// pdincident: a burst of long prompts on a disaggregated fleet's one
// prefill replica). It returns once the servers have been idle for a few
// seconds, so Prometheus has scraped the whole incident.
//
//	go run ./bench/pmdemo --a http://127.0.0.1:18431 --b http://127.0.0.1:18432 --out incident.parquet
//	go run ./bench/pmdemo --fleet http://127.0.0.1:18433 --out incident.parquet
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tokentrace/tokentrace/bench/pmdemo/incident"
	"github.com/tokentrace/tokentrace/bench/pmdemo/pdincident"
	"github.com/tokentrace/tokentrace/internal/promtest"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

func main() {
	a := flag.String("a", "", "base URL of the server the burst overflows")
	b := flag.String("b", "", "base URL of the other server")
	out := flag.String("out", "incident.parquet", "where to write the pooled trace")
	seed := flag.Uint64("seed", 16, "seed of the lengths and arrival times")
	fleetURL := flag.String("fleet", "", "base URL of a disaggregated fleet (tokentrace sim "+pdincident.Fleet+"): play its incident instead")
	promURL := flag.String("prometheus", "", "if set, wait until this Prometheus has scraped its targets 3 times")
	flag.Parse()
	if *fleetURL == "" && (*a == "" || *b == "") {
		fmt.Fprintln(os.Stderr, "pmdemo: --a and --b, or --fleet, are required")
		os.Exit(2)
	}
	if *promURL != "" {
		if err := promtest.AwaitScrapes(*promURL, 3); err != nil {
			fmt.Fprintln(os.Stderr, "pmdemo:", err)
			os.Exit(1)
		}
	}
	run := func() error { return run(context.Background(), [2]string{*a, *b}, *out, *seed) }
	if *fleetURL != "" {
		run = func() error { return runFleet(context.Background(), *fleetURL, *out, *seed) }
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pmdemo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, urls [2]string, out string, seed uint64) error {
	pl, err := incident.Play(ctx, urls, incident.Parts(seed), traces.NewMeta("pmdemo"), demoOptions())
	if err != nil {
		return err
	}
	return keepLog(out, "pooled", pl, pl.Pooled, pl.Origin, pl.Last)
}

func runFleet(ctx context.Context, url, out string, seed uint64) error {
	pl, err := pdincident.Play(ctx, url, pdincident.Records(seed), traces.NewMeta("pmdemo"), demoOptions())
	if err != nil {
		return err
	}
	return keepLog(out, "logged", pl, pl.Logged, pl.Origin, pl.Last)
}

// demoOptions replays the incident's requests as they are, without asking
// the servers what they serve first.
func demoOptions() replay.Options {
	ro := replay.DefaultOptions()
	ro.NoPreflight = true
	return ro
}

// keepLog writes recs, the gateway's log of an incident played from origin
// to last, to out with its exact start (pl.StartMeta), and returns once the
// servers have been idle for a few seconds.
func keepLog(out, how string, pl interface{ StartMeta(*traces.Meta) }, recs []traces.Record, origin time.Time, last time.Duration) error {
	m := traces.NewMeta("pmdemo:gateway")
	pl.StartMeta(&m)
	if err := traces.WriteAll(out, m, recs); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "pmdemo: %d requests %s into %s (start %s)\n", len(recs), how, out, origin.UTC().Format(time.RFC3339))
	time.Sleep(time.Until(origin.Add(last + 4*time.Second)))
	return nil
}
