package formats

import (
	"sort"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// Import notes say what an importer read but could not keep, or had to
// estimate, with counts: a column tokentrace has no place for (Azure 2025's
// NumImages), rows whose token counts were estimated from text, links that
// point outside the file. An importer never drops such a thing silently:
// `tokentrace import` prints every note on stderr after the rows.

// noter is implemented by row decoders that have something to say once the
// import has ended.
type noter interface {
	notes() []traces.Text
}

// ImportNotes returns what the importer behind r could not carry or had to
// estimate, one sentence each with counts ("NumImages dropped: 812 of 1000
// rows had images ..."), in a stable order; nil when there is nothing to
// say or r is not an importer. A note that names an option (replay's
// closed sessions) keeps it, for the caller to say (traces.Text.Say). Call
// it after reading: counts grow as rows are read.
func ImportNotes(r traces.Reader) []traces.Text {
	if c, ok := r.(*importCtxReader); ok {
		if c.imp == nil {
			return nil
		}
		r = c.imp
	}
	ir, ok := r.(*importReader)
	if !ok {
		return nil
	}
	n, ok := ir.dec.(noter)
	if !ok {
		return nil
	}
	return n.notes()
}

// replaySessions is replay's option that replays sessions closed loop,
// which notes about traces without times advise.
const replaySessions = traces.OptionRef("replay.Options.Sessions")

// importTally counts things an importer could not keep, by a sentence
// template that takes the count first (e.g. "%d rows' NumImages dropped").
type importTally struct {
	counts map[string]int64
	refs   map[string][]any // the options a counted note names after its count
	fixed  []traces.Text
}

// add counts n occurrences of what; refs are the options (traces.OptionRef)
// its template names after the count.
func (t *importTally) add(what string, n int64, refs ...any) {
	if n == 0 {
		return
	}
	if t.counts == nil {
		t.counts, t.refs = map[string]int64{}, map[string][]any{}
	}
	t.counts[what] += n
	if len(refs) > 0 {
		t.refs[what] = refs
	}
}

// say adds a note that has no count (a column dropped wholesale).
func (t *importTally) say(note string) { t.sayText(traces.Plain(note)) }

// sayText is say for a note that names an option.
func (t *importTally) sayText(note traces.Text) {
	for _, f := range t.fixed {
		if f.String() == note.String() {
			return
		}
	}
	t.fixed = append(t.fixed, note)
}

func (t *importTally) notes() []traces.Text {
	out := append([]traces.Text(nil), t.fixed...)
	keys := make([]string, 0, len(t.counts))
	for k := range t.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, traces.Textf(k, append([]any{t.counts[k]}, t.refs[k]...)...))
	}
	return out
}

// droppedColumns returns the header columns of c, as written, that the
// importer does not read (known are the ones it reads, case-insensitive).
func droppedColumns(c *importCSV, known ...string) []string {
	keep := map[string]bool{}
	for _, k := range known {
		keep[strings.ToLower(k)] = true
	}
	var out []string
	for _, h := range c.hdr {
		if name := strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")); name != "" && !keep[strings.ToLower(name)] {
			out = append(out, name)
		}
	}
	return out
}
