package traces_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// badRow is one row of the codec table: the fields of row 2 of four.
type badRow struct {
	arrival, in, out string
	chunkNs, chunkTk []string
	unreadable       bool
}

func (b badRow) jsonl() string {
	if b.unreadable {
		return `{"seq":2,"arrival_ns":`
	}
	s := fmt.Sprintf(`{"seq":2,"arrival_ns":%s,"input_tokens":%s,"output_tokens":%s`, b.arrival, b.in, b.out)
	if b.chunkNs != nil {
		s += fmt.Sprintf(`,"chunk_ns":[%s],"chunk_tokens":[%s]`, strings.Join(b.chunkNs, ","), strings.Join(b.chunkTk, ","))
	}
	return s + "}"
}

func (b badRow) csv() string {
	if b.unreadable {
		return "2,3000"
	}
	return fmt.Sprintf("2,%s,%s,%s,%s,%s", b.arrival, b.in, b.out, strings.Join(b.chunkNs, " "), strings.Join(b.chunkTk, " "))
}

// TestBadRowsEveryCodec: each kind of bad row is found by every text
// codec with the same Problem at the right line (JSONL without metadata:
// row 2 on line 3; CSV: line 4 after the header), skipped and counted by
// default (a row out of order is kept), the error under Strict.
func TestBadRowsEveryCodec(t *testing.T) {
	good := func(i int) badRow { return badRow{arrival: fmt.Sprint(i * 1000), in: "10", out: "5"} }
	for _, c := range []struct {
		why  string
		row  badRow
		want traces.Problem
	}{
		{"a negative count", badRow{arrival: "2000", in: "-5", out: "5"}, traces.ProblemNegative},
		{"an arrival before the row above", badRow{arrival: "500", in: "10", out: "5"}, traces.ProblemOutOfOrder},
		{"an arrival near 2^63 (it would overflow any span)", badRow{arrival: "9223372036854775000", in: "10", out: "5"}, traces.ProblemOutOfRange},
		{"a count past every context", badRow{arrival: "2000", in: "10", out: "1e30"}, traces.ProblemOutOfRange},
		{"a fractional count", badRow{arrival: "2000", in: "10", out: "1.5"}, traces.ProblemNotInteger},
		{"chunk_tokens that do not match chunk_ns", badRow{arrival: "2000", in: "10", out: "5", chunkNs: []string{"1", "2", "3"}, chunkTk: []string{"1"}}, traces.ProblemMismatch},
		{"a row that is not a record", badRow{unreadable: true}, traces.ProblemUnreadable},
	} {
		for _, codec := range []string{"jsonl", "csv"} {
			var b strings.Builder
			line := int64(3)
			if codec == "csv" {
				b.WriteString("seq,arrival_ns,input_tokens,output_tokens,chunk_ns,chunk_tokens\n")
				line = 4
			}
			for i := range 4 {
				r := good(i)
				if i == 2 {
					r = c.row
				}
				if codec == "csv" {
					if i != 2 {
						fmt.Fprintf(&b, "%d,%s,%s,%s,,\n", i, r.arrival, r.in, r.out)
						continue
					}
					b.WriteString(r.csv() + "\n")
				} else {
					if i != 2 {
						fmt.Fprintf(&b, `{"seq":%d,"arrival_ns":%s,"input_tokens":%s,"output_tokens":%s}`+"\n", i, r.arrival, r.in, r.out)
						continue
					}
					b.WriteString(r.jsonl() + "\n")
				}
			}
			name := filepath.Join(t.TempDir(), "t."+codec)
			if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			// Default: counted under its kind, first at the right line.
			r, err := traces.Open(name)
			if err != nil {
				t.Fatalf("%s, %s: %v", c.why, codec, err)
			}
			recs, err := traces.ReadFrom(r)
			r.Close()
			st := r.Stats()
			keep := 3
			if c.want == traces.ProblemOutOfOrder {
				keep = 4
			}
			var re *traces.RowError
			if err != nil || len(recs) != keep || st.Bad[c.want].Rows != 1 || !errors.As(st.Bad[c.want].First, &re) || re.Line != line || re.File != name {
				t.Errorf("%s, %s: %d rows, err %v, %s count %d first %v; want %d rows, 1 at %s:%d", c.why, codec, len(recs), err, c.want, st.Bad[c.want].Rows, st.Bad[c.want].First, keep, name, line)
			}
			if note := st.Notes(name, "kept"); len(note) != 1 || !strings.Contains(note[0], fmt.Sprintf("%s:%d: %s", name, line, c.want)) {
				t.Errorf("%s, %s: notes %q do not name %s:%d and %q", c.why, codec, note, name, line, c.want)
			}
			// Strict: the same row is the error.
			r, err = traces.OpenWith(name, with(traces.DefaultOpenOptions(), func(o *traces.OpenOptions) { o.Strict = true }))
			if err != nil {
				t.Fatal(err)
			}
			_, err = traces.ReadFrom(r)
			r.Close()
			if traces.ProblemOf(err) != c.want || !errors.As(err, &re) || re.Line != line {
				t.Errorf("%s, %s, strict: error %v, want %s at line %d", c.why, codec, err, c.want, line)
			}
		}
	}
}

