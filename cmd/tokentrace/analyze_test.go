package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// answered makes r, sent at r.SentNs, a request answered in full: its first
// token ttft later, then its r.OutputTokens tokens one a chunk 10 ms apart,
// and the server reporting the prompt and output it saw.
func answered(r *traces.Record, ttft time.Duration) {
	r.Status, r.HTTPStatus = traces.StatusOK, 200
	r.FirstTokenNs = r.SentNs + int64(ttft)
	for k := range r.OutputTokens {
		r.ChunkNs = append(r.ChunkNs, r.FirstTokenNs+int64(k)*int64(10*time.Millisecond))
		r.ChunkTokens = append(r.ChunkTokens, 1)
	}
	r.LastTokenNs = r.ChunkNs[len(r.ChunkNs)-1]
	r.ServerPromptTokens, r.ServerOutputTokens = r.InputTokens, r.OutputTokens
}

// analyzeResults writes n successful results rows (TTFT slowed by f).
func analyzeResults(t *testing.T, name string, n int, f float64) string {
	t.Helper()
	var recs []traces.Record
	for i := range n {
		r := traces.NewRecord()
		r.Seq, r.InputTokens, r.OutputTokens, r.Class = int64(i), int32(100+i%400), 20, []string{"interactive", "batch"}[i%2]
		r.RequestID = "r" + string(rune('a'+i%26))
		r.ScheduledNs = int64(time.Duration(i) * 100 * time.Millisecond)
		r.SentNs = r.ScheduledNs + int64(i%3)*int64(time.Millisecond)
		answered(&r, time.Duration(f*float64(30*time.Millisecond+time.Duration(i%17)*5*time.Millisecond)))
		recs = append(recs, r)
	}
	m := traces.NewMeta("replay")
	m.Set("target", name)
	return writeTrace(t, filepath.Join(t.TempDir(), name), m, recs)
}

func TestAnalyzeCLI(t *testing.T) {
	a := analyzeResults(t, "a.jsonl", 300, 1)
	b := analyzeResults(t, "b.jsonl", 300, 2)
	dir := t.TempDir()
	empty := writeTrace(t, filepath.Join(dir, "empty.jsonl"), traces.NewMeta("replay"), nil)
	html, reqs, vj, chtml := filepath.Join(dir, "r.html"), filepath.Join(dir, "req.csv"), filepath.Join(dir, "v.json"), filepath.Join(dir, "c.html")
	tests := []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		// The default text report.
		{"text", []string{"analyze", a}, 0, "Tail attribution"},
		// JSON with goodput and groups.
		{"json", []string{"analyze", "--json", "--slo", "ttft=60ms", "--by", "class", a}, 0, `"goodput": `},
		// vllm's block layout.
		{"vllm", []string{"analyze", "--format", "vllm", "--percentile-metrics", "ttft,e2el", "--metric-percentiles", "50,99", a}, 0, "P50 E2EL (ms):"},
		// Every side output at once, and the timeline.
		{"files", []string{"analyze", "--window", "5s", "--html", html, "--requests-out", reqs, "--vllm-json", vj, a, b}, 0, "Timeline"},
		// Compare prints the metadata difference first.
		{"compare", []string{"analyze", "compare", "--resamples", "200", "--html", chtml, a, b}, 0, "Metadata that differs"},
		// Past --exact-rows: approximate percentiles, a sampled attribution.
		{"exact rows json", []string{"analyze", "--json", "--exact-rows", "50", a}, 0, `"approx": true`},
		{"exact rows text", []string{"analyze", "--exact-rows", "50", "--by", "class", a}, 0, "Approximate "},
		// The per-request attribution needs every row: the error says how.
		{"exact rows requests", []string{"analyze", "--exact-rows", "50", "--requests-out", filepath.Join(dir, "req2.csv"), a}, 1, "--exact-rows"},
		{"bad exact rows", []string{"analyze", "--exact-rows", "-1", a}, 2, "--exact-rows"},
		// No arguments.
		{"no args", []string{"analyze"}, 2, "want at least 1"},
		// A flag after the arguments is refused.
		{"flag after", []string{"analyze", a, "--json"}, 2, "put flags before arguments"},
		// A bad --by names the flag.
		{"bad by", []string{"analyze", "--by", "user", a}, 2, "--by"},
		// A bad --slo names the flag.
		{"bad slo", []string{"analyze", "--slo", "ttft=fast", a}, 2, "--slo"},
		// A bad --tail names the flag.
		{"bad tail", []string{"analyze", "--tail", "p100", a}, 2, "--tail"},
		// Parquet side tables are refused up front.
		{"requests parquet", []string{"analyze", "--requests-out", "x.parquet", a}, 2, "--requests-out"},
		// An empty results file fails with a message naming it.
		{"empty", []string{"analyze", empty}, 1, "empty.jsonl"},
		// A missing file.
		{"missing", []string{"analyze", filepath.Join(dir, "nope.jsonl")}, 1, "nope.jsonl"},
		// compare wants two files.
		{"compare one", []string{"analyze", "compare", a}, 2, "want 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runCLI(nil, tt.args...)
			if code != tt.code || !strings.Contains(out+errs, tt.contains) {
				t.Errorf("tokentrace %s: exit %d, want %d, output containing %q\nstdout:\n%s\nstderr:\n%s", strings.Join(tt.args, " "), code, tt.code, tt.contains, out, errs)
			}
		})
	}
	for _, p := range []string{html, reqs, vj, chtml} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", p, err)
		}
	}
	got, _ := os.ReadFile(reqs)
	if !strings.HasPrefix(string(got), "seq,request_id,lateness_ns,queue_ns,prefill_ns,decode_ns,other_ns,source,tail\n") {
		t.Errorf("requests CSV header: %.100q", got)
	}
}

