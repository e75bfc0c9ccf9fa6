package analyze

// What compare says about the runs themselves rather than their metrics:
// whether each kept its timing, and how their metadata differ, shortened so
// the numbers stay the first thing on the page.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// labelledRun is one side of a comparison with its label.
type labelledRun struct {
	label string
	rep   *Report
}

// runs is the compared runs in order, each with its label.
func (o CompareOptions) runs(a, b *Report) []labelledRun {
	return []labelledRun{{o.LabelA, a}, {o.LabelB, b}}
}

// late says whether a run's client lateness p99 is over o.MaxLateness.
func (o CompareOptions) late(l Dist) bool {
	return l.Count > 0 && l.P99 > float64(o.MaxLateness)/float64(time.Millisecond)
}

// latenessWarnings warns for each run whose client lateness p99 is over
// o.MaxLateness: it did not keep its recorded timing, so its latencies
// hold the client's delay and a difference may be the machine's, not the
// server's.
func latenessWarnings(a, b *Report, o CompareOptions) []string {
	var out []string
	for _, s := range o.runs(a, b) {
		l := s.rep.Lateness
		if !o.late(l) {
			continue
		}
		out = append(out, traces.Textf("%s did not keep its recorded timing: its client lateness p99 is %.2f ms, over %v (%s), so its latencies include the client's own delay and differences from the other run may be the machine's, not the server's. Re-run it on a less loaded machine, at a lower %s or with more %s replayers before trusting this comparison.",
			s.label, l.P99, o.MaxLateness, traces.OptionRef("CompareOptions.MaxLateness"), traces.OptionRef("replay.Options.Speed"), traces.OptionRef("replay.Options.ShardCount")).Say(o.Terms))
	}
	return out
}

// simWarnings warns for each run whose simulator fell behind its model
// (Report.SimLateness): its latencies are the machine's as much as the
// model's.
func simWarnings(a, b *Report, o CompareOptions) []string {
	var out []string
	for _, s := range o.runs(a, b) {
		if l := s.rep.SimLateness; l != nil && l.FellBehind() {
			out = append(out, fmt.Sprintf("%s's simulator fell behind: it %s, so its latencies are the machine's as much as the model's. Re-run it on a less loaded machine or at a lower replay speed before trusting this comparison.",
				s.label, l))
		}
	}
	return out
}

// unreliable is why the comparison cannot be trusted, for its Conclusion
// line ("" when both runs kept their timing and no simulator fell
// behind): each run that failed its lateness gate, or whose simulator
// ran slower than its model.
func unreliable(a, b *Report, o CompareOptions) string {
	var why []string
	for _, s := range o.runs(a, b) {
		var r []string
		if l := s.rep.Lateness; o.late(l) {
			r = append(r, fmt.Sprintf("its client sent late (lateness p99 %.2f ms > %v)", l.P99, o.MaxLateness))
		}
		if l := s.rep.SimLateness; l != nil && l.FellBehind() {
			r = append(r, fmt.Sprintf("its simulator ran %.2f× slower than its model", l.Slowdown()))
		}
		if len(r) > 0 {
			why = append(why, s.label+": "+strings.Join(r, " and "))
		}
	}
	return strings.Join(why, "; ")
}

// metaValueMax is the longest metadata value the text shows whole.
const metaValueMax = 48

// writeMetaDiffsText writes the differing metadata after the tables:
// what was asked differently (a JSON value, such as replay.options, as the
// sub-keys that differ), values cut at metaValueMax, and the per-run
// bookkeeping (when and where it ran, what it counted) as key names only.
// --json has every value whole.
func (c *Comparison) writeMetaDiffsText(p func(string, ...any)) {
	if len(c.MetaDiffs) == 0 {
		return
	}
	type row struct{ key, a, b string }
	var rows []row
	var kept []string
	for _, d := range c.MetaDiffs {
		key := strings.TrimPrefix(d.Key, "extra.")
		if bookkeeping(d.Key) {
			kept = append(kept, key)
			continue
		}
		if sub := jsonDiffs(d.A, d.B); sub != nil {
			for _, k := range slices.Sorted(maps.Keys(sub)) {
				rows = append(rows, row{key + "." + k, sub[k][0], sub[k][1]})
			}
			continue
		}
		rows = append(rows, row{key, d.A, d.B})
	}
	p("\nMetadata that differs (%s | %s; %s for every value whole)\n", c.LabelA, c.LabelB, traces.CommandJSON.Say(c.terms))
	w := 0
	for _, r := range rows {
		w = max(w, len(r.key))
	}
	for _, r := range rows {
		p("  %-*s  %s | %s\n", w, r.key, cut(orDash(r.a)), cut(orDash(r.b)))
	}
	if len(kept) > 0 {
		p("  per-run bookkeeping also differs: %s\n", strings.Join(kept, ", "))
	}
}

// jsonDiffs returns the top-level keys of two JSON objects whose values
// differ (absent as ""), or nil when either is not a JSON object.
func jsonDiffs(a, b string) map[string][2]string {
	obj := func(s string) map[string]json.RawMessage {
		if s == "" {
			return map[string]json.RawMessage{}
		}
		var m map[string]json.RawMessage
		if !strings.HasPrefix(strings.TrimSpace(s), "{") || json.Unmarshal([]byte(s), &m) != nil {
			return nil
		}
		return m
	}
	ma, mb := obj(a), obj(b)
	if ma == nil || mb == nil || (len(ma) == 0 && len(mb) == 0) {
		return nil
	}
	str := func(v json.RawMessage) string {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
		return string(v)
	}
	out := map[string][2]string{}
	for k := range ma {
		if string(ma[k]) != string(mb[k]) {
			out[k] = [2]string{str(ma[k]), str(mb[k])}
		}
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			out[k] = [2]string{"", str(mb[k])}
		}
	}
	return out
}

// cut shortens s to metaValueMax characters, marking the cut.
func cut(s string) string {
	r := []rune(s)
	if len(r) <= metaValueMax {
		return s
	}
	return string(r[:metaValueMax-1]) + "…"
}
