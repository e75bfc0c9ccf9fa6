package analyze

import (
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// The ITL rows of the text and HTML reports: one row when every chunk
// carries one token (per chunk and per token are one distribution), two
// when chunks carry several tokens and the two differ.
func TestITLRowsOnceWhenChunkIsToken(t *testing.T) {
	for _, c := range []struct {
		why         string
		tokPerChunk int32
		rows        []string // the ITL rows' names, text report
		htmlRows    []string
	}{
		{"one token per chunk: one row saying it is both", 1,
			[]string{"ITL (chunk=token)"}, []string{"ITL (per chunk = per token)"}},
		{"four tokens per chunk: both rows, they differ", 4,
			[]string{"ITL (per chunk)", "ITL (per token)"}, []string{"ITL (per chunk)", "ITL (per token)"}},
	} {
		var recs []traces.Record
		for i := range 20 {
			recs = append(recs, rec(int64(i), time.Duration(i)*100*time.Millisecond, 0, 50*time.Millisecond, 550*time.Millisecond, 100, 41, c.tokPerChunk))
		}
		rep := mustAnalyze(t, recs, DefaultOptions())
		var got []string
		for _, l := range strings.Split(textOf(t, rep), "\n") {
			if strings.HasPrefix(l, "ITL") {
				got = append(got, strings.TrimSpace(l[:18]))
			}
		}
		if strings.Join(got, "|") != strings.Join(c.rows, "|") {
			t.Errorf("%s: text report's ITL rows %q, want %q", c.why, got, c.rows)
		}
		var html []string
		for _, r := range distRows(rep) {
			if strings.HasPrefix(r.Name, "ITL") {
				html = append(html, r.Name)
			}
		}
		if strings.Join(html, "|") != strings.Join(c.htmlRows, "|") {
			t.Errorf("%s: HTML report's ITL rows %q, want %q", c.why, html, c.htmlRows)
		}
		page := htmlOf(t, rep)
		for _, name := range c.htmlRows {
			if !strings.Contains(page, name) {
				t.Errorf("%s: the HTML page has no row %q", c.why, name)
			}
		}
	}
}
