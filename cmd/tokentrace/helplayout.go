package main

// Each command's --help in the order a first run needs it: the usage line
// and three examples, the flags most runs set, the rest of the flags
// grouped under headings, then the description and any further examples.
// urfave/cli's own layout puts the description first (replay's flags began
// below the first screen) and sorts categories and the flags in them by
// name, so the page is written here, in the layout's order, with each
// flag's Category set from it.

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"
)

// helpLayout places a command's flags: top first, without a heading, then
// each group under its name. A command with a layout places every flag
// (TestHelpFirstScreen checks it); one without lists its flags as defined.
type helpLayout struct {
	top    []string
	groups []helpGroup
}

type helpGroup struct {
	name  string
	flags []string
}

// helpExamples is how many examples the first screen shows.
const helpExamples = 3

// helpLayouts are the layouts of the commands with too many flags for one
// screen, by command path.
var helpLayouts = map[string]helpLayout{
	"replay": {
		top: []string{"target", "url", "model", "out", "speed", "window", "duration", "max-concurrency", "max-lateness", "quiet"},
		groups: []helpGroup{
			{"Requests", []string{"api", "force-api", "no-vllm-extensions", "continuous-usage", "header", "api-key-file", "model-map", "block-size", "no-calibrate", "timeout", "warmup", "no-preflight", "background"}},
			{"Sessions", []string{"sessions", "max-think", "session-affinity", "session-header", "context-growth", "strict-sessions"}},
			{"Several replayers", []string{"shard", "start-at", "clock-probes"}},
			{"Run control", []string{"run", "drain", "max-failed", "journal", "keep-journal", "no-realtime", "net-http"}},
			{"Server-side measures", []string{"replica-header", "prefill-replica-header", "otlp-listen", "otlp-grace", "metrics-url", "metrics-instance-label", "metrics-role-label", "metrics-interval", "metrics-out", "sim-per-request-metrics", "no-describe-server"}},
			{"Results metadata", []string{"label", "metadata"}},
			{"Input and output files", []string{"sort-memory-mib", "temp-dir", "strict", "salvage"}},
		},
	},
	"sim": {
		top: []string{"listen", "preset", "config", "model", "replicas", "router", "truth-out", "virtual", "seed"},
		groups: []helpGroup{
			{"Engine", []string{"max-num-seqs", "max-num-batched-tokens", "num-gpu-blocks", "block-size", "max-model-len", "no-prefix-caching", "max-num-queued-reqs", "policy", "stream-interval", "mean-output-tokens"}},
			{"Step costs", []string{"step-fixed", "prefill-per-token", "decode-per-seq", "attn-per-context-token"}},
			{"Fleet", []string{"prefill-replicas", "decode-replicas", "kv-transfer-latency", "kv-transfer-per-token", "kv-transfer-bandwidth", "kv-transfer-bytes-per-token", "replica-config"}},
			{"API behaviour", []string{"per-request-metrics", "request-id-headers", "prompt-tokens-details", "flat-errors", "otlp-traces-endpoint"}},
			{"Faults", []string{"fail-rate", "fail-status", "disconnect-rate", "stream-error-rate", "stall-rate", "stall-duration"}},
		},
	},
	"sweep": {
		top: []string{"target", "url", "model", "slo", "speeds", "search", "out-dir", "json", "quiet"},
		groups: []helpGroup{
			{"Search and judging", []string{"slo-percentile", "search-range", "search-tolerance", "repeat"}},
			{"Requests", []string{"model-map", "window", "max-concurrency", "timeout"}},
			{"Built-in simulator", []string{"sim-preset", "sim-max-num-seqs", "sim-max-num-batched-tokens", "sim-num-gpu-blocks", "sim-step-fixed", "sim-prefill-per-token", "sim-decode-per-seq", "sim-attn-per-context-token", "sim-per-request-metrics", "sim-config"}},
			{"Output", []string{"ext", "chart", "label", "metadata"}},
			{"Input files", []string{"strict", "salvage"}},
		},
	},
	"validate": {
		top: []string{"target", "metrics", "slo", "speed", "repeat", "html", "json", "quiet"},
		groups: []helpGroup{
			{"Statistics", []string{"seed", "resamples", "confidence", "min-effect-pct", "magnitude-tolerance"}},
			{"Explaining a broken conclusion", []string{"explain", "combination-budget"}},
			{"Runs", []string{"realtime", "model", "model-map", "api-key-file", "timeout", "out-dir", "fail-if-broken"}},
			{"Input files", []string{"strict", "salvage"}},
		},
	},
	"analyze": {
		top: []string{"slo", "tail", "tail-metric", "by", "html", "json", "format", "window"},
		groups: []helpGroup{
			{"Attribution", []string{"ignore-server-timings", "requests-out", "class"}},
			{"vLLM bench serve output", []string{"vllm-json", "percentile-metrics", "metric-percentiles", "max-concurrency", "request-rate"}},
			{"Capacity and cost", []string{"kv-blocks", "session-idle", "model-bytes", "bandwidth", "cost-per-hour"}},
			{"Input files", []string{"exact-rows", "strict", "salvage"}},
		},
	},
	"analyze compare": {
		top: []string{"mode", "slo", "tail", "tail-metric", "label-a", "label-b", "html", "json"},
		groups: []helpGroup{
			{"Statistics", []string{"seed", "resamples", "confidence", "max-sample", "threshold-pct", "practical-pct", "min-change-ms", "max-lateness"}},
			{"Attribution", []string{"ignore-server-timings", "class"}},
			{"Input files", []string{"exact-rows", "strict", "salvage"}},
		},
	},
	"capture": {
		top: []string{"out", "format", "key-file", "new-key-file", "field", "tokenizer", "strict"},
		groups: []helpGroup{
			{"Privacy", []string{"min-category-size", "keep-start", "keep-hashes", "max-kanon-entries"}},
			{"Trace shape", []string{"block-size", "sessions", "session-idle", "year", "part"}},
			{"Resources", []string{"workers", "max-line-bytes", "sort-memory-mib", "temp-dir", "memory-limit-mib"}},
		},
	},
	"postmortem": {
		top: []string{"prometheus", "start", "slo", "tail-metric", "tail", "html", "json", "what-if"},
		groups: []helpGroup{
			{"Prometheus", []string{"step", "selector", "instance-label", "role-label", "bearer-token-file", "basic-auth-file", "timeout", "metrics-out"}},
			{"Input files", []string{"strict", "salvage"}},
		},
	},
}

