package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tokentrace/tokentrace/capture"
)

// demoWorkloads puts the demo's data in the directory dir as `tokentrace
// demo` makes it (tokentrace-demo/trace.parquet, model.json and
// synth.parquet): made once by makeDemoWorkloads for the tests that start
// from it, copied for each (they write new files beside it).
func demoWorkloads(t *testing.T, dir string) {
	t.Helper()
	sharedDemoData.Lock()
	defer sharedDemoData.Unlock()
	if sharedDemoData.dir == "" {
		src, err := os.MkdirTemp("", "tokentrace-demo-data-")
		if err != nil {
			t.Fatal(err)
		}
		ok := false
		defer func() {
			if !ok {
				os.RemoveAll(src)
			}
		}()
		makeDemoWorkloads(t, src)
		ok = true
		sharedDemoData.dir = src
	}
	if err := os.CopyFS(dir, os.DirFS(sharedDemoData.dir)); err != nil {
		t.Fatal(err)
	}
}

// sharedDemoData holds the directory makeDemoWorkloads made its data in
// (removed by TestMain): capturing, fitting and generating it is seconds
// of each test's time under the race detector.
var sharedDemoData struct {
	sync.Mutex
	dir string
}

// removeSharedDemoData runs after every test (TestMain).
func removeSharedDemoData() {
	if d := sharedDemoData.dir; d != "" {
		os.RemoveAll(d)
	}
}

// makeDemoWorkloads makes the demo's data in the directory dir by the
// commands the demo prints for its first three steps: the same sample
// logs, captured, fitted and generated. It does not replay them (the
// demo's real-time steps).
func makeDemoWorkloads(t *testing.T, dir string) {
	t.Helper()
	o := DefaultDemoOptions()
	cmds := demoCommands{o: o, path: func(name string) string { return filepath.Join(o.Out, name) }}
	so := capture.DefaultSampleOptions()
	so.Duration, so.Rate = o.Duration, demoRate
	var logs bytes.Buffer
	if err := capture.WriteSampleLogs(context.Background(), &logs, o.Seed, so); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, o.Out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeGzip(filepath.Join(dir, cmds.path("gateway-logs.jsonl.gz")), logs.Bytes()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{cmds.capture(), cmds.fit(), cmds.gen()} {
		runMainChild(t, dir, shellSplit(t, c)[1:]...)
	}
}

// fleetValidate is the three-router validation of docs/fleet.md, as the
// page writes it.
func fleetValidate(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range docCommands(string(b)) {
		if strings.HasPrefix(c, "tokentrace validate") && strings.Contains(c, "router=least-outstanding") {
			return strings.Fields(c)[1:]
		}
	}
	t.Fatal("docs/fleet.md has no three-router validate command")
	return nil
}

// section is the lines of out from the one starting with head to the next
// blank line.
func section(out, head string) []string {
	var lines []string
	on := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, head):
			on = true
		case on && l == "":
			return lines
		}
		if on {
			lines = append(lines, l)
		}
	}
	return lines
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestValidateFleetDemo runs docs/fleet.md's three-router validation on the
// demo's data, as a reader would, in the demo's folder: the headline, the
// tally under the table, the ablation and the table count the same
// conclusions; the proven reason's evidence shows the real and the
// synthetic workloads differ; and every next-step command runs as printed
// and writes only new files. The commands run in child processes in a
// fresh folder, as a reader's shell would.
func TestValidateFleetDemo(t *testing.T) {
	t.Parallel()
	heavyCPU(t)
	docsCmd := fleetValidate(t)
	dir := t.TempDir()
	demoWorkloads(t, dir)
	out, _ := runMainChild(t, dir, append([]string{docsCmd[0], "-q"}, docsCmd[1:]...)...)
	t.Log("\n" + out)

	// The table: a verdict per row.
	byVerdict := map[string]int{}
	verdicts := []string{"not significant on synthetic", "not significant on real", "magnitude off", "reversed", "holds"}
	rows := section(out, "metric ")
	for _, l := range rows[1:] {
		for _, v := range verdicts {
			if strings.HasSuffix(l, " "+v) {
				byVerdict[v]++
				break
			}
		}
	}
	judged := len(rows) - 1
	notCarried := byVerdict["not significant on synthetic"] + byVerdict["not significant on real"] + byVerdict["reversed"]
	sizeOff, holds := byVerdict["magnitude off"], byVerdict["holds"]
	if judged != 6 || notCarried == 0 || notCarried+sizeOff+holds != judged {
		t.Fatalf("table %v over %d rows: the test wants 6 conclusions, some whose decision does not carry over", byVerdict, judged)
	}
	count := func(re, what string, want ...int) {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("%s: no %q in the output", what, re)
			return
		}
		for i, w := range want {
			if m[i+1] != "" && atoi(t, m[i+1]) != w {
				t.Errorf("%s %q counts %s where the table has %d (%v)", what, m[0], m[i+1], w, byVerdict)
			}
		}
	}
	count(`does not carry over to real traffic for (\d+) of (\d+) conclusions`, "headline", notCarried, judged)
	if judged > notCarried {
		count(`The other (\d+) carry over`, "headline", judged-notCarried)
	}
	if sizeOff > 0 {
		count(`, (\d+) of them with the size off`, "headline", sizeOff)
		count(`; (\d+) carr(?:y|ies) over with the size off \(magnitude off\)`, "tally", sizeOff)
	}
	count(`Of (\d+) conclusions: (\d+) do(?:es)? not carry over \([^)]*\)`, "tally", judged, notCarried)
	if holds > 0 {
		count(`; (\d+) holds?\.`, "tally", holds)
	}
	why := section(out, "Why, by ablation:")
	if len(why) < 2 {
		t.Fatalf("no ablation in:\n%s", out)
	}
	count(`the (\d+) conclusions? that do(?:es)? not hold \((\d+) decisions? that do(?:es)? not carry over(?:, (\d+) with the size off)?\)`, "ablation", notCarried+sizeOff, notCarried, sizeOff)
	decisions, sizes := regexp.MustCompile(`decisions \d+ of (\d+)`), regexp.MustCompile(`sizes \d+ of (\d+)`)
	for _, l := range why[1:] {
		if m := decisions.FindStringSubmatch(l); m != nil && atoi(t, m[1]) != notCarried {
			t.Errorf("ablation line %q counts other decisions than the table's %d", l, notCarried)
		}
		if m := sizes.FindStringSubmatch(l); m != nil && atoi(t, m[1]) != sizeOff {
			t.Errorf("ablation line %q counts other sizes than the table's %d", l, sizeOff)
		}
	}

	// The proven reason shows a figure on which the real and the
	// synthetic workloads differ: "NAME SYN → TRANSPLANT (real REAL".
	figure := regexp.MustCompile(`([a-z][a-z0-9' -]*?) ([-+0-9.]+%?(?: [a-z/]+)?) → ([-+0-9.]+%?(?: [a-z/]+)?) \(real ([-+0-9.]+%?(?: [a-z/]+)?)`)
	var proven string
	for _, l := range section(out, "Reasons") {
		if strings.Contains(l, "[proven") {
			proven = l
			break
		}
	}
	differs := false
	for _, m := range figure.FindAllStringSubmatch(proven, -1) {
		differs = differs || m[2] != m[4]
	}
	if proven == "" || !differs {
		t.Errorf("the proven reason %q shows no figure on which the workloads differ", proven)
	}

	runNextSteps(t, dir, out, "tokentrace-demo/trace.parquet", "tokentrace-demo/synth.parquet")
}

