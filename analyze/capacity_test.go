package analyze

import (
	"html/template"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

func TestParseBytesAndBandwidth(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
	}{
		{"16GB", 16e9}, {"16 GB", 16e9}, {"14.9GiB", 14.9 * (1 << 30)}, {"500MB", 500e6}, {"16e9", 16e9}, {"2k", 2000}, {"1TiB", 1 << 40},
	} {
		if got, err := ParseBytes(c.in); err != nil || math.Abs(got-c.want) > 1e-6*c.want {
			t.Errorf("ParseBytes(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "GB", "-1GB", "0", "abc", "NaN", "Inf"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) accepted", bad)
		}
	}
	if got, err := ParseBandwidth("3.35TB/s"); err != nil || math.Abs(got-3.35e12) > 1 {
		t.Errorf("ParseBandwidth(3.35TB/s) = %v, %v", got, err)
	}
	if got, err := ParseBandwidth("900GBps"); err != nil || got != 900e9 {
		t.Errorf("ParseBandwidth(900GBps) = %v, %v", got, err)
	}
	if _, err := ParseBandwidth("fast"); err == nil {
		t.Error("ParseBandwidth(fast) accepted")
	}
}

// capRecs is n successful requests sent every second: TTFT ttft, 11 output
// tokens over 10·tpot after the first.
func capRecs(n int, ttft, tpot time.Duration) []traces.Record {
	var recs []traces.Record
	for i := 0; i < n; i++ {
		r := traces.NewRecord()
		r.Seq = int64(i)
		r.InputTokens, r.OutputTokens = 100, 11
		r.Status = traces.StatusOK
		r.ScheduledNs = int64(i) * int64(time.Second)
		r.SentNs = r.ScheduledNs
		r.FirstTokenNs = r.SentNs + int64(ttft)
		r.LastTokenNs = r.FirstTokenNs + 10*int64(tpot)
		r.ServerOutputTokens = 11
		for k := 0; k < 11; k++ {
			r.ChunkNs = append(r.ChunkNs, r.FirstTokenNs+int64(k)*int64(tpot))
		}
		recs = append(recs, r)
	}
	return recs
}

func TestCostArithmetic(t *testing.T) {
	// 10 requests, one per second, 11 output tokens each: the run lasts from
	// the first send (0 s) to the last token (9 s + 100 ms + 10·20 ms = 9.3 s).
	recs := capRecs(10, 100*time.Millisecond, 20*time.Millisecond)
	recs[3].FirstTokenNs = recs[3].SentNs + int64(2*time.Second) // misses ttft=1s
	recs[3].LastTokenNs = recs[3].FirstTokenNs + 10*int64(20*time.Millisecond)
	o := DefaultOptions()
	o.CostPerHour = 4.50
	o.SLO = traces.SLO{TTFT: time.Second}
	rep := mustAnalyze(t, recs, o)
	c := rep.CapacityCheck()
	if c == nil || c.Cost == nil {
		t.Fatal("no cost")
	}
	dur := 9.3 // s
	runCost := 4.50 * dur / 3600
	if math.Abs(c.Cost.DurationS-dur) > 1e-9 || math.Abs(c.Cost.RunCost-runCost) > 1e-12 {
		t.Errorf("duration %v cost %v, want %v and %v", c.Cost.DurationS, c.Cost.RunCost, dur, runCost)
	}
	if c.Cost.OutputTokens != 110 || math.Abs(c.Cost.PerMillionOutput-runCost/110*1e6) > 1e-9 {
		t.Errorf("per million output %v over %d tokens, want %v over 110", c.Cost.PerMillionOutput, c.Cost.OutputTokens, runCost/110*1e6)
	}
	if c.Cost.GoodOutputTokens == nil || *c.Cost.GoodOutputTokens != 99 || math.Abs(*c.Cost.PerMillionGood-runCost/99*1e6) > 1e-9 {
		t.Errorf("good tokens %v per million %v, want 99 and %v", c.Cost.GoodOutputTokens, c.Cost.PerMillionGood, runCost/99*1e6)
	}
	var sb strings.Builder
	if err := rep.WriteText(&sb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), "per 1M goodput tokens") {
		t.Errorf("text report lacks the cost:\n%s", sb.String())
	}
}

