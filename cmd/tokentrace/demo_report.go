package main

// The demo's last step and its small helpers (demo.go runs the pipeline).

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/internal/atomicfile"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

// demoAnalyzeFlags are the analyze options the demo uses, as flags, so the
// commands it prints reproduce what it shows.
const demoAnalyzeFlags = "--slo ttft=500ms,tpot=50ms --tail-metric ttft"

// demoReport analyzes both replays, writes the reports and prints the
// real run's report and the synthetic-vs-real verdict.
func demoReport(ctx context.Context, out io.Writer, path func(string) string, step func(int, string, ...any)) error {
	ao := analyzeOptions()
	ao.SLO = traces.SLO{TTFT: 500 * time.Millisecond, TPOT: 50 * time.Millisecond}
	ao.KeepRequests = true
	ao.TailMetric = analyze.MetricTTFT // the demo's problem is p99 TTFT
	// Analyze the files, as `tokentrace analyze` would: that also loads
	// the scraped metrics series beside each results file.
	realRep, err := analyze.AnalyzeFiles(ctx, []string{path("real.results.parquet")}, ao)
	if err != nil {
		return fmt.Errorf("demo: analyze: %w", err)
	}
	synRep, err := analyze.AnalyzeFiles(ctx, []string{path("synth.results.parquet")}, ao)
	if err != nil {
		return fmt.Errorf("demo: analyze: %w", err)
	}
	// Does the synthetic workload reach the real traffic's conclusion?
	co := analyze.DefaultCompareOptions()
	co.Terms = cliTerms{}
	co.LabelA, co.LabelB, co.Mode = "real", "synthetic", analyze.ModeFidelity
	cmp, err := analyze.Compare(realRep, synRep, co)
	if err != nil {
		return fmt.Errorf("demo: compare: %w", err)
	}
	if err := atomicfile.WriteFile(path("report.html"), realRep.WriteHTML); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path("compare.html"), cmp.WriteHTML); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path("report.txt"), realRep.WriteText); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path("compare.txt"), cmp.WriteText); err != nil {
		return err
	}
	step(6, "analyzed both runs → %s, %s", path("report.html"), path("compare.html"))

	fmt.Fprintln(out)
	fmt.Fprintf(out, "== the real trace's replay (tokentrace analyze %s %s)\n", demoAnalyzeFlags, path("real.results.parquet"))
	if err := realRep.WriteText(out); err != nil {
		return err
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "== synthetic vs real (tokentrace analyze compare --mode fidelity %s --label-a real --label-b synthetic %s %s; full table in %s)\n",
		demoAnalyzeFlags, path("real.results.parquet"), path("synth.results.parquet"), path("compare.txt"))
	for _, m := range cmp.Metrics {
		switch m.Name {
		case "ttft_ms.p50", "ttft_ms.p99", "e2e_ms.p99", "goodput":
			fmt.Fprintf(out, "  %-12s real %9.1f   synthetic %9.1f   %s\n", m.Name, m.A, m.B, m.Verdict)
		}
	}
	fmt.Fprintf(out, "  tail cause   real %s, synthetic %s\n", orNone(cmp.AttributionA.Dominant), orNone(cmp.AttributionB.Dominant))
	fmt.Fprintf(out, "  %s\n", cmp.Conclusion)
	fmt.Fprintln(out)
	fmt.Fprintf(out, "Open the report: %s\n", absPath(path("report.html")))
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func fidelityWords(failed []string) string {
	if len(failed) == 0 {
		return "synth check: every fidelity threshold met"
	}
	return "synth check misses: " + strings.Join(failed, ", ")
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func writeGzip(name string, b []byte) error {
	return atomicfile.WriteFile(name, func(w io.Writer) error {
		zw := gzip.NewWriter(w)
		if _, err := zw.Write(b); err != nil {
			return err
		}
		return zw.Close()
	})
}

// hostLoad says how busy the machine is: its CPUs and, on Linux, its load
// average (1, 5 and 15 minutes).
func hostLoad() string {
	cpus := fmt.Sprintf("%d CPUs", runtime.NumCPU())
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return fmt.Sprintf("%s, load average %s %s %s", cpus, f[0], f[1], f[2])
	}
	return cpus
}

// timingKept says whether a replay kept its recorded timing, by replay's
// own gate (lateness p99 within replay.DefaultMaxLateness; `replay` exits 3
// otherwise).
func timingKept(p99 time.Duration) string {
	p99 = p99.Round(time.Microsecond)
	if p99 <= replay.DefaultMaxLateness {
		return fmt.Sprintf("kept its timing (lateness p99 %v ≤ %v)", p99, replay.DefaultMaxLateness)
	}
	return fmt.Sprintf("did NOT keep its timing (lateness p99 %v > %v: the host was too busy to send on time, so these latencies include the client's delay; replay would exit 3; rerun on a quieter machine or with --speed below 1)",
		p99, replay.DefaultMaxLateness)
}
