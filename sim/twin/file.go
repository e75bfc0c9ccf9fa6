package twin

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/internal/atomicfile"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// checkMarker begins a twin file's last check (RecordCheck), which runs to
// the end of the file.
const checkMarker = "# last check"

// Lines are the twin's configuration as a file's lines, KEY=VALUE: the
// configuration string's keys (sim.FormatConfig), then every key the
// report names that it left out (a fitted value equal to the default is
// still written, so the file says what was fitted).
func (r *Result) Lines() []string {
	var lines []string
	have := map[string]bool{}
	if c := r.Config(); c != "" {
		for _, kv := range strings.Split(c, ",") {
			k, _, _ := strings.Cut(kv, "=")
			have[k] = true
			lines = append(lines, kv)
		}
	}
	for _, p := range r.Report.Params {
		if !have[p.Key] {
			have[p.Key] = true
			lines = append(lines, p.Key+"="+p.Value)
		}
	}
	return lines
}

// WriteFile writes the twin as a simulator configuration file
// (sim.ReadConfigFile reads it: sim:config=FILE), its report as comments.
func (r *Result) WriteFile(name string) error {
	return atomicfile.WriteFile(name, func(w io.Writer) error {
		fmt.Fprintln(w, "# tokentrace twin: the simulator fitted to a measured server (tokentrace sim fit).")
		fmt.Fprintln(w, "# A target everywhere: sim:config=FILE; keys after it apply on top, e.g.")
		fmt.Fprintln(w, "# sim:config=FILE,replicas=4,router=prefix-aware. Trust it as far as a check says:")
		fmt.Fprintln(w, traces.Textf("# %s (against a run it was not fitted on).", checkCommand("FILE")).Say(r.terms))
		for _, l := range r.Lines() {
			fmt.Fprintln(w, l)
		}
		fmt.Fprintln(w, "#")
		return r.Report.WriteText(w, "# ")
	})
}

// WriteText writes the report, each line behind prefix.
func (rep *Report) WriteText(w io.Writer, prefix string) error {
	p := func(format string, a ...any) { fmt.Fprintf(w, prefix+format+"\n", a...) }
	p("fit report")
	for _, in := range rep.Inputs {
		p("  input %s: %d rows, %d ok, %.2f req/s, %.1f requests in flight on average, %d metrics samples",
			in.Name, in.Rows, in.OK, in.RatePerSec, in.MeanInFlight, in.Samples)
	}
	for _, pr := range rep.Params {
		how := "fitted"
		if !pr.Fitted {
			how = "kept"
		}
		p("  %s=%s  %s: %s", pr.Key, pr.Value, how, pr.From)
	}
	if len(rep.Residuals) > 0 {
		p("  the fitted rows simulated on the twin (measured -> twin):")
		for _, r := range rep.Residuals {
			p("    %s", residualLine(r.Metric, r.Measured, r.Predicted))
		}
	}
	for _, n := range rep.Notes {
		p("  note: %s", n)
	}
	return nil
}

// residualLine says a metric's measured and predicted percentiles.
func residualLine(metric string, meas, pred [3]float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-4s", metric)
	for q, name := range []string{"p50", "p90", "p99"} {
		fmt.Fprintf(&b, "  %s %s -> %s (%s)", name, fmtNs(meas[q]), fmtNs(pred[q]), fmtErr(relErr(pred[q], meas[q])))
	}
	return b.String()
}

func relErr(pred, meas float64) float64 {
	if meas == 0 || math.IsNaN(meas) || math.IsNaN(pred) {
		return math.NaN()
	}
	return (pred - meas) / meas
}

func fmtErr(e float64) string {
	if math.IsNaN(e) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f %%", 100*e)
}

// fmtNs says ns with 3 significant digits.
func fmtNs(ns float64) string {
	if math.IsNaN(ns) {
		return "n/a"
	}
	return fmtDur(dur(ns))
}

// RecordCheck replaces the last check written in the twin file name with
// lines (each behind "# "), so commands running the twin can say how far
// it was found to hold.
func RecordCheck(name string, lines []string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("twin file: %w", err)
	}
	body := string(b)
	if i := strings.Index(body, "\n"+checkMarker); i >= 0 {
		body = body[:i+1]
	}
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	return atomicfile.WriteFile(name, func(w io.Writer) error {
		io.WriteString(w, body)
		fmt.Fprintf(w, "%s (tokentrace sim check, %s)\n", checkMarker, time.Now().UTC().Format("2006-01-02"))
		for _, l := range lines {
			fmt.Fprintln(w, "# "+l)
		}
		return nil
	})
}

// LastCheck is the last check recorded in the twin file name (its lines,
// without "# "); nil when it was never checked.
func LastCheck(name string) ([]string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("twin file: %w", err)
	}
	body := string(b)
	i := strings.Index(body, "\n"+checkMarker)
	if i < 0 {
		return nil, nil
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(body[i+1:], "\n"), "\n") {
		out = append(out, strings.TrimPrefix(strings.TrimPrefix(l, "#"), " "))
	}
	return out, nil
}

// CheckTwin is the twin a check runs, as its command names it: the file
// whose configuration gives Check its simulator options.
const CheckTwin traces.OptionRef = "twin"

// checkCommand is the command that checks the twin in file against a
// measured run's results.
func checkCommand(file string) traces.Command {
	return traces.NewCommand("sim", "check").With(CheckTwin, file).WithArgs("RESULTS")
}

// TrustLines say how far the twin a simulator's options read from a file
// (sim.Options.ConfigFile) was found to hold: its last check, or that it
// has none, naming the command that checks it in terms (nil:
// traces.LibraryTerms). nil for options not read from a file.
func TrustLines(o *sim.Options, terms traces.Terms) []string {
	if o == nil || o.ConfigFile == "" {
		return nil
	}
	lines, err := LastCheck(o.ConfigFile)
	switch {
	case err != nil:
		return []string{fmt.Sprintf("twin %s: %v", o.ConfigFile, err)}
	case lines == nil:
		return []string{traces.Textf("twin %s was never checked against a measured run (%s): its answers are untested", o.ConfigFile, checkCommand(o.ConfigFile)).Say(terms)}
	}
	return append([]string{"twin " + o.ConfigFile + ":"}, lines...)
}
