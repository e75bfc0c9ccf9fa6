package main

import (
	"fmt"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
	"github.com/urfave/cli/v2"
)

func exportCommand() *cli.Command {
	var (
		format string
		out    string
		rf     readFlags
		eo     = formats.DefaultExportOptions()
	)
	return &cli.Command{
		Name:  "export",
		Usage: "write a trace for another tool (AIPerf, inference-perf, GuideLLM, SGLang, vllm, ...) or as JSONL/CSV",
		UsageText: `tokentrace export --format FORMAT [--out OUT] [--block-size N] [--ok-only] [--strict] [--salvage] TRACE

Examples:
  tokentrace export --format mooncake --out trace.jsonl trace.parquet
  tokentrace export --format vllm --out timed.jsonl trace.parquet
  vllm bench serve --dataset-name timed_trace --dataset-path timed.jsonl \
      --timed-trace-chunk-hash-size 16 ...
  tokentrace export --format aiperf-dag --out agents.dag.jsonl agentic.parquet
  tokentrace export --format csv --out trace.csv trace.parquet
  tokentrace export --format jsonl trace.parquet | head`,
		Description: `export reads TRACE (any tokentrace codec, sniffed; "-" = stdin) and writes it
to --out ("-" = stdout) in one of these formats (docs/traces.md says what each
carries and loses):
` + formatHelp(exportFormatDocs()) + `

Bad rows of TRACE are skipped and named on stderr (--strict fails on the
first); rows out of arrival order are exported in file order. It prints
"exported N rows" on stderr.

What the format cannot hold is said once per export on stderr with a count
("note: 3 parent links ... not representable in aiperf"). Formats written
session by session (aiperf-dag, inference-perf, sglang-agentic, weka) hold the
trace in memory until the end. Exit codes: 0 ok, 1 failure, 2 usage.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "format", Usage: "export format: " + strings.Join(formats.ExportFormats, ", "), Destination: &format},
			&cli.StringFlag{Name: "out", Value: "-", Usage: "output file (- = stdout)", Destination: &out},
			&cli.IntFlag{Name: "block-size", Value: eo.BlockSize, Usage: "tokens per hash_ids entry (0 = the trace's block size, else the format's: 512, vllm 16, weka 64)", Destination: &eo.BlockSize},
			&cli.BoolFlag{Name: "ok-only", Usage: "drop rows with a failed outcome (e.g. BurstGPT failures with 0 output tokens)", Destination: &eo.OKOnly},
		}, rf.flags()...),
		Action: func(c *cli.Context) error {
			names, err := args(c, 1, 1, "the trace to export, - = stdin")
			if err != nil {
				return err
			}
			if err := formatArg("export", format, formats.ExportFormats); err != nil {
				return err
			}
			if err := eo.Validate(); err != nil {
				return usageError(fmt.Errorf("export: %w", err), nil)
			}
			if err := exportCheckOut(format, out); err != nil {
				return err
			}
			s := stdio(c)
			name := names[0]
			eo.Lost = func(l traces.Text) { fmt.Fprintf(s.err, "note: %s\n", l.Say(cliTerms{})) }
			r, err := newTraceIn(c, &rf, "export", "exported in file order").open(name)
			if err != nil {
				return withCode(exitFailure, err)
			}
			defer r.Close()
			var n int64
			if out == "-" {
				n, err = formats.Export(c.Context, format, s.out, r, eo)
			} else {
				n, err = formats.ExportFile(c.Context, format, out, r, eo)
			}
			if err != nil {
				return withCode(exitFailure, err)
			}
			fmt.Fprintf(s.err, "exported %d rows\n", n)
			return nil
		},
	}
}

// exportCheckOut refuses an --out whose extension names a codec the format
// does not write.
func exportCheckOut(format, out string) error {
	if out == "-" {
		return nil
	}
	f, err := traces.FormatOf(out)
	if err != nil {
		return nil // no known extension: written as asked
	}
	switch {
	case format == "csv" || format == "jsonl":
		if strings.TrimSuffix(string(f), ".zst") == format {
			return nil
		}
	case format == "azure":
		if f == traces.FormatCSV {
			return nil
		}
	case f == traces.FormatJSONL:
		return nil // the peer formats are JSON lines or JSON
	}
	return usageErrorf("export: --out %s is named like a %s file but --format is %s (csv and azure write .csv, jsonl and the other formats .jsonl or .json)", out, f, format)
}

// exportFormatDocs are the export formats' names and docs, from the
// registry in package formats.
func exportFormatDocs() [][2]string {
	var d [][2]string
	for _, f := range formats.ExportFormatList() {
		d = append(d, [2]string{f.Name, f.Doc.Say(cliTerms{})})
	}
	return d
}
