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