// TestBadRowsParquet: a Parquet file (typed columns: nothing fractional or
// unreadable) gets the same checks, rows numbered from 1 in file order.
func TestBadRowsParquet(t *testing.T) {
	rec := func(i int) traces.Record {
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs, r.InputTokens, r.OutputTokens = int64(i), int64(i)*1000, 10, 5
		return r
	}
	for _, c := range []struct {
		why  string
		bad  func(*traces.Record)
		want traces.Problem
		row  int64 // after the writer's sort by arrival
	}{
		{"a negative count", func(r *traces.Record) { r.InputTokens = -5 }, traces.ProblemNegative, 3},
		{"a count past every context", func(r *traces.Record) { r.OutputTokens = traces.MaxTokens + 1 }, traces.ProblemOutOfRange, 3},
		{"an arrival near 2^63", func(r *traces.Record) { r.ArrivalNs = 1<<63 - 100 }, traces.ProblemOutOfRange, 4},
		{"chunk_tokens that do not match chunk_ns", func(r *traces.Record) { r.ChunkNs, r.ChunkTokens = []int64{1, 2}, []int32{1} }, traces.ProblemMismatch, 3},
	} {
		recs := []traces.Record{rec(0), rec(1), rec(2), rec(3)}
		c.bad(&recs[2])
		name := filepath.Join(t.TempDir(), "t.parquet")
		if err := traces.WriteAll(name, traces.NewMeta("t"), recs); err != nil {
			t.Fatal(err)
		}
		got, st, err := readStats(name, traces.DefaultOpenOptions())
		var re *traces.RowError
		if err != nil || len(got) != 3 || st.Bad[c.want].Rows != 1 || !errors.As(st.Bad[c.want].First, &re) || re.Line != c.row {
			t.Errorf("%s: %d rows, err %v, first %v; want 3 rows, the bad one at row %d", c.why, len(got), err, st.Bad[c.want].First, c.row)
		}
		if _, _, err := readStats(name, with(traces.DefaultOpenOptions(), func(o *traces.OpenOptions) { o.Strict = true })); traces.ProblemOf(err) != c.want {
			t.Errorf("%s, strict: %v, want %s", c.why, err, c.want)
		}
	}
}

func readStats(name string, o traces.OpenOptions) ([]traces.Record, traces.ReadStats, error) {
	r, err := traces.OpenWith(name, o)
	if err != nil {
		return nil, traces.ReadStats{}, err
	}
	defer r.Close()
	recs, err := traces.ReadFrom(r)
	return recs, r.Stats(), err
}

