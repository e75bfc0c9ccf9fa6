package main

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/capture"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

// runCapture captures the logs names into out, saying its progress and
// what it kept and skipped on stderr.
func runCapture(c *cli.Context, o capture.Options, out string, names []string) error {
	s := stdio(c)
	create := func(m traces.Meta) (traces.Writer, error) {
		if out == "-" {
			return traces.NewJSONLWriter(nopWriteCloser{s.out}, m)
		}
		co := traces.DefaultCreateOptions()
		co.SortMemoryBytes, co.TempDir = o.SortMemoryBytes, o.TempDir
		return traces.CreateWith(out, m, co)
	}
	o.Progress = func(p capture.Progress) {
		if p.Phase == "writing" {
			fmt.Fprintf(s.err, "capture: %s writing %d of %d records\n", p.Elapsed.Round(time.Second), p.Written, p.Requests)
			return
		}
		fmt.Fprintf(s.err, "capture: %s read %d lines, %d requests\n", p.Elapsed.Round(time.Second), p.Lines, p.Requests)
	}
	command := captureCommandLine(c)
	if len(o.Key) == 0 {
		fmt.Fprintln(s.err, "capture: no --key-file: categories and blocks use a one-off key, not comparable with other captures")
	}
	stats, err := capture.Run(c.Context, o, names, s.in, command, create)
	if err != nil {
		// No summary of a capture that wrote nothing; the lines it
		// skipped may explain the error.
		printCaptureProblems(s.err, stats)
	} else {
		printCaptureStats(s.err, stats)
	}
	if o.Part {
		fmt.Fprintf(s.err, "capture: part %d: k-anonymity and sessions deferred: run 'tokentrace compose' over all the parts\n", o.PartIndex)
	}
	if errors.Is(err, capture.ErrNoRequests) {
		return fmt.Errorf("%w; %s", err, noRequestsHint(names))
	}
	if errors.Is(err, capture.ErrParquet) {
		return fmt.Errorf("%w; %s", err, parquetHint(names))
	}
	return err
}

// noRequestsHint points at the likely mistake behind an empty capture: a
// tokentrace trace given as logs, else the wrong --format.
func noRequestsHint(names []string) string {
	for _, n := range names {
		if n == "-" {
			continue
		}
		if isTrace(n) {
			return fmt.Sprintf("%s is already a tokentrace trace: give it to replay, analyze, synth or export, not capture", n)
		}
	}
	return "check --format (one of " + strings.Join(capture.Formats, ", ") + ")"
}

// isTrace reports that the named file reads as a tokentrace trace.
func isTrace(name string) bool {
	r, err := traces.Open(name)
	if err != nil {
		return false
	}
	defer r.Close()
	// Logs can sniff as JSON lines; a trace's first rows read clean.
	n8, _ := r.Read(make([]traces.Record, 8))
	return n8 > 0 && r.Stats().Skipped == 0
}

// parquetHint says what to do with a Parquet file given to capture (which
// reads serving logs): a tokentrace trace is used as it is, another
// tool's trace is converted by import.
func parquetHint(names []string) string {
	for _, n := range names {
		if n != "-" && isTrace(n) {
			return "it is already a tokentrace trace: use it as it is (replay, analyze, synth, export), not capture"
		}
	}
	return "capture reads serving logs; convert another tool's trace with 'tokentrace import'"
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// captureCommandLine rebuilds the command line for the metadata: flag names
// and values (file paths, numbers) and the log names; no secrets exist on it
// (keys are only read from files).
func captureCommandLine(c *cli.Context) string {
	parts := []string{"tokentrace", "capture"}
	for name := range setFlags(c) {
		switch name {
		case "field":
			for _, v := range c.StringSlice(name) {
				parts = append(parts, "--field", v)
			}
		case "keep-start", "keep-hashes", "strict":
			parts = append(parts, "--"+name)
		default:
			parts = append(parts, "--"+name, recordedValue(c, name))
		}
	}
	parts = append(parts, recordedArgs(c.Args().Slice())...)
	return strings.Join(parts, " ")
}

// printCaptureProblems prints the lines capture skipped, by kind.
func printCaptureProblems(w io.Writer, s capture.Stats) {
	for _, p := range s.Problems {
		fmt.Fprintf(w, "capture: skipped %d line(s): %s; first at %s:%d\n", p.Count, p.Kind, p.First.File, p.First.Line)
	}
}

func printCaptureStats(w io.Writer, s capture.Stats) {
	fmt.Fprintf(w, "capture: %d requests from %d lines (%d inputs, %.1f MB); %d categories kept, %d dropped (k rule); %d sessions\n",
		s.Requests, s.Lines, s.Inputs, float64(s.Bytes)/1e6, s.Categories, s.CategoriesDropped, s.Sessions)
	var srcs []string
	for src, n := range s.TokensFrom {
		srcs = append(srcs, fmt.Sprintf("%s %d", src, n))
	}
	if len(srcs) > 0 {
		sort.Strings(srcs)
		fmt.Fprintf(w, "capture: input tokens from %s\n", strings.Join(srcs, ", "))
	}
	printCaptureProblems(w, s)
	if s.ParentLinks > 0 || s.ParentsDropped > 0 {
		fmt.Fprintf(w, "capture: %d calls linked to the call that spawned them (parent_seq); %d logged parents not found among the captured calls of their session (dropped: a span of another kind, a call not captured, or another session)\n", s.ParentLinks, s.ParentsDropped)
	}
	if s.KAnonForgotten > 0 {
		fmt.Fprintf(w, "capture: k rule forgot %d categories and blocks seen once (--max-kanon-entries reached): any of them seen again counted anew\n", s.KAnonForgotten)
	}
	for _, ov := range s.Overlaps {
		fmt.Fprintf(w, "capture: %s and %s overlap in time by %v: their requests are merged by arrival (a request logged in both counts twice)\n",
			ov.A, ov.B, time.Duration(ov.Ns).Round(time.Millisecond))
	}
}
