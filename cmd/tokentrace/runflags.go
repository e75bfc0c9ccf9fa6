package main

// Flag helpers that several commands share: replay's run-record options
// (replay and sweep), analyze's capacity flags, and inspect's run lines.

import (
	"context"
	"fmt"
	"io"
	"iter"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/internal/redact"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

// runRecordOptions fills the replay options that record what a run was
// (background loads, run label metadata, model map, server
// self-description) from their flags.
// Errors are usage errors naming the flag.
func runRecordOptions(o *replay.Options, background, metadata, modelMap []string, describe bool) error {
	for _, b := range background {
		bg, err := replay.ParseBackground(b)
		if err != nil {
			return usageError(err, replayFlags)
		}
		o.Background = append(o.Background, bg)
	}
	var err error
	if o.Metadata, err = replay.ParseMetadata(metadata); err != nil {
		return usageError(err, replayFlags)
	}
	if o.ModelMap, err = replay.ParseModelMap(modelMap); err != nil {
		return usageError(err, replayFlags)
	}
	o.DescribeServer = describe
	return nil
}

// capacityFlagValues are analyze's bandwidth and cost flags.
type capacityFlagValues struct {
	modelBytes, bandwidth string
	costPerHour           float64
}

func capacityFlags(v *capacityFlagValues) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model-bytes", Usage: "weight size, e.g. 16GB: with --bandwidth, print the decode floor (bytes/bandwidth per step) beside the unloaded TPOT", Destination: &v.modelBytes},
		&cli.StringFlag{Name: "bandwidth", Usage: "memory bandwidth, e.g. 3.35TB/s (with --model-bytes)", Destination: &v.bandwidth},
		&cli.Float64Flag{Name: "cost-per-hour", Usage: "deployment price per hour: print cost per million output tokens (and goodput tokens with --slo)", Destination: &v.costPerHour},
	}
}

func (v *capacityFlagValues) apply(o *analyze.Options) error {
	var err error
	if v.modelBytes != "" {
		if o.ModelBytes, err = analyze.ParseBytes(v.modelBytes); err != nil {
			return usageErrorf("--model-bytes: %w", err)
		}
	}
	if v.bandwidth != "" {
		if o.Bandwidth, err = analyze.ParseBandwidth(v.bandwidth); err != nil {
			return usageErrorf("--bandwidth: %w", err)
		}
	}
	if (o.ModelBytes > 0) != (o.Bandwidth > 0) {
		return usageErrorf("--model-bytes and --bandwidth: give both (e.g. --model-bytes 16GB --bandwidth 3.35TB/s)")
	}
	if v.costPerHour < 0 || math.IsNaN(v.costPerHour) || math.IsInf(v.costPerHour, 0) {
		return usageErrorf("--cost-per-hour: want a positive price, got %v", v.costPerHour)
	}
	o.CostPerHour = v.costPerHour
	return nil
}

// attributeGroups gives each --by group its own tail attribution (it reads
// the files again, streaming; only with --by).
func attributeGroups(ctx context.Context, rep *analyze.Report, names []string) error {
	return analyze.AttributeGroupsFiles(ctx, rep, names)
}

// runRecordLine is inspect's "run" line: label and --metadata pairs.
func runRecordLine(m traces.Meta) string {
	var parts []string
	if l := m.Get(replay.MetaLabel); l != "" {
		parts = append(parts, "label "+l)
	}
	var keys []string
	for k := range m.Extra {
		if strings.HasPrefix(k, replay.MetaUserPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, strings.TrimPrefix(k, replay.MetaUserPrefix)+"="+m.Extra[k])
	}
	if b := m.Get(replay.MetaBackground); b != "" {
		parts = append(parts, "background "+b)
	}
	return strings.Join(parts, ", ")
}

// serverLine is inspect's "server" line: what the server said about itself.
func serverLine(m traces.Meta) string {
	var parts []string
	for _, k := range []string{replay.MetaServerVersion, replay.MetaServerModels, replay.MetaServerInfo} {
		if v := m.Get(k); v != "" {
			parts = append(parts, strings.TrimPrefix(k, "server.")+" "+v)
		}
	}
	return strings.Join(parts, ", ")
}

