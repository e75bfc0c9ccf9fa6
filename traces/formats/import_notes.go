package formats

import (
	"fmt"
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
	notes() []string
}

// ImportNotes returns what the importer behind r could not carry or had to
// estimate, one sentence each with counts ("NumImages dropped: 812 of 1000
// rows had images ..."), in a stable order; nil when there is nothing to
// say or r is not an importer. Call it after reading: counts grow as rows
// are read.
func ImportNotes(r traces.Reader) []string {
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

// importTally counts things an importer could not keep, by a sentence
// template that takes the count first (e.g. "%d rows' NumImages dropped").
type importTally struct {
	counts map[string]int64
	fixed  []string
}

// add counts n occurrences of what.
func (t *importTally) add(what string, n int64) {
	if n == 0 {
		return
	}
	if t.counts == nil {
		t.counts = map[string]int64{}
	}
	t.counts[what] += n
}

// say adds a note that has no count (a column dropped wholesale).
func (t *importTally) say(note string) {
	for _, f := range t.fixed {
		if f == note {
			return
		}
	}
	t.fixed = append(t.fixed, note)
}

func (t *importTally) notes() []string {
	out := append([]string(nil), t.fixed...)
	keys := make([]string, 0, len(t.counts))
	for k := range t.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, fmt.Sprintf(k, t.counts[k]))
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
