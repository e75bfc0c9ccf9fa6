package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// badRowsTrace writes a valid 30-row trace with outcomes (so that it reads
// as a trace everywhere and as results to analyze) and returns its JSONL
// lines: the metadata line, then row i on line i+2. part makes it a
// capture part (compose's input).
func badRowsTrace(t *testing.T, part bool) []string {
	t.Helper()
	recs := make([]traces.Record, 30)
	for i := range recs {
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs = int64(i), int64(i)*50e6
		r.InputTokens, r.OutputTokens = 64+int32(i), 4
		r.Run, r.Status, r.HTTPStatus = "production", traces.StatusOK, 200
		r.ScheduledNs, r.SentNs = r.ArrivalNs, r.ArrivalNs
		r.FirstTokenNs, r.LastTokenNs = r.ArrivalNs+20e6, r.ArrivalNs+60e6
		r.ServerOutputTokens = 4
		recs[i] = r
	}
	m := traces.NewMeta("test")
	if part {
		m.KeyFingerprint = "test"
		m.Set(traces.MetaKAnon, traces.KAnonDeferred)
		m.Set("capture.kanon_k", "2")
		m.Set("capture.session_idle", "30m0s")
		m.Set("capture.part", "0")
		m.Set("capture.arrivals", "unix_ns")
	}
	name := writeTrace(t, filepath.Join(t.TempDir(), "base.jsonl"), m, recs)
	return strings.Split(strings.TrimSuffix(string(readFile(t, name)), "\n"), "\n")
}

// badRowLine is the file line the table's bad row is on (row 10).
const badRowLine = 12

