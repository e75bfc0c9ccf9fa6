package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

// inspectMaxLabels bounds the categories and models listed in text output
// (--json lists all).
const inspectMaxLabels = 10

func inspectCommand() *cli.Command {
	var (
		asJSON bool
		rf     readFlags
	)
	return &cli.Command{
		Name:  "inspect",
		Usage: "summarize trace or results files: rate, burstiness, lengths, categories, outcomes",
		UsageText: `tokentrace inspect [--json] [--strict] [--salvage] TRACE...

Examples:
  tokentrace inspect trace.parquet
  tokentrace inspect --json results.parquet | jq .outcome.ttft_ms.p99
  tokentrace export --format jsonl --out - trace.parquet | tokentrace inspect -`,
		Description: `inspect reads each trace or results file (Parquet, JSONL, JSONL+zstd or CSV,
sniffed from the content; "-" = stdin) and prints its rows, duration, mean
request rate (1 / mean inter-arrival gap), burstiness (coefficient of
variation of the inter-arrival gaps: 1 = Poisson, > 1 = bursty), input and
output token quantiles (p50/p90/p99/max, linear interpolation) and sums,
prefix categories and models with their shares, sessions, the metadata, and
for results files the outcome summary (ok/failed by status; TTFT and E2E of
successful requests and client lateness, p50/p90/p99/max in ms).

--json prints one JSON object per file with stable snake_case keys (file,
rows, skipped_rows, bad_rows, duration_s, rate_rps, burstiness_cv,
input_tokens.{p50,p90,p99,max,mean,sum}, output_tokens.{...}, categories,
sessions, models, outcome, meta).

Bad rows are skipped, counted by kind and named on stderr (--strict fails
on the first); rows out of arrival order are kept and counted. A truncated
file prints the summary of the rows before the damage and exits 1 (0 with
--salvage). A file with rows but no valid one is an error.`,
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per file", Destination: &asJSON},
		}, rf.flags()...),
		Action: func(c *cli.Context) error {
			names, err := args(c, 1, -1, "trace files, - = stdin")
			if err != nil {
				return err
			}
			std := stdio(c)
			in := newTraceIn(c, &rf, "inspect", "kept (inspect sorts the arrivals it measures)")
			var failed []error
			fail := func(err error) {
				failed = append(failed, err)
				if len(names) > 1 {
					fmt.Fprintf(std.err, "tokentrace inspect: %v\n", err)
				}
			}
			for i, name := range names {
				s, err := inspectFile(c, name, in)
				if err != nil && (s == nil || errors.Is(err, traces.ErrNoValidRows)) {
					fail(err)
					continue
				}
				if asJSON {
					if werr := writeSummaryJSON(std.out, name, s); werr != nil {
						return werr
					}
				} else {
					if i > 0 {
						fmt.Fprintln(std.out)
					}
					writeSummaryText(std.out, name, s)
				}
				if err != nil {
					fail(err)
				}
			}
			switch {
			case len(failed) == 0:
				return nil
			case len(names) == 1:
				return withCode(exitFailure, fmt.Errorf("inspect: %w", failed[0]))
			}
			return withCode(exitFailure, fmt.Errorf("inspect: %d of %d files failed (see above)", len(failed), len(names)))
		},
	}
}

func inspectName(name string) string {
	if name == "-" {
		return "stdin"
	}
	return name
}

// inspectFile summarizes one file. A nil summary means it could not be
// opened; a summary with an error is a partial read.
func inspectFile(c *cli.Context, name string, in *traceIn) (*traces.Summary, error) {
	r, err := in.open(name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	s, err := traces.Summarize(c.Context, r)
	return &s, err
}

type summaryJSON struct {
	File string `json:"file"`
	*traces.Summary
}

func writeSummaryJSON(w io.Writer, name string, s *traces.Summary) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if s.Categories == nil {
		s.Categories = []traces.Share{}
	}
	if s.Models == nil {
		s.Models = []traces.Share{}
	}
	return enc.Encode(summaryJSON{File: name, Summary: s})
}