// layoutHelp gives c and its subcommands their help page (path is c's
// parent, "" for a top-level command) and sets each flag's Category from
// its layout.
func layoutHelp(c *cli.Command, parent string) {
	path := strings.TrimSpace(parent + " " + c.Name)
	if l, ok := helpLayouts[path]; ok {
		for _, g := range l.groups {
			for _, name := range g.flags {
				if f := findFlag(c.Flags, name); f != nil {
					setCategory(f, g.name)
				}
			}
		}
	}
	c.CustomHelpTemplate = strings.ReplaceAll(helpPage(c, path), "{{", `{{"{{"}}`)
	for _, sub := range c.Subcommands {
		layoutHelp(sub, path)
	}
}

// setCategory sets a flag's Category field (every flag type of urfave/cli
// has one; no interface sets it).
func setCategory(f cli.Flag, name string) {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return
	}
	if fv := v.Elem().FieldByName("Category"); fv.IsValid() && fv.CanSet() && fv.Kind() == reflect.String {
		fv.SetString(name)
	}
}

// exampleHead is the line that starts a usage text's examples.
var exampleHead = regexp.MustCompile(`^\s*Examples?:\s*$`)

// descExamples is the line that starts a description's closing examples.
var descExamples = regexp.MustCompile(`(?m)^Examples?:[ \t]*$`)

// splitUsage splits a command's UsageText into its usage lines and its
// examples (an example's indented continuation lines belong to it).
func splitUsage(text string) (usage []string, examples []string) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	i := 0
	for ; i < len(lines) && !exampleHead.MatchString(lines[i]); i++ {
		usage = append(usage, lines[i])
	}
	for len(usage) > 0 && strings.TrimSpace(usage[len(usage)-1]) == "" {
		usage = usage[:len(usage)-1]
	}
	indent := -1
	for _, l := range lines[min(i+1, len(lines)):] {
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		in := len(l) - len(strings.TrimLeft(l, " "))
		if indent < 0 {
			indent = in
		}
		if in > indent && len(examples) > 0 {
			examples[len(examples)-1] += "\n" + strings.Repeat(" ", in-indent) + t
			continue
		}
		examples = append(examples, t)
	}
	return usage, examples
}

