package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/capture"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

const captureUsageText = `tokentrace capture [flags] LOG...

Examples:
  tokentrace capture --new-key-file capture.key --out trace.parquet gateway.jsonl.gz
  tokentrace capture --key-file capture.key --out week.parquet 'gateway.log*'   (rotated, .gz/.zst)
  tokentrace capture --format vllm-log --year 2025 --key-file capture.key --out trace.parquet vllm.log
  zcat spans.json.gz | tokentrace capture --format otlp-json --out - - > trace.jsonl
  tokentrace capture --field time=ts --field request=body.req --field response=body.resp --out t.parquet logs.jsonl`

const captureDescription = `capture reads openai-jsonl gateway logs, LiteLLM standard logging payloads,
vLLM request logs (--enable-log-requests / --enable-log-outputs) or OTLP JSON
span exports holding vLLM llm_request spans (gzip/zstd detected, "-" = stdin)
and writes a trace with no text: token counts (from usage numbers or token
ids, else --tokenizer), arrival offsets, renumbered sessions and turns,
k-anonymous prefix categories (HMAC-SHA256 of the system prompt + tools with
the key from --key-file), optional prefix block ids, and observed latencies
(run "production"). Malformed lines are counted by kind and reported by line
number only; --strict fails on the first.

Inputs (files, glob patterns, rotated and compressed logs) are merged into
one stream by arrival time; inputs that overlap in time are reported.
Memory does not grow with the number of requests: beyond --sort-memory-mib
the requests are sorted in runs spilled to --temp-dir (removed at the end,
also on failure and Ctrl-C).`

func captureCommand() *cli.Command {
	o := capture.DefaultOptions()
	var (
		out, keyFile, newKeyFile string
		fields                   cli.StringSlice
		sortMiB                  int
		memLimitMiB              = defaultCaptureMemLimitMiB
		part                     = -1
	)
	return &cli.Command{
		Name:        "capture",
		Usage:       "turn serving logs into a content-free, privacy-redacted trace",
		UsageText:   captureUsageText,
		Description: captureDescription,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output trace (.parquet, .jsonl, .jsonl.zst, .csv; - = stdout JSONL)", Required: true, Destination: &out},
			&cli.StringFlag{Name: "format", Usage: "log format: " + strings.Join(capture.Formats, ", "), Value: o.Format, Destination: &o.Format},
			&cli.StringSliceFlag{Name: "field", Usage: "openai-jsonl: remap NAME=dotted.path (names: time, request, response, session, user, status, ttft_ms, latency_ms, end_time, trace_id, call_id, parent_call_id)", Destination: &fields},
			&cli.StringFlag{Name: "key-file", Usage: "HMAC key file (64 hex chars or >=16 bytes); without one an ephemeral key is used and hashes are not comparable across captures", Destination: &keyFile},
			&cli.StringFlag{Name: "new-key-file", Usage: "generate a random key, save it at this path (mode 0600, never overwritten) and use it", Destination: &newKeyFile},
			&cli.StringFlag{Name: "tokenizer", Usage: "tiktoken encoding where logs lack usage numbers and token ids: " + strings.Join(capture.Tokenizers, ", "), Value: o.Tokenizer, Destination: &o.Tokenizer},
			&cli.IntFlag{Name: "min-category-size", Usage: "k: categories and prefix blocks shared by fewer requests are dropped", Value: o.MinCategorySize, Destination: &o.MinCategorySize},
			&cli.IntFlag{Name: "block-size", Usage: "prefix block size in tokens (0 = no prefix_blocks)", Value: o.BlockSize, Destination: &o.BlockSize},
			&cli.StringFlag{Name: "sessions", Usage: "how to find sessions: auto (session/user field or trace id, else chat structure), field, chat, none", Value: o.Sessions, Destination: &o.Sessions},
			&cli.IntFlag{Name: "year", Usage: "vllm-log: year of the timestamps, which carry none (0 = current UTC year)", Value: o.Year, Destination: &o.Year},
			&cli.BoolFlag{Name: "keep-start", Usage: "keep the absolute start time exactly (default: to the hour)", Destination: &o.KeepStart},
			&cli.BoolFlag{Name: "keep-hashes", Usage: "write keyed digests instead of renumbered category and block ids", Destination: &o.KeepHashes},
			&cli.BoolFlag{Name: "strict", Usage: "fail on the first malformed line", Destination: &o.Strict},
			&cli.IntFlag{Name: "workers", Usage: "goroutines parsing JSON formats (0 = all cores; output does not depend on it)", Value: o.Workers, Destination: &o.Workers},
			&cli.IntFlag{Name: "max-line-bytes", Usage: "skip (and count) longer lines", Value: o.MaxLineBytes, Destination: &o.MaxLineBytes},
			&cli.IntFlag{Name: "sort-memory-mib", Usage: "memory for sorting requests (and the Parquet output) by arrival; beyond it sorted runs spill to --temp-dir", Value: int(capture.DefaultSortMemoryBytes >> 20), Destination: &sortMiB},
			&cli.StringFlag{Name: "temp-dir", Usage: "where sorted runs spill (removed at the end; default: $TMPDIR or /tmp)", Destination: &o.TempDir},
			&cli.IntFlag{Name: "memory-limit-mib", Usage: "soft memory limit for the Go runtime (the collector works harder near it; GOMEMLIMIT overrides; 0 = none)", Value: memLimitMiB, Destination: &memLimitMiB},
			&cli.IntFlag{Name: "max-kanon-entries", Usage: "categories and prefix blocks the k rule counts at once; when full, those seen once are forgotten (they can then only be dropped)", Value: capture.DefaultMaxKAnonEntries, Destination: &o.MaxKAnonEntries},
			&cli.IntFlag{Name: "part", Usage: "write part N (0, 1, ...) of a trace captured in parts: k-anonymity deferred to 'tokentrace compose' over all the parts; needs --key-file (-1 = a whole trace)", Value: part, Destination: &part},
			&cli.DurationFlag{Name: "session-idle", Usage: "a session (field or chat conversation) idle for longer has ended; a later request starts a new one (bounds memory to the sessions of this window)", Value: o.SessionIdle, Destination: &o.SessionIdle},
		},
		Action: func(c *cli.Context) error {
			names, err := args(c, 1, -1, "log files, - = stdin")
			if err != nil {
				return err
			}
			f := captureArgs{out: out, keyFile: keyFile, newKeyFile: newKeyFile, fields: fields.Value(), sortMiB: sortMiB, memLimitMiB: memLimitMiB, part: part}
			if err := f.apply(&o, names); err != nil {
				return err
			}
			return runCapture(c, o, f.out, names)
		},
	}
}

