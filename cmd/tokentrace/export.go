package main

import (
	"fmt"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

func exportCommand() *cli.Command {
	var (
		format string
		out    string
		o      traces.OpenOptions
		eo     traces.ExportOptions
	)
	return &cli.Command{
		Name:  "export",
		Usage: "write a trace in another format: Mooncake JSONL for AIPerf, SGLang and vllm bench serve, or JSONL/CSV",
		UsageText: `tokentrace export --format FORMAT [--out OUT] [--block-size N] [--ok-only] [--strict] TRACE

Examples:
  tokentrace export --format mooncake --out trace.jsonl trace.parquet
  vllm bench serve --dataset-name timed_trace --dataset-path trace.jsonl \
      --timed-trace-sec-multiplier 0.001 --timed-trace-chunk-hash-size 512 ...
  tokentrace export --format csv --out trace.csv trace.parquet
  tokentrace export --format jsonl trace.parquet | head`,
		Description: `export reads TRACE (any tokentrace codec, sniffed; "-" = stdin) and writes it
to --out ("-" = stdout) in one of these formats:
` + formatHelp(exportFormatDocs()) + `

It prints "exported N rows" on stderr. Exit codes: 0 ok, 1 failure, 2 usage.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Usage: "export format: " + strings.Join(traces.ExportFormats, ", "), Destination: &format},
			&cli.StringFlag{Name: "out", Value: "-", Usage: "output file (- = stdout)", Destination: &out},
			&cli.IntFlag{Name: "block-size", Usage: "mooncake: tokens per hash_ids entry (0 = the trace's block size, else 512)", Destination: &eo.BlockSize},
			&cli.BoolFlag{Name: "ok-only", Usage: "drop rows with a failed outcome (e.g. BurstGPT failures with 0 output tokens)", Destination: &eo.OKOnly},
			&cli.BoolFlag{Name: "strict", Usage: "fail on the first malformed row of TRACE instead of skipping it", Destination: &o.Strict},
		},
		Action: func(c *cli.Context) error {
			names, err := args(c, 1, 1, "the trace to export, - = stdin")
			if err != nil {
				return err
			}
			if err := formatArg("export", format, traces.ExportFormats); err != nil {
				return err
			}
			if err := eo.Validate(); err != nil {
				return usageErrorf("export: --block-size: %v", err)
			}
			if err := exportCheckOut(format, out); err != nil {
				return err
			}
			s := stdio(c)
			name := names[0]
			o.Stdin = s.in
			r, err := traces.OpenWith(name, o)
			if err != nil {
				return withCode(exitFailure, err)
			}
			defer r.Close()
			r = salvage(r, s.err, "export", name)
			var n int64
			if out == "-" {
				n, err = traces.Export(c.Context, format, s.out, r, eo)
			} else {
				n, err = traces.ExportFile(c.Context, format, out, r, eo)
			}
			if err != nil {
				return withCode(exitFailure, err)
			}
			fmt.Fprintf(s.err, "exported %d rows\n", n)
			if st := r.Stats(); st.Skipped > 0 {
				fmt.Fprintf(s.err, "skipped %d malformed rows of %s (first: %v)\n", st.Skipped, name, st.FirstSkip)
			}
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
	case format == "mooncake" && f == traces.FormatJSONL:
	case format != "mooncake" && strings.TrimSuffix(string(f), ".zst") == format:
	default:
		return usageErrorf("export: --out %s is named like a %s file but --format is %s (mooncake and jsonl write .jsonl, csv writes .csv)", out, f, format)
	}
	return nil
}

// exportFormatDocs are the export formats' names and docs, from the
// registry in package traces.
func exportFormatDocs() [][2]string {
	var d [][2]string
	for _, f := range traces.ExportFormatList() {
		d = append(d, [2]string{f.Name, f.Doc})
	}
	return d
}