// helpPage is the text of c's --help (path: its command path).
func helpPage(c *cli.Command, path string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	indent := func(s, by string) string {
		lines := strings.Split(s, "\n")
		for i, l := range lines {
			if l != "" {
				lines[i] = by + l
			}
		}
		return strings.Join(lines, "\n")
	}
	p("NAME:\n   tokentrace %s - %s\n\nUSAGE:\n", path, c.Usage)
	usage, examples := splitUsage(c.UsageText)
	desc := c.Description
	if len(examples) == 0 {
		// Some commands give their example at the end of the description.
		if m := descExamples.FindAllStringIndex(desc, -1); len(m) > 0 {
			i := m[len(m)-1][0]
			_, examples = splitUsage(desc[i:])
			desc = desc[:i]
		}
	}
	if len(usage) == 0 {
		usage = []string{"tokentrace " + path + " [flags]"}
	}
	p("%s\n", indent(strings.Join(usage, "\n"), "   "))
	if len(examples) > 0 {
		p("\nEXAMPLES:\n%s\n", indent(strings.Join(examples[:min(helpExamples, len(examples))], "\n"), "   "))
	}
	if subs := visibleSubcommands(c); len(subs) > 0 {
		p("\nCOMMANDS:\n")
		for _, s := range subs {
			p("   %s\t%s\n", s.Name, s.Usage)
		}
	}
	p("\nOPTIONS:\n")
	for _, f := range layoutFlags(c, path) {
		if f.group != "" {
			p("\n   %s:\n", f.group)
			continue
		}
		p("   %s\n", f.flag)
	}
	if desc = strings.TrimRight(desc, "\n"); desc != "" {
		p("\nDESCRIPTION:\n%s\n", indent(desc, "   "))
	}
	if len(examples) > helpExamples {
		p("\nMORE EXAMPLES:\n%s\n", indent(strings.Join(examples[helpExamples:], "\n"), "   "))
	}
	return b.String()
}

func visibleSubcommands(c *cli.Command) []*cli.Command {
	var out []*cli.Command
	for _, s := range c.Subcommands {
		if !s.Hidden && s.Name != "help" {
			out = append(out, s)
		}
	}
	return out
}

// helpLine is a line of the options: a flag, or the heading of a group.
type helpLine struct {
	flag  cli.Flag
	group string
}

// layoutFlags lists c's visible flags in its layout's order: the top ones
// and --help, then each group's heading and flags; flags the layout does
// not place (none, when TestHelpFirstScreen passes) come last, as defined.
// Without a layout, the flags as defined and --help.
func layoutFlags(c *cli.Command, path string) []helpLine {
	var out []helpLine
	placed := map[string]bool{}
	add := func(name string) {
		if f := findFlag(c.Flags, name); f != nil && !placed[name] {
			placed[name] = true
			out = append(out, helpLine{flag: f})
		}
	}
	l := helpLayouts[path]
	for _, name := range l.top {
		add(name)
	}
	var rest []helpLine
	for _, f := range c.Flags {
		if v, ok := f.(cli.VisibleFlag); (ok && !v.IsVisible()) || f == cli.HelpFlag || inLayout(l, f.Names()[0]) {
			continue
		}
		rest = append(rest, helpLine{flag: f})
	}
	help := helpLine{flag: cli.HelpFlag}
	if len(l.top) == 0 {
		return append(append(out, rest...), help)
	}
	out = append(out, help)
	for _, g := range l.groups {
		out = append(out, helpLine{group: g.name})
		for _, name := range g.flags {
			add(name)
		}
	}
	return append(out, rest...)
}

func inLayout(l helpLayout, name string) bool {
	for _, n := range l.top {
		if n == name {
			return true
		}
	}
	for _, g := range l.groups {
		for _, n := range g.flags {
			if n == name {
				return true
			}
		}
	}
	return false
}