// withBadRow returns lines with the row on badRowLine changed by edit.
func withBadRow(t *testing.T, lines []string, edit func(row, prev map[string]any)) []string {
	t.Helper()
	out := append([]string(nil), lines...)
	decode := func(s string) map[string]any {
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	row, prev := decode(out[badRowLine-1]), decode(out[badRowLine-2])
	edit(row, prev)
	b, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	out[badRowLine-1] = string(b)
	return out
}

// TestBadRowsEverywhere runs every command that reads a trace on each
// kind of bad row: by default the row is counted and named (its kind and
// FILE:LINE) and the command goes on (a row out of order is kept, and
// compose, which merges parts by arrival, refuses it); with --strict the
// same row is the command's error; a damaged file is an error naming the
// rows before the damage unless --salvage; nothing panics.
//
// The kinds run side by side (nothing else runs while a test that is not
// parallel waits for its subtests), each command in a child process (see
// runCLIChild).
func TestBadRowsEverywhere(t *testing.T) {
	dir := t.TempDir()
	lines, partLines := badRowsTrace(t, false), badRowsTrace(t, true)
	write := func(t *testing.T, name string, ls []string, cut bool) string {
		p := filepath.Join(dir, name)
		s := strings.Join(ls, "\n") + "\n"
		if cut {
			s = s[:len(s)-10] // the last row loses its end
		}
		writeTestFile(t, p, []byte(s))
		return p
	}
	good := write(t, "good.jsonl", lines, false)
	for _, k := range badRowKinds() {
		t.Run(strings.NewReplacer("/", "-", " ", "-").Replace(k.kind), func(t *testing.T) {
			t.Parallel()
			badRowsOfKind(t, k, lines, partLines, good, write)
		})
	}
}

// badRowsOfKind is TestBadRowsEverywhere on one kind of bad row.
func badRowsOfKind(t *testing.T, k badRowKind, lines, partLines []string, good string,
	write func(t *testing.T, name string, ls []string, cut bool) string) {
	out := filepath.Join(t.TempDir(), "out")
	// Each command's arguments: its flags, then the file with the bad row.
	commands := []struct {
		name string
		args func(file string) []string
		part bool // reads capture parts
	}{
		{"inspect", func(f string) []string { return []string{"inspect", f} }, false},
		{"export", func(f string) []string { return []string{"export", "--format", "jsonl", "--out", out + ".jsonl", f} }, false},
		{"synth fit", func(f string) []string { return []string{"synth", "fit", "--out", out + ".json", f} }, false},
		{"synth check", func(f string) []string { return []string{"synth", "check", f, f} }, false},
		{"replay", func(f string) []string {
			return []string{"replay", "--quiet", "--speed", "20", "--max-lateness", "10s", "--out", out + ".parquet", f}
		}, false},
		{"analyze", func(f string) []string { return []string{"analyze", f} }, false},
		{"analyze compare", func(f string) []string { return []string{"analyze", "compare", "--resamples", "100", f, good} }, false},
		{"validate", func(f string) []string {
			return []string{"validate", "--quiet", "--resamples", "100", "--target", "a=sim", "--target", "b=sim:max-num-seqs=4", f, good}
		}, false},
		{"sweep", func(f string) []string {
			return []string{"sweep", "--quiet", "--slo", "ttft=10s", "--speeds", "20", "--chart", "none", "--out-dir", out + "-sweep", f}
		}, false},
		{"compose", func(f string) []string { return []string{"compose", "--out", out + ".parquet", f} }, true},
	}
	bad := map[bool]string{}
	for _, part := range []bool{false, true} {
		ls := lines
		if part {
			ls = partLines
		}
		if k.edit != nil {
			ls = withBadRow(t, ls, k.edit)
		}
		bad[part] = write(t, fmt.Sprintf("%s-%v.jsonl", strings.NewReplacer("/", "-", " ", "-").Replace(k.kind), part), ls, k.cut)
	}
	for _, c := range commands {
		file := bad[c.part]
		want := fmt.Sprintf(k.want, file)
		run := func(mode string, flag ...string) (int, string) {
			args := c.args(file)
			// The command's words (one or two), the flag, the rest.
			n := 1
			if strings.HasPrefix(c.name, "synth ") || c.name == "analyze compare" {
				n = 2
			}
			args = append(append(append([]string(nil), args[:n]...), flag...), args[n:]...)
			code, so, se := runCLIChild(t, "", nil, args...)
			all := so + se
			if strings.Contains(all, "panic") || strings.Contains(all, "goroutine ") {
				t.Errorf("%s on a %s row (%s): panicked:\n%s", c.name, k.kind, mode, all)
			}
			os.RemoveAll(out + "-sweep")
			return code, all
		}
		switch {
		case k.cut:
			// A damaged file: an error naming the file and the rows
			// before the damage, unless --salvage asks for them.
			if code, all := run("default"); code != exitFailure || !strings.Contains(all, want) {
				t.Errorf("%s on a damaged file: exit %d, want 1 saying %q:\n%s", c.name, code, want, all)
			}
			salvaged := "is damaged (truncated): using the 29 rows before the damage"
			if code, all := run("--salvage", "--salvage"); code != exitOK || !strings.Contains(all, salvaged) {
				t.Errorf("%s --salvage on a damaged file: exit %d, want 0 saying %q:\n%s", c.name, code, salvaged, all)
			}
		case c.name == "compose" && k.kind == "backwards":
			// Compose merges parts by arrival: a part out of order is an error.
			if code, all := run("default"); code != exitFailure || !strings.Contains(all, want) || !strings.Contains(all, "each in arrival order") {
				t.Errorf("compose on a part out of order: exit %d, want 1 saying %q:\n%s", code, want, all)
			}
		default:
			if code, all := run("default"); code != exitOK || !strings.Contains(all, want) {
				t.Errorf("%s on a %s row: exit %d, want 0 saying %q:\n%s", c.name, k.kind, code, want, all)
			}
		}
		if k.cut {
			continue
		}
		// --strict: the same row, named the same way, is the error.
		strictWant := fmt.Sprintf("%s:%d: ", file, badRowLine)
		if code, all := run("--strict", "--strict"); code != exitFailure || !strings.Contains(all, strictWant) || !strings.Contains(all, kindWord(k.kind)) {
			t.Errorf("%s --strict on a %s row: exit %d, want 1 naming %q and %q:\n%s", c.name, k.kind, code, strictWant, kindWord(k.kind), all)
		}
	}
}

// badRowKind is one kind of bad row of the table: how the row is edited
// (or the file cut), the problem as every command names it, and the
// FILE:LINE named.
type badRowKind struct {
	kind    string
	edit    func(row, prev map[string]any)
	want    string // the problem as every command names it
	cut     bool
	wantRow int // the FILE:LINE named
}

// badRowKinds are the kinds of bad rows every command is run on.
func badRowKinds() []badRowKind {
	return []badRowKind{
		{kind: "negative", edit: func(r, _ map[string]any) { r["input_tokens"] = -5 },
			want: "1 negative (first %s:12: negative: input_tokens -5)"},
		{kind: "negative outcome", edit: func(r, _ map[string]any) { r["first_token_ns"] = -7 },
			want: "1 negative (first %s:12: negative: first_token_ns -7)"},
		{kind: "backwards", edit: func(r, p map[string]any) {
			a, _ := p["arrival_ns"].(json.Number).Int64()
			r["arrival_ns"] = a - 100e6
		}, want: "1 row out of arrival order (first %s:12: out of arrival order: arrival_ns 350000000 goes back 100ms from the row before)"},
		{kind: "huge", edit: func(r, _ map[string]any) { r["arrival_ns"] = json.Number("9223372036854775000") },
			want: "1 out of range (first %s:12: out of range: arrival_ns 9223372036854775000"},
		{kind: "non-integer", edit: func(r, _ map[string]any) { r["output_tokens"] = 1.5 },
			want: "1 not an integer (first %s:12: not an integer: output_tokens 1.5)"},
		{kind: "list/count mismatch", edit: func(r, _ map[string]any) {
			r["chunk_ns"], r["chunk_tokens"] = []int{1, 2, 3}, []int{1}
		}, want: "1 list/count mismatch (first %s:12: list/count mismatch: chunk_tokens has 1 entry for 3 chunk_ns"},
		// Extremes that pass as numbers but break later commands are
		// refused where the row is read.
		{kind: "far future", edit: func(r, _ map[string]any) { r["arrival_ns"] = json.Number("4611686018427387903") },
			want: "1 out of range (first %s:12: out of range: arrival_ns 4611686018427387903 is 146 years after the first row's (at most 10 years: no replay reaches it))"},
		{kind: "endless think", edit: func(r, _ map[string]any) { r["think_ns"] = json.Number("4611686018427387903") },
			want: "1 out of range (first %s:12: out of range: think_ns 4611686018427387903 (146 years; at most 10 years))"},
		{kind: "null count", edit: func(r, _ map[string]any) { r["input_tokens"] = nil },
			want: "1 unreadable (first %s:12: unreadable: input_tokens is null (want a number))"},
		{kind: "prefix over prompt", edit: func(r, _ map[string]any) {
			n, _ := r["input_tokens"].(json.Number).Int64()
			r["prefix_tokens"] = n + 1
		}, want: "1 out of range (first %s:12: out of range: prefix_tokens 75 is more than input_tokens 74 (a prefix is part of the prompt))"},
		{kind: "truncated", cut: true, want: "is damaged (truncated): 29 complete rows before the damage, which --salvage uses (%s:31:"},
	}
}

// kindWord is the word messages use for a kind of the table.
func kindWord(kind string) string {
	switch kind {
	case "backwards":
		return traces.ProblemOutOfOrder.String()
	case "huge", "far future", "endless think", "prefix over prompt":
		return traces.ProblemOutOfRange.String()
	case "null count":
		return traces.ProblemUnreadable.String()
	case "negative outcome":
		return traces.ProblemNegative.String()
	case "non-integer":
		return traces.ProblemNotInteger.String()
	}
	return kind
}

// TestImportBadRows: import's rows pass the same checks, named the same
// way; a row too large for a trace is refused there, not later.
func TestImportBadRows(t *testing.T) {
	dir := t.TempDir()
	row := func(ts int, in string) string {
		return `{"timestamp": ` + strconv.Itoa(ts) + `, "input_length": ` + in + `, "output_length": 5, "hash_ids": [1]}`
	}
	for _, c := range []struct {
		kind, in, want string
	}{
		{"negative", "-5", "1 negative (first %s:2: negative: input_length"},
		{"non-integer", "1.5", "1 not an integer (first %s:2: not an integer: input_length"},
		{"huge", "99999999999", "1 out of range (first %s:2: out of range: input_length"},
	} {
		f := filepath.Join(dir, strings.ReplaceAll(c.kind, "-", "")+".jsonl")
		var b bytes.Buffer
		for i := range 5 {
			in := "100"
			if i == 1 {
				in = c.in
			}
			fmt.Fprintln(&b, row(i*1000, in))
		}
		writeTestFile(t, f, b.Bytes())
		want := fmt.Sprintf(c.want, f)
		code, _, se := runCLI(nil, "import", "--format", "mooncake", "--out", filepath.Join(dir, "o.jsonl"), f)
		if code != exitOK || !strings.Contains(se, want) || !strings.Contains(se, "imported 4 rows") {
			t.Errorf("import of a %s row: exit %d, want 0 saying %q:\n%s", c.kind, code, want, se)
		}
		code, _, se = runCLI(nil, "import", "--format", "mooncake", "--strict", "--out", filepath.Join(dir, "o.jsonl"), f)
		if code != exitFailure || !strings.Contains(se, f+":2: ") || !strings.Contains(se, kindWord(c.kind)) {
			t.Errorf("import --strict of a %s row: exit %d, want 1 naming %s:2:\n%s", c.kind, code, f, se)
		}
	}
	// A compressed input cut short is damaged: an error naming it and the
	// rows before the damage, unless --salvage.
	rows := readFile(t, "../../testdata/publictraces/mooncake_conversation_head500.jsonl")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(rows)
	zw.Close()
	cut := filepath.Join(dir, "cut.jsonl.gz")
	writeTestFile(t, cut, gz.Bytes()[:gz.Len()/2])
	code, _, se := runCLI(nil, "import", "--format", "mooncake", "--out", filepath.Join(dir, "o.jsonl"), cut)
	if code != exitFailure || !strings.Contains(se, cut+" is damaged (truncated): ") || !strings.Contains(se, "which --salvage uses") {
		t.Errorf("import of a cut gzip file: exit %d, want 1 naming the damage:\n%s", code, se)
	}
	code, _, se = runCLI(nil, "import", "--salvage", "--format", "mooncake", "--out", filepath.Join(dir, "o.jsonl"), cut)
	if code != exitOK || !strings.Contains(se, cut+" is damaged (truncated): using the ") {
		t.Errorf("import --salvage of a cut gzip file: exit %d, want 0 with the salvage note:\n%s", code, se)
	}
}

// TestInspectJSONCountsBadRowsByKind: --json counts the bad rows under
// stable snake_case keys, the skipped ones and those out of order (kept).
func TestInspectJSONCountsBadRowsByKind(t *testing.T) {
	lines := badRowsTrace(t, false)
	lines = withBadRow(t, lines, func(r, _ map[string]any) { r["input_tokens"] = -5 })
	lines[20] = strings.Replace(lines[20], `"arrival_ns":950000000`, `"arrival_ns":1`, 1)
	f := filepath.Join(t.TempDir(), "t.jsonl")
	writeTestFile(t, f, []byte(strings.Join(lines, "\n")+"\n"))
	code, so, se := runCLI(nil, "inspect", "--json", f)
	var got struct {
		Rows        int64            `json:"rows"`
		SkippedRows int64            `json:"skipped_rows"`
		BadRows     map[string]int64 `json:"bad_rows"`
	}
	if err := json.Unmarshal([]byte(so), &got); err != nil || code != 0 {
		t.Fatalf("exit %d, %v: %s %s", code, err, so, se)
	}
	if got.Rows != 29 || got.SkippedRows != 1 || got.BadRows["negative"] != 1 || got.BadRows["out_of_arrival_order"] != 1 || len(got.BadRows) != 2 {
		t.Errorf("rows %d, skipped %d, bad %v; want 29, 1, negative 1 and out_of_arrival_order 1", got.Rows, got.SkippedRows, got.BadRows)
	}
}