func TestBandwidthCheck(t *testing.T) {
	for _, c := range []struct {
		why      string
		tpot     time.Duration
		verdict  string
		ratioMin float64
	}{
		{"TPOT at 5 ms against a 4.78 ms floor is near the limit", 5 * time.Millisecond, "near the hardware limit", 0.9},
		{"TPOT at 20 ms is far from it", 20 * time.Millisecond, "far from the hardware limit", 0.2},
		{"TPOT below the floor means the figures are wrong", 2 * time.Millisecond, "below the weight-streaming floor", 2},
	} {
		o := DefaultOptions()
		o.ModelBytes, o.Bandwidth = 16e9, 3.35e12
		rep := mustAnalyze(t, capRecs(20, 50*time.Millisecond, c.tpot), o)
		b := rep.CapacityCheck().Bandwidth
		floor := 16e9 / 3.35e12 * 1e3
		if math.Abs(b.DecodeFloorMs-floor) > 1e-9 {
			t.Errorf("%s: floor %v ms, want %v", c.why, b.DecodeFloorMs, floor)
		}
		want := float64(c.tpot) / 1e6
		if math.Abs(b.UnloadedTPOTMs-want) > 0.01*want || !strings.Contains(b.Verdict, c.verdict) || b.Ratio < c.ratioMin {
			t.Errorf("%s: unloaded %v ms (want %v), ratio %v, verdict %q", c.why, b.UnloadedTPOTMs, want, b.Ratio, b.Verdict)
		}
	}
}

func TestCapacityOptionsValidate(t *testing.T) {
	o := DefaultOptions()
	o.ModelBytes = 16e9
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "Options.Bandwidth") {
		t.Errorf("model bytes without bandwidth: %v", err)
	}
	o = DefaultOptions()
	o.CostPerHour = -1
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "Options.CostPerHour") {
		t.Errorf("negative cost: %v", err)
	}
}

func TestMetaDiffOrder(t *testing.T) {
	keys := []string{"command", "extra.replay.target", "extra.server.version", "extra.run.label", "extra.run.meta.gpu"}
	want := []string{"extra.run.label", "extra.run.meta.gpu", "extra.server.version", "command", "extra.replay.target"}
	slicesSort(keys)
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("got %v, want %v", keys, want)
	}
}

func slicesSort(k []string) {
	for i := range k {
		for j := i + 1; j < len(k); j++ {
			if compareMetaKeys(k[j], k[i]) < 0 {
				k[i], k[j] = k[j], k[i]
			}
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"16GB", "3.35TB/s", "14.9GiB", "1e9", "", "k", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseBytes(s)
		if err == nil && !(v > 0) {
			t.Fatalf("ParseBytes(%q) = %v without error", s, v)
		}
		if w, err := ParseBandwidth(s); err == nil && !(w > 0) {
			t.Fatalf("ParseBandwidth(%q) = %v without error", s, w)
		}
	})
}

// TestCapacityInHTML: the HTML report has the text report's Capacity block
// (decode floor, unloaded TPOT, verdict, cost per million output and
// goodput tokens) with the same values.
func TestCapacityInHTML(t *testing.T) {
	o := DefaultOptions()
	o.ModelBytes, o.Bandwidth = 16e9, 3.35e12
	o.CostPerHour = 4.50
	o.SLO = traces.SLO{TTFT: time.Second}
	rep := mustAnalyze(t, capRecs(20, 50*time.Millisecond, 5*time.Millisecond), o)
	var text, page strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "<h2>Capacity</h2>") {
		t.Fatalf("HTML has no Capacity section")
	}
	block := text.String()[strings.Index(text.String(), "\nCapacity\n")+10:]
	n := 0
	for _, l := range strings.Split(block, "\n") {
		if !strings.HasPrefix(l, "  ") {
			break
		}
		// every number and the verdict of the text block appears in the HTML
		for _, f := range strings.Fields(l) {
			if strings.ContainsAny(f, "0123456789") && !strings.Contains(page.String(), f) {
				t.Errorf("HTML lacks %q of the text line %q", f, l)
			}
		}
		n++
	}
	if n != 6 {
		t.Errorf("text Capacity block has %d lines, want 6:\n%s", n, text.String())
	}
	c := rep.CapacityCheck()
	if !strings.Contains(page.String(), template.HTMLEscapeString(c.Bandwidth.Verdict)) {
		t.Errorf("HTML lacks the verdict %q", c.Bandwidth.Verdict)
	}
}