func writeSummaryText(w io.Writer, name string, s *traces.Summary) {
	p := func(key, format string, a ...any) {
		fmt.Fprintf(w, "  %-14s "+format+"\n", append([]any{key}, a...)...)
	}
	fmt.Fprintf(w, "%s\n", inspectName(name))
	rows := fmt.Sprintf("%d", s.Rows)
	if s.SkippedRows > 0 {
		rows += fmt.Sprintf(" (%d bad %s skipped)", s.SkippedRows, plural(s.SkippedRows, "row", "rows"))
	}
	if n := s.BadRows[traces.ProblemOutOfOrder.Key()]; n > 0 {
		rows += fmt.Sprintf(" (%d out of arrival order)", n)
	}
	if s.Truncated {
		rows += " (file truncated: rows before the damage)"
	}
	p("rows", "%s", rows)
	p("duration", "%.3f s", s.DurationS)
	p("rate", "%.3f req/s", s.RateRPS)
	p("burstiness", "%.3f (CV of inter-arrival gaps; 1 = Poisson)", s.BurstinessCV)
	dist := func(d traces.Dist) string {
		return fmt.Sprintf("p50 %s  p90 %s  p99 %s  max %s  mean %.1f  sum %.0f", inspectNum(d.P50), inspectNum(d.P90), inspectNum(d.P99), inspectNum(d.Max), d.Mean, d.Sum)
	}
	p("input_tokens", "%s", dist(s.InputTokens))
	p("output_tokens", "%s", dist(s.OutputTokens))
	p("sessions", "%d", s.Sessions)
	p("categories", "%s", shareList(s.Categories, "(none)"))
	p("models", "%s", shareList(s.Models, "(unset)"))
	p("meta", "%s", metaLine(s.Meta))
	if l := runRecordLine(s.Meta); l != "" { // runflags.go
		p("run", "%s", l)
	}
	if l := serverLine(s.Meta); l != "" {
		p("server", "%s", l)
	}
	if o := s.Outcome; o != nil {
		p("outcome", "%s", outcomeLine(o))
		lat := func(l traces.Latency) string {
			if l.N == 0 {
				return "n 0"
			}
			return fmt.Sprintf("n %d  p50 %.2f  p90 %.2f  p99 %.2f  max %.2f", l.N, l.P50, l.P90, l.P99, l.Max)
		}
		p("ttft_ms", "%s", lat(o.TTFTMs))
		p("e2e_ms", "%s", lat(o.E2EMs))
		p("lateness_ms", "%s", lat(o.LatenessMs))
	}
}

// inspectNum prints whole numbers without decimals, others with one.
func inspectNum(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func shareList(sh []traces.Share, empty string) string {
	if len(sh) == 0 {
		return "-"
	}
	var parts []string
	for i, x := range sh {
		if i == inspectMaxLabels {
			parts = append(parts, fmt.Sprintf("... %d more", len(sh)-i))
			break
		}
		n := x.Name
		if n == "" {
			n = empty
		}
		parts = append(parts, fmt.Sprintf("%s %.1f%% (%d)", n, 100*x.Share, x.Count))
	}
	return fmt.Sprintf("%d: %s", len(sh), strings.Join(parts, ", "))
}

// metaLine is m's Parquet key/values (traces.Meta.KeyValues) without their
// prefixes, with "schema" and "k" for short and empty extras left out.
func metaLine(m traces.Meta) string {
	var parts []string
	for _, kv := range m.KeyValues() {
		k, v := strings.TrimPrefix(kv[0], "tokentrace."), kv[1]
		if x, ok := strings.CutPrefix(k, "extra."); ok {
			if v == "" {
				continue
			}
			k = x
		} else if k == "schema_version" {
			k = "schema"
		} else if k == "k_threshold" {
			k = "k"
		}
		parts = append(parts, k+" "+v)
	}
	return strings.Join(parts, ", ")
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// outcomeLine is the outcome of a results file: its requests, ok and
// failed, and the failures by kind (ok is said once, not again among them).
func outcomeLine(o *traces.OutcomeSummary) string {
	var st []string
	for _, k := range slices.Sorted(maps.Keys(o.ByStatus)) {
		if k != traces.StatusOK {
			st = append(st, fmt.Sprintf("%s %d", k, o.ByStatus[k]))
		}
	}
	line := fmt.Sprintf("%d requests: ok %d, failed %d", o.Requests, o.OK, o.Failed)
	if len(st) > 0 {
		line += " (" + strings.Join(st, ", ") + ")"
	}
	return line
}