// captureArgs are capture's flags that do not map one to one onto an
// option.
type captureArgs struct {
	out, keyFile, newKeyFile string
	fields                   []string
	sortMiB, memLimitMiB     int
	part                     int
}

// apply checks the flags and sets what they say in o (the key read or
// made, the memory budgets, the part), then validates o: a usage error
// names the flag.
func (f captureArgs) apply(o *capture.Options, names []string) error {
	if err := fieldFlags(o, f.fields); err != nil {
		return err
	}
	if f.sortMiB < 1 {
		return usageErrorf("--sort-memory-mib %d: want at least 1", f.sortMiB)
	}
	o.SortMemoryBytes = int64(f.sortMiB) << 20
	if f.memLimitMiB < 0 {
		return usageErrorf("--memory-limit-mib %d: want 0 (none) or more", f.memLimitMiB)
	}
	if f.memLimitMiB > 0 && os.Getenv("GOMEMLIMIT") == "" {
		// What capture holds is bounded (spool, sessions window,
		// k counts); without a limit the collector lets garbage
		// double it before it runs.
		debug.SetMemoryLimit(int64(f.memLimitMiB) << 20)
	}
	if f.keyFile != "" && f.newKeyFile != "" {
		return usageErrorf("--key-file and --new-key-file: give one")
	}
	if f.part >= 0 && f.keyFile == "" && f.newKeyFile == "" {
		return usageErrorf("--part needs --key-file: every part must be captured with the same key")
	}
	o.PartIndex = max(f.part, 0)
	if err := o.Validate(); err != nil {
		return usageError(fmt.Errorf("capture: %w", err), captureFlags)
	}
	var err error
	if o.Key, err = captureKey(f.keyFile, f.newKeyFile); err != nil {
		return err
	}
	if f.out != "-" {
		// Before hours of reading logs, not after.
		if _, err := traces.FormatOf(f.out); err != nil {
			return usageErrorf("capture: --out %s: %w", f.out, err)
		}
	}
	o.Part = f.part >= 0
	if i := slices.Index(names, "-"); i >= 0 && slices.Contains(names[i+1:], "-") {
		return usageErrorf("capture: stdin (-) given more than once")
	}
	return nil
}

// defaultCaptureMemLimitMiB is capture's soft memory limit: its bounded
// state at the default budgets (64 MiB sort, an hour of sessions at
// 1,000 req/s, 2 Mi k counts) stays well under it.
const defaultCaptureMemLimitMiB = 448

// captureFlags are the capture and compose commands' flags whose option
// (capture's, by the name its errors give) is not their kebab-cased name.
var captureFlags = map[string]string{
	"Options.Key":             "--key-file",
	"Options.Fields":          "--field",
	"Options.SortMemoryBytes": "--sort-memory-mib",
	"Options.MaxKAnonEntries": "--max-kanon-entries",
	"Options.PartIndex":       "--part",
}

// fieldFlags maps --field NAME=path remappings into o.Fields.
func fieldFlags(o *capture.Options, fields []string) error {
	for _, f := range fields {
		name, path, ok := strings.Cut(f, "=")
		if !ok || name == "" || path == "" {
			return usageErrorf("--field %q: want NAME=path", f)
		}
		if o.Fields == nil {
			o.Fields = map[string]string{}
		}
		o.Fields[name] = path
	}
	return nil
}

// captureKey is the HMAC key of --key-file, or a new one saved at
// --new-key-file; nil without either (an ephemeral key).
func captureKey(keyFile, newKeyFile string) ([]byte, error) {
	switch {
	case keyFile != "":
		key, err := capture.ReadKeyFile(keyFile)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w (to make a new key there: --new-key-file %s)", err, keyFile)
		}
		return key, err
	case newKeyFile != "":
		key, err := capture.NewKeyFile(newKeyFile)
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("%w (to use the key it holds: --key-file %s; keys are never overwritten)", err, newKeyFile)
		}
		return key, err
	}
	return nil, nil
}
