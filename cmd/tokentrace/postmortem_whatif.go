package main

// postmortem --what-if: a twin fitted from the incident's own window (the
// trace's logged latencies and the Prometheus history stored beside it),
// asked what the same requests would have seen with a change.

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/sim/twin"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

// twinPathFor is where postmortem writes the incident's twin: beside the
// trace, incident.parquet → incident.twin.conf.
func twinPathFor(trace string) string {
	base := strings.TrimSuffix(trace, filepath.Ext(trace))
	base = strings.TrimSuffix(base, ".jsonl") // incident.jsonl.zst
	return base + ".twin.conf"
}

// checkWhatIfs validates the --what-if changes before any work.
func checkWhatIfs(specs []string) error {
	for _, w := range specs {
		o := sim.DefaultOptions()
		if err := sim.ApplyConfig(&o, w); err != nil {
			return usageErrorf("--what-if: %w", err)
		}
	}
	return nil
}

// postmortemWhatIf fits the incident's twin (writing it to out), checks it
// against the incident itself and prints its answers to the changes.
func postmortemWhatIf(c *cli.Context, in *traceIn, trace string, samples []traces.MetricsSample, specs []string, out string, w io.Writer) error {
	prompt, err := twinPrompt(in, trace)
	if err != nil {
		return err
	}
	inputs := []twin.Input{{Name: trace, Rows: readRows(in, trace), Samples: samples}}
	fo := twin.DefaultFitOptions()
	fo.Prompt, fo.Terms = prompt, cliTerms{}
	fit, err := twin.Fit(c.Context, inputs, fo)
	if err != nil {
		return err
	}
	if err := fit.WriteFile(out); err != nil {
		return err
	}
	o := replay.BuiltinSim()
	if err := sim.ApplyConfig(&o, "config="+out); err != nil {
		return err
	}
	co := twin.DefaultCheckOptions()
	co.Prompt, co.WhatIfs = prompt, specs
	chk, err := twin.Check(c.Context, o, inputs, co)
	if err != nil {
		return err
	}
	if err := twin.RecordCheck(out, chk.Summary()); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nWhat if: the incident's requests on a twin fitted from its own window (%s, sim:config=%s)\n", fit.Config(), out)
	return chk.WriteText(w)
}