// classResults writes results of interactive requests (TTFT 30–110 ms)
// beside batch ones whose TTFT is batchTTFT; with onlyInteractive, no
// batch rows.
func classResults(t *testing.T, dir, name string, batchTTFT time.Duration, onlyInteractive bool) string {
	t.Helper()
	var recs []traces.Record
	for i := range 400 {
		cls := []string{"interactive", "batch"}[i%2]
		if cls == "batch" && onlyInteractive {
			continue
		}
		r := traces.NewRecord()
		r.Seq, r.InputTokens, r.OutputTokens, r.Class = int64(i), 200, 10, cls
		r.RequestID = name + "-" + string(rune('a'+i%26))
		r.ScheduledNs = int64(time.Duration(i) * 50 * time.Millisecond)
		r.SentNs = r.ScheduledNs
		ttft := 30*time.Millisecond + time.Duration(i%17)*5*time.Millisecond
		if cls == "batch" {
			ttft = batchTTFT + time.Duration(i%13)*time.Millisecond
		}
		answered(&r, ttft)
		recs = append(recs, r)
	}
	return writeTrace(t, filepath.Join(dir, name), traces.NewMeta("replay"), recs)
}

// TestCompareByClass: compare of two runs holding batch and interactive
// rows (a --background run) compares each class alone besides the pooled
// numbers, in text, JSON and HTML; --class compares one class only. Here
// only batch got slower: pooled TTFT is worse, interactive unchanged.
func TestCompareByClass(t *testing.T) {
	dir := t.TempDir()
	a := classResults(t, dir, "a.jsonl", 500*time.Millisecond, false)
	b := classResults(t, dir, "b.jsonl", 2000*time.Millisecond, false)
	html := filepath.Join(dir, "c.html")
	code, out, errs := runCLI(nil, "analyze", "compare", "--resamples", "200", "--label-a", "before", "--label-b", "after", "--html", html, a, b)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	i := strings.Index(out, "\nBy class")
	if !strings.HasPrefix(out, "Conclusion (all classes pooled; by class below): ") || i < 0 {
		t.Fatalf("no per-class comparison:\n%s", out)
	}
	byClass := out[i:]
	bi, ii := strings.Index(byClass, "\nbatch: "), strings.Index(byClass, "\ninteractive: ")
	if bi < 0 || ii < 0 {
		t.Fatalf("classes missing:\n%s", byClass)
	}
	batch, inter := byClass[bi:ii], byClass[ii:]
	if !strings.Contains(batch, "worse on ttft_ms.p50") {
		t.Errorf("batch got 4x slower, yet:\n%s", batch)
	}
	if !strings.Contains(inter, "no significant change") || strings.Contains(inter, "worse") {
		t.Errorf("interactive is unchanged, yet:\n%s", inter)
	}
	page, _ := os.ReadFile(html)
	if !strings.Contains(string(page), "<h2>By class</h2>") || !strings.Contains(string(page), "<h3>interactive</h3>") {
		t.Errorf("HTML lacks the per-class comparison")
	}

	code, out, errs = runCLI(nil, "analyze", "compare", "--json", "--resamples", "200", a, b)
	if code != 0 {
		t.Fatalf("json: exit %d: %s", code, errs)
	}
	var js struct {
		ByClass []struct {
			Class      string `json:"class"`
			Conclusion string `json:"conclusion"`
			Metrics    []struct {
				Name string  `json:"name"`
				A    float64 `json:"a"`
			} `json:"metrics"`
		} `json:"by_class"`
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil || len(js.ByClass) != 2 || js.ByClass[1].Class != "interactive" {
		t.Fatalf("JSON by_class: %v %+v", err, js.ByClass)
	}
	for _, m := range js.ByClass[1].Metrics {
		if m.Name == "requests" && m.A != 200 {
			t.Errorf("interactive compared on %v requests, want its 200", m.A)
		}
	}

	// --class: one class only, no per-class section.
	code, out, _ = runCLI(nil, "analyze", "compare", "--class", "interactive", "--resamples", "200", a, b)
	if code != 0 || !strings.HasPrefix(out, "Conclusion: ") || strings.Contains(out, "By class") || !strings.Contains(out, "no significant change on the key metrics") {
		t.Errorf("--class interactive: exit %d\n%s", code, out)
	}
	// a class in one run only is named, not compared
	c := classResults(t, dir, "c.jsonl", 0, true)
	if code, out, _ = runCLI(nil, "analyze", "compare", "--resamples", "200", "--label-b", "alone", a, c); code != 0 || !strings.Contains(out, "batch: only in "+a) {
		t.Errorf("batch only in A: exit %d\n%s", code, out)
	}
	// analyze --class, and a class that is not there
	if code, out, _ = runCLI(nil, "analyze", "--class", "batch", a); code != 0 || !strings.Contains(out, "Requests      200 ") || !strings.Contains(out, "class batch only: 200 row(s) of other classes left out") {
		t.Errorf("analyze --class batch: exit %d\n%s", code, out)
	}
	if code, out, errs = runCLI(nil, "analyze", "--class", "nope", a); code != 1 || !strings.Contains(out+errs, `no row of class "nope"`) {
		t.Errorf("analyze --class nope: exit %d\n%s%s", code, out, errs)
	}
}