// TestDamageIsAChoice: a truncated file is an error naming the file and
// the complete rows before the damage, unless Salvage asks for them.
func TestDamageIsAChoice(t *testing.T) {
	name := filepath.Join(t.TempDir(), "cut.jsonl")
	data := []byte("{\"seq\":0,\"arrival_ns\":0,\"input_tokens\":1,\"output_tokens\":1}\n{\"seq\":1,\"arrival_ns\":5,\"input_tokens\":1,\"output_tokens\":1}\n{\"seq\":2,\"arriv")
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	recs, _, err := readStats(name, traces.DefaultOpenOptions())
	var de *traces.DamagedError
	if !errors.As(err, &de) || de.Rows != 2 || de.File != name || !errors.Is(err, traces.ErrTruncated) || len(recs) != 2 {
		t.Errorf("without Salvage: %d rows, %v; want a DamagedError after 2 rows", len(recs), err)
	}
	recs, st, err := readStats(name, with(traces.DefaultOpenOptions(), func(o *traces.OpenOptions) { o.Salvage = true }))
	if err != nil || len(recs) != 2 || !st.Truncated {
		t.Errorf("with Salvage: %d rows, %v, truncated %v; want 2 rows, no error, truncated", len(recs), err, st.Truncated)
	}
	if n := st.Notes(name, ""); len(n) != 1 || n[0] != traces.SalvageNote(name, 2) {
		t.Errorf("with Salvage: notes %q, want the salvage note", n)
	}
}