// runNextSteps runs every command of out's next steps as printed, in
// order, in the folder dir: each exits 0, and each --out names a file that
// is neither an input nor there before it ran.
func runNextSteps(t *testing.T, dir, out string, inputs ...string) {
	t.Helper()
	var cmds []string
	for _, l := range section(out, "Next steps") {
		if c, ok := strings.CutPrefix(l, "      "); ok && strings.HasPrefix(c, "tokentrace ") {
			cmds = append(cmds, c)
		}
	}
	if len(cmds) == 0 {
		t.Fatalf("no next-step command in:\n%s", out)
	}
	for _, c := range cmds {
		if strings.Contains(c, "Options.") || strings.Contains(c, "Command.") {
			t.Errorf("%s names a library option: every option of a printed command is its flag", c)
		}
		words := shellSplit(t, c)
		for i, w := range words {
			if w != "--out" || i+1 == len(words) {
				continue
			}
			f := words[i+1]
			for _, in := range inputs {
				if filepath.Clean(f) == filepath.Clean(in) {
					t.Errorf("%s writes its input %s", c, in)
				}
			}
			if !filepath.IsAbs(f) {
				f = filepath.Join(dir, f)
			}
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%s writes over %s, which was there before", c, f)
			}
		}
		if code, so, se := runCLIChild(t, dir, nil, words[1:]...); code != 0 {
			t.Errorf("%s: exit %d\nstdout %s\nstderr %s", c, code, so, se)
		}
	}
}

// Given the model itself as SYNTHETIC, the next steps generate from that
// model (no fit of their own where the model serves), and every command
// runs as printed.
func TestValidateModelNextSteps(t *testing.T) {
	t.Parallel() // the commands run in child processes, in a fresh folder
	heavyCPU(t)
	dir := t.TempDir()
	demoWorkloads(t, dir)
	model := filepath.Join(DefaultDemoOut, "model.json")
	out, _ := runMainChild(t, dir, "validate", "-q", "--target", "rr=sim:replicas=4,router=round-robin,max-num-seqs=4",
		"--target", "pa=sim:replicas=4,router=prefix-aware,max-num-seqs=4", "--metrics", "ttft_p50,ttft_p99,e2e_p99",
		filepath.Join(DefaultDemoOut, "trace.parquet"), model)
	t.Log("\n" + out)
	gens := 0
	for _, l := range section(out, "Next steps") {
		c, ok := strings.CutPrefix(l, "      tokentrace synth gen ")
		if !ok {
			continue
		}
		gens++
		if words := strings.Fields(c); words[len(words)-1] != model && !strings.Contains(out, "synth fit") {
			t.Errorf("%q generates from %s, not the model given", l, words[len(words)-1])
		}
	}
	if gens == 0 && !strings.Contains(out, "no synth fit or gen option sets") {
		t.Fatalf("no generation and no advice in the next steps:\n%s", out)
	}
	if strings.Contains(out, "longer window") {
		t.Error("the advice sends the reader to a longer window of a one-minute trace")
	}
	if gens > 0 {
		runNextSteps(t, dir, out, filepath.Join(DefaultDemoOut, "trace.parquet"), model)
	}
}