// readAPIKey reads the bearer token of --api-key-file. Its errors name
// the file and keep the cause; the key itself is never in them.
func readAPIKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", usageError(fmt.Errorf("--api-key-file: %w", err), nil)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", usageErrorf("--api-key-file: %s is empty", path)
	}
	return key, nil
}

// headerFlag collects repeated --header "Name: value" flags without
// splitting on commas (header values may contain them).
type headerFlag struct{ v []string }

func (h *headerFlag) Set(s string) error { h.v = append(h.v, s); return nil }
func (h *headerFlag) String() string     { return "" }

// parseHeaders parses "Name: value" strings.
func parseHeaders(hs []string) (http.Header, error) {
	h := http.Header{}
	for _, s := range hs {
		k, v, ok := strings.Cut(s, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf(`--header: want "Name: value", got a malformed header`)
		}
		h.Add(k, strings.TrimSpace(v))
	}
	return h, nil
}

// strconvQuote quotes s when it holds spaces.
func strconvQuote(s string) string {
	if strings.ContainsAny(s, " \t\"'") {
		return strconv.Quote(s)
	}
	return s
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	if r, ok := w.(redactWriter); ok {
		w = r.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// pathFlags are the flags whose values are file paths.
var pathFlags = map[string]bool{
	"out": true, "key-file": true, "new-key-file": true, "journal": true, "metrics-out": true,
	"api-key-file": true, "html": true, "requests-out": true, "vllm-json": true,
}

// setFlags yields the name of each flag of c's command that its command
// line set, and the flag, in the order the command declares them.
func setFlags(c *cli.Context) iter.Seq2[string, cli.Flag] {
	return func(yield func(string, cli.Flag) bool) {
		for _, f := range c.Command.Flags {
			if name := f.Names()[0]; c.IsSet(name) && !yield(name, f) {
				return
			}
		}
	}
}

// recordedValue is flag name's value as a trace's metadata records it: a
// path by its base name only.
func recordedValue(c *cli.Context, name string) string {
	v := fmt.Sprint(c.Value(name))
	if pathFlags[name] {
		return recordedPath(v)
	}
	return v
}

// recordedPath is how a path appears in a recorded command line (Meta.Command):
// its base name only, because directories can name customers and people.
func recordedPath(p string) string {
	if p == "-" || p == "" {
		return p
	}
	return filepath.Base(p)
}

// recordedArgs maps recordedPath over positional arguments.
func recordedArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = recordedPath(a)
	}
	return out
}

// replayCommandLine rebuilds the command line for the metadata from the
// flags that were set, with header values removed and every value's URLs
// redacted (their userinfo, query values and fragments: by value, so a
// secret in any flag, --target, --metrics-url or a --background spec
// alike, is never recorded).
func replayCommandLine(c *cli.Context, headers []string) string {
	parts := []string{"tokentrace", "replay"}
	add := func(name, v string) { parts = append(parts, "--"+name, strconvQuote(redact.URLs(v))) }
	for name, f := range setFlags(c) {
		switch name {
		case "header":
			for _, h := range headers {
				k, _, _ := strings.Cut(h, ":")
				parts = append(parts, "--header", strconvQuote(strings.TrimSpace(k)+": "+redact.Mark))
			}
		default:
			if gf, ok := f.(*cli.GenericFlag); ok {
				if hf, ok := gf.Value.(*headerFlag); ok { // --background, --metadata, --model-map
					for _, v := range hf.v {
						add(name, v)
					}
					continue
				}
			}
			if bf, ok := f.(*cli.BoolFlag); ok {
				parts = append(parts, fmt.Sprintf("--%s=%v", name, c.Bool(bf.Name)))
				continue
			}
			add(name, recordedValue(c, name))
		}
	}
	for _, a := range recordedArgs(c.Args().Slice()) {
		parts = append(parts, strconvQuote(redact.URLs(a)))
	}
	return strings.Join(parts, " ")
}
