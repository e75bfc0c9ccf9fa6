package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

func importCommand() *cli.Command {
	var (
		format string
		out    string
		o      traces.OpenOptions
		sf     = sortFlags{mib: traces.DefaultSortMemoryBytes >> 20}
	)
	return &cli.Command{
		Name:  "import",
		Usage: "convert a public LLM request trace (Mooncake, Azure, BurstGPT, Splitwise) into a tokentrace trace",
		UsageText: `tokentrace import --format FORMAT [--strict] [--out OUT] FILE

Examples:
  tokentrace import --format azure --out code.parquet AzureLLMInferenceTrace_code.csv
  tokentrace import --format mooncake --out conv.parquet conversation_trace.jsonl
  tokentrace import --format burstgpt --out burst.parquet BurstGPT_3.csv.gz
  zcat trace.jsonl.gz | tokentrace import --format mooncake - | tokentrace inspect -`,
		Description: `import reads FILE ("-" = stdin; gzip or zstd compressed files are
decompressed) in one public trace format and writes a tokentrace trace:
Parquet, JSONL, JSONL+zstd or CSV chosen by the extension of --out
("-" = JSON lines on stdout).

Formats (columns are found by name):
  mooncake   JSONL {timestamp (ms), input_length, output_length, hash_ids}:
             hash_ids become prefix_blocks (block size 512); the leading blocks a
             row shares with earlier rows give its category "prefix-<id>" and
             prefix_tokens (shared blocks x 512, capped at the prompt)
  azure      Azure LLM inference CSV TIMESTAMP,ContextTokens,GeneratedTokens
             (2023: CRLF, 7-digit fractions; 2024: +00:00 offsets); arrivals are
             exact offsets from the first row
  burstgpt   BurstGPT CSV (v1/v2, and v3 with Session ID and Elapsed time):
             model, class (conversation/api), sessions and turns; failed rows
             (0 response tokens) are kept with status http_error
  splitwise  Vidur's processed CSVs (arrived_at s, num_prefill_tokens,
             num_decode_tokens)

Malformed rows (a missing column, a negative or non-integer count, a line that
is not JSON) are skipped and counted; --strict stops at the first one with an
error naming the file and line. It prints "imported N rows (skipped M
malformed)" on stderr. Exit codes: 0 ok, 1 failure, 2 usage.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "format", Usage: "import format: " + strings.Join(traces.ImportFormats, ", "), Destination: &format},
			&cli.StringFlag{Name: "out", Value: "-", Usage: "output trace (.parquet, .jsonl, .jsonl.zst, .csv, .csv.zst; - = JSON lines on stdout)", Destination: &out},
			&cli.BoolFlag{Name: "strict", Usage: "fail on the first malformed row instead of skipping and counting it (default: skip)", Destination: &o.Strict},
		}, sf.flags()...),
		Action: func(c *cli.Context) error {
			names, err := args(c, 1, 1, "the public trace file, - = stdin")
			if err != nil {
				return err
			}
			if err := formatArg("import", format, traces.ImportFormats); err != nil {
				return err
			}
			if out != "-" {
				if _, err := traces.FormatOf(out); err != nil {
					return usageErrorf("import: --out %s: %w", out, err)
				}
			}
			s := stdio(c)
			name := names[0]
			o.Stdin = s.in
			r, err := traces.Import(c.Context, format, name, o)
			if err != nil {
				return withCode(exitFailure, err)
			}
			defer r.Close()
			m := r.Meta()
			m.Command = importCommandLine(format, o.Strict, name)
			co, err := sf.options()
			if err != nil {
				return err
			}
			n, err := importWrite(c, r, out, m, format, co)
			st := r.Stats()
			if err != nil {
				return withCode(exitFailure, err)
			}
			fmt.Fprintf(s.err, "imported %d rows (skipped %d malformed)\n", n, st.Skipped)
			if st.FirstSkip != nil {
				fmt.Fprintf(s.err, "first skipped row: %v\n", st.FirstSkip)
			}
			return nil
		},
	}
}

// importCommandLine is Meta.Command of an import.
func importCommandLine(format string, strict bool, name string) string {
	cmd := "tokentrace import --format " + format
	if strict {
		cmd += " --strict"
	}
	return cmd + " " + recordedPath(name)
}

// importWrite copies r into the trace out ("-" = JSONL on stdout); on
// failure a partial output file is removed.
func importWrite(c *cli.Context, r traces.Reader, out string, m traces.Meta, format string, co traces.CreateOptions) (int64, error) {
	var (
		w   traces.Writer
		err error
	)
	if out == "-" {
		w, err = traces.NewWriter(importStdout{stdio(c).out}, traces.FormatJSONL, m, traces.CreateOptions{})
	} else {
		w, err = traces.CreateWith(out, m, co)
	}
	if err != nil {
		return 0, err
	}
	n, err := importCopy(c, w, r)
	if err == nil && n == 0 {
		st := r.Stats()
		err = fmt.Errorf("no rows imported: all %d rows are malformed for --format %s (first: %v); check --format (one of %s)",
			st.Skipped, format, st.FirstSkip, strings.Join(traces.ImportFormats, ", "))
		if st.Skipped == 0 {
			err = errors.New("no rows imported: the input is empty")
		}
	}
	if err != nil {
		traces.Abort(w) // the output name never holds a partial or empty trace
		return n, err
	}
	if cerr := w.Close(); cerr != nil {
		return n, fmt.Errorf("write: %w", cerr)
	}
	return n, nil
}

func importCopy(c *cli.Context, w traces.Writer, r traces.Reader) (int64, error) {
	buf := make([]traces.Record, 4096)
	var total int64
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			m, err := w.Write(buf[:n])
			total += int64(m)
			if err != nil {
				return total, fmt.Errorf("write: %w", err)
			}
			buf = make([]traces.Record, len(buf)) // writers may keep record slices
		}
		if errors.Is(rerr, io.EOF) {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
}

// importStdout hides Close so writers leave stdout open.
type importStdout struct{ io.Writer }