// TestNoValidRowIsAnError: rows, but not one record among them, is an
// error, never an empty trace.
func TestNoValidRowIsAnError(t *testing.T) {
	name := filepath.Join(t.TempDir(), "x.jsonl")
	os.WriteFile(name, []byte("{\"seq\":-1}\n{\"seq\":-2}\n"), 0o644)
	_, _, err := readStats(name, traces.DefaultOpenOptions())
	if !errors.Is(err, traces.ErrNoValidRows) || !strings.Contains(err.Error(), "none of its 2 rows") || !strings.Contains(err.Error(), name+":1: negative: seq -1") {
		t.Errorf("got %v, want ErrNoValidRows naming the first row", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	os.WriteFile(empty, nil, 0o644)
	if recs, _, err := readStats(empty, traces.DefaultOpenOptions()); err != nil || len(recs) != 0 {
		t.Errorf("an empty file: %d rows, %v; want an empty trace", len(recs), err)
	}
}

// TestLogsAreNotATrace: the log shapes capture reads are recognised where
// a trace is expected, and the error says what to run.
func TestLogsAreNotATrace(t *testing.T) {
	for _, c := range []struct{ shape, content string }{
		{"gateway logs", `{"time":"2025-03-01T10:00:00Z","request":{"model":"m","messages":[{"role":"user","content":"hi"}]},"response":{"usage":{"prompt_tokens":3}}}`},
		{"LiteLLM logs", `{"id":"x","call_type":"acompletion","startTime":1740823200.1,"model":"m","messages":[]}`},
		{"OTLP spans", `{"resourceSpans":[{"scopeSpans":[]}]}`},
		{"vLLM server logs", "INFO 03-01 10:00:00 api_server.py:527] vLLM API server version 0.6.3"},
		{"vLLM server logs", "(APIServer pid=4242) INFO 12-31 23:59:50 [api_server.py:1880] Starting vLLM API server 0"},
	} {
		name := filepath.Join(t.TempDir(), "logs.jsonl")
		os.WriteFile(name, []byte(c.content+"\n"), 0o644)
		_, err := traces.Open(name)
		var le *traces.LogsError
		if !errors.As(err, &le) || !strings.Contains(le.Shape, c.shape) || !strings.Contains(err.Error(), "capture Command.Out=trace.parquet "+name) {
			t.Errorf("%s: %v; want a LogsError pointing at capture", c.shape, err)
		}
	}
	// A trace is never taken for logs.
	name := filepath.Join(t.TempDir(), "t.jsonl")
	os.WriteFile(name, []byte(`{"seq":0,"arrival_ns":0,"input_tokens":1,"output_tokens":1,"model":"messages"}`+"\n"), 0o644)
	if _, _, err := readStats(name, traces.DefaultOpenOptions()); err != nil {
		t.Errorf("a trace row: %v", err)
	}
}

// TestLongLineIsABadRow: a line over the limit is a bad row of its own,
// named by its line and skipped like any other (the rows after it read);
// with Strict it is the error. JSON lines and CSV alike.
func TestLongLineIsABadRow(t *testing.T) {
	var js, cs bytes.Buffer
	cs.WriteString("seq,arrival_ns,input_tokens,output_tokens\n")
	for i := range 6 {
		fmt.Fprintf(&js, `{"seq":%d,"arrival_ns":%d,"input_tokens":1,"output_tokens":1}`+"\n", i, i)
		fmt.Fprintf(&cs, "%d,%d,1,1\n", i, i)
	}
	after := func(format string) string {
		var b bytes.Buffer
		for i := 6; i < 9; i++ {
			fmt.Fprintf(&b, format, i, i)
		}
		return b.String()
	}
	inputs := map[string]func() io.Reader{
		"long.jsonl": func() io.Reader {
			return io.MultiReader(bytes.NewReader(js.Bytes()), strings.NewReader(`{"model":"`), io.LimitReader(zeros{}, 65<<20),
				strings.NewReader("\"}\n"+after(`{"seq":%d,"arrival_ns":%d,"input_tokens":1,"output_tokens":1}`+"\n")))
		},
		"long.csv": func() io.Reader {
			return io.MultiReader(bytes.NewReader(cs.Bytes()), io.LimitReader(zeros{}, 65<<20), strings.NewReader(",1,1,1\n"+after("%d,%d,1,1\n")))
		},
	}
	for name, in := range inputs {
		line := int64(7)
		if strings.HasSuffix(name, ".csv") {
			line = 8
		}
		r, err := traces.NewReader(in(), name, traces.DefaultOpenOptions())
		if err != nil {
			t.Fatal(err)
		}
		recs, err := traces.ReadFrom(r)
		st := r.Stats()
		b := st.Bad[traces.ProblemTooLong]
		if err != nil || len(recs) != 9 || b.Rows != 1 || !strings.Contains(fmt.Sprint(b.First), fmt.Sprintf("%s:%d: too long: line of", name, line)) {
			t.Errorf("%s: %d rows, %v; too long %d (first %v); want 9 rows and line %d too long", name, len(recs), err, b.Rows, b.First, line)
		}
		strict := traces.DefaultOpenOptions()
		strict.Strict = true
		r, err = traces.NewReader(in(), name, strict)
		if err != nil {
			t.Fatal(err)
		}
		_, err = traces.ReadFrom(r)
		var re *traces.RowError
		if !errors.As(err, &re) || re.Line != line || traces.ProblemOf(err) != traces.ProblemTooLong {
			t.Errorf("%s strict: got %v, want line %d too long", name, err, line)
		}
	}
	// The limit is an option; a limit no line fits under is refused.
	o := traces.DefaultOpenOptions()
	o.MaxLineBytes = 40
	r, _ := traces.NewReader(bytes.NewReader(js.Bytes()), "t.jsonl", o)
	if recs, _ := traces.ReadFrom(r); len(recs) != 0 || r.Stats().Bad[traces.ProblemTooLong].Rows != 6 {
		t.Errorf("a 40-byte limit kept %d rows and found %d too long; want 0 and 6", len(recs), r.Stats().Bad[traces.ProblemTooLong].Rows)
	}
	o.MaxLineBytes = 0
	var oe *traces.OptionError
	if _, err := traces.NewReader(bytes.NewReader(js.Bytes()), "t.jsonl", o); !errors.As(err, &oe) || !strings.Contains(err.Error(), "MaxLineBytes") {
		t.Errorf("MaxLineBytes 0: got %v, want an option error naming OpenOptions.MaxLineBytes", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}
