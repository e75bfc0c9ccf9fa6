package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
	"github.com/urfave/cli/v2"
)

func importCommand() *cli.Command {
	var (
		format string
		out    string
		rf     readFlags
		sf     = sortFlags{mib: traces.DefaultSortMemoryBytes >> 20}
	)
	return &cli.Command{
		Name:  "import",
		Usage: "convert a public or another tool's trace (Mooncake, Azure, AIPerf, Dynamo, ...) into a tokentrace trace",
		UsageText: `tokentrace import --format FORMAT [--strict] [--salvage] [--out OUT] FILE

Examples:
  tokentrace import --format azure --out code.parquet AzureLLMInferenceTrace_code.csv
  tokentrace import --format mooncake --out conv.parquet conversation_trace.jsonl
  tokentrace import --format burstgpt --out burst.parquet BurstGPT_3.csv.gz
  zcat trace.*.jsonl.gz | tokentrace import --format dynamo --out agents.parquet -
  zcat trace.jsonl.gz | tokentrace import --format mooncake - | tokentrace inspect -`,
		Description: `import reads FILE ("-" = stdin; gzip or zstd compressed files are
decompressed) in one public or peer trace format and writes a tokentrace trace:
Parquet, JSONL, JSONL+zstd or CSV chosen by the extension of --out
("-" = JSON lines on stdout).

Formats (columns are found by name; docs/traces.md says what each carries
and loses):
` + formatHelp(importFormatDocs()) + `

What a format has that tokentrace does not keep, or what had to be estimated
(token counts from message text), is printed as "note: ..." lines with counts.

Bad rows (a missing column, a negative, fractional or out-of-range count, a
line that is not JSON) are skipped, counted by kind and named on stderr;
--strict stops at the first one with an error naming the file and line. A
damaged (truncated) input is an error unless --salvage. It prints "imported
N rows" on stderr. Exit codes: 0 ok, 1 failure, 2 usage.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "format", Usage: "import format: " + strings.Join(formats.ImportFormats, ", "), Destination: &format},
			&cli.StringFlag{Name: "out", Value: "-", Usage: "output trace (.parquet, .jsonl, .jsonl.zst, .csv, .csv.zst; - = JSON lines on stdout)", Destination: &out},
		}, append(rf.flags(), sf.flags()...)...),
		Action: func(c *cli.Context) error {
			names, err := args(c, 1, 1, "the public trace file, - = stdin")
			if err != nil {
				return err
			}
			if err := formatArg("import", format, formats.ImportFormats); err != nil {
				return err
			}
			if out != "-" {
				if _, err := traces.FormatOf(out); err != nil {
					return usageErrorf("import: --out %s: %w", out, err)
				}
			}
			s := stdio(c)
			name := names[0]
			o := rf.options(c)
			r, err := formats.Import(c.Context, format, name, o)
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
			fmt.Fprintf(s.err, "imported %d rows\n", n)
			for _, note := range st.Notes(name, "") {
				fmt.Fprintf(s.err, "tokentrace import: warning: %s\n", note)
			}
			for _, note := range formats.ImportNotes(r) {
				fmt.Fprintf(s.err, "note: %s\n", note.Say(cliTerms{}))
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
		w, err = traces.NewWriter(importStdout{stdio(c).out}, traces.FormatJSONL, m, traces.DefaultCreateOptions())
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
			st.Skipped, format, st.FirstSkip, strings.Join(formats.ImportFormats, ", "))
		if long := st.Bad[traces.ProblemTooLong].Rows; long == st.Skipped && long > 0 {
			err = fmt.Errorf("no rows imported: all %d rows are too long (first: %v); --max-line-mib raises the limit", long, st.Bad[traces.ProblemTooLong].First)
		}
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

// importFormatDocs are the import formats' names and docs, from the
// registry in package formats, so --help lists every format import takes.
func importFormatDocs() [][2]string {
	var d [][2]string
	for _, f := range formats.ImportFormatList() {
		d = append(d, [2]string{f.Name, f.Doc})
	}
	return d
}

// formatHelp lays out formats (name, doc) for --help: the name in a
// column, the doc wrapped beside it to fit 80 columns under --help's indent.
func formatHelp(formats [][2]string) string {
	w := 0
	for _, f := range formats {
		w = max(w, len(f[0]))
	}
	var b strings.Builder
	for i, f := range formats {
		if i > 0 {
			b.WriteByte('\n')
		}
		indent := strings.Repeat(" ", 2+w+2)
		line := fmt.Sprintf("  %-*s  ", w, f[0])
		for _, word := range strings.Fields(f[1]) {
			if len(line)+len(word) > 77 && strings.TrimSpace(line) != f[0] {
				b.WriteString(strings.TrimRight(line, " ") + "\n")
				line = indent
			}
			line += word + " "
		}
		b.WriteString(strings.TrimRight(line, " "))
	}
	return b.String()
}
