package traces_test

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// extOf maps each format to a file extension Create understands.
var extOf = map[traces.Format]string{
	traces.FormatParquet:   ".parquet",
	traces.FormatJSONL:     ".jsonl",
	traces.FormatJSONLZstd: ".jsonl.zst",
	traces.FormatCSV:       ".csv",
	traces.FormatCSVZstd:   ".csv.zst",
}

// encodeAll writes recs with meta m in format f to memory (Parquet's
// writer then sorts through runs spilled as o allows) and returns the bytes.
func encodeAll(tb testing.TB, f traces.Format, m traces.Meta, o traces.CreateOptions, recs []traces.Record) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w, err := traces.NewWriter(&buf, f, m, o)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Write(recs); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// labels exercise quoting and escaping in every text codec.
var labels = []string{"", "llama-3-8b", "a,b", `say "hi"`, "tab\there", "line\nbreak", `back\slash`, "ünïcødé ✓", "#hash", " lead", "x;y z"}

// randRecord fills every column, outcome columns included when outcome is set.
func randRecord(rng *rand.Rand, seq int64, outcome bool) traces.Record {
	r := traces.NewRecord()
	pick := func() string { return labels[rng.IntN(len(labels))] }
	r.Seq = seq
	r.ArrivalNs = rng.Int64N(1 << 40)
	r.Session = rng.Int64N(5)
	r.Turn = rng.Int32N(4)
	r.Category = pick()
	r.PrefixTokens = rng.Int32N(4096)
	for range rng.IntN(4) {
		r.PrefixBlocks = append(r.PrefixBlocks, rng.Int64N(1<<50))
	}
	r.InputTokens = rng.Int32N(1 << 20)
	r.PrefixTokens = min(r.PrefixTokens, r.InputTokens) // a prefix is part of the prompt
	r.OutputTokens = rng.Int32N(1 << 14)
	r.Model, r.API, r.Class = pick(), []string{"", traces.APIChat, traces.APICompletions}[rng.IntN(3)], pick()
	// (from seq, not rng: the other columns' draws stay as they were)
	r.SystemTokens, r.ToolTokens, r.InputKinds = int32(seq*37%5000), int32(seq%3), []string{"", "text", "tool_result", "text+tool_result"}[seq%4]
	r.FinishNs, r.ThinkNs, r.ParentSeq = rng.Int64N(1<<40)-1, rng.Int64N(3)-1, rng.Int64N(seq+2)-1
	for range rng.IntN(3) {
		r.AfterSeqs = append(r.AfterSeqs, rng.Int64N(seq+1))
	}
	if !outcome {
		return r
	}
	r.Run = pick()
	r.ScheduledNs = rng.Int64N(1<<40) - 1
	r.SentNs = rng.Int64N(1<<40) - 1
	r.FirstTokenNs = rng.Int64N(3) - 1 // -1, 0 or 1
	r.LastTokenNs = rng.Int64N(1 << 62)
	for range rng.IntN(5) {
		r.ChunkNs = append(r.ChunkNs, rng.Int64N(1<<40))
		r.ChunkTokens = append(r.ChunkTokens, rng.Int32N(16))
	}
	r.ServerPromptTokens = rng.Int32N(100000) - 1
	r.ServerOutputTokens = rng.Int32N(100) - 1
	r.ServerCachedTokens = rng.Int32N(3) - 1
	r.ServerQueueNs = rng.Int64N(1<<40) - 1
	r.ServerPrefillNs = rng.Int64N(1<<40) - 1
	r.ServerDecodeNs = -1
	r.ServerPreemptions = rng.Int32N(3) - 1
	r.Status = traces.Statuses[rng.IntN(len(traces.Statuses))]
	r.HTTPStatus = []int32{0, 200, 429, 500}[rng.IntN(4)]
	r.Error = pick()
	r.RequestID = pick() + "-id"
	r.ServerKVTransferNs, r.ServerDecodeQueueNs = rng.Int64N(1<<30)-1, rng.Int64N(3)-1
	r.Replica, r.PrefillReplica, r.RouteReason = pick(), pick(), pick()
	return r
}

func randRecords(seed uint64, n int, outcome bool) []traces.Record {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]traces.Record, n)
	for i := range out {
		out[i] = randRecord(rng, int64(i), outcome)
	}
	return out
}

// descents counts the records that arrive before the one above them: the
// rows a reader reports out of arrival order.
func descents(recs []traces.Record) int64 {
	var n int64
	for i := 1; i < len(recs); i++ {
		if recs[i].ArrivalNs < recs[i-1].ArrivalNs {
			n++
		}
	}
	return n
}

// sortedByArrival is what the Parquet writer stores.
func sortedByArrival(recs []traces.Record) []traces.Record {
	s := slices.Clone(recs)
	slices.SortStableFunc(s, func(a, b traces.Record) int {
		if c := cmp.Compare(a.ArrivalNs, b.ArrivalNs); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	return s
}

func writeFile(t testing.TB, name string, m traces.Meta, recs []traces.Record) {
	t.Helper()
	if err := traces.WriteAll(name, m, recs); err != nil {
		t.Fatalf("WriteAll(%s): %v", name, err)
	}
}

func diffRecords(t *testing.T, what string, got, want []traces.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d records, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("%s: record %d:\n got %+v\nwant %+v", what, i, got[i], want[i])
		}
	}
}

func TestColumnsMatchRecordTags(t *testing.T) {
	typ := reflect.TypeFor[traces.Record]()
	if typ.NumField() != len(traces.Columns) {
		t.Fatalf("Record has %d fields, Columns has %d names", typ.NumField(), len(traces.Columns))
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		pq, _, _ := strings.Cut(f.Tag.Get("parquet"), ",")
		js, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if pq != traces.Columns[i] || js != traces.Columns[i] {
			t.Errorf("field %s: parquet %q json %q, Columns[%d] = %q", f.Name, pq, js, i, traces.Columns[i])
		}
	}
}

func TestRoundTripEveryCodec(t *testing.T) {
	// The largest values every column takes (Record.Validate), and the
	// int64 and int32 extremes where a column has no bound.
	edge := traces.NewRecord()
	edge.Seq, edge.ArrivalNs, edge.Session, edge.InputTokens = 1<<63-1, traces.MaxTimeNs, -1<<63, traces.MaxTokens
	edge.Turn, edge.ParentSeq = 1<<31-1, 1<<63-1
	edge.PrefixBlocks = []int64{-1 << 63, 0, 1<<63 - 1}
	edge.ChunkNs, edge.ChunkTokens = []int64{traces.MaxTimeNs}, []int32{0}
	edge.Status, edge.HTTPStatus, edge.ServerOutputTokens = traces.StatusTimeout, 999, 0
	cases := []struct {
		name string
		recs []traces.Record
	}{
		// An empty trace still carries metadata and reads back empty.
		{"empty", nil},
		// Request columns only: outcome columns stay NotReported.
		{"requests", randRecords(1, 300, false)},
		// Every column filled, with awkward strings and -1/0 boundaries.
		{"outcomes", randRecords(2, 300, true)},
		// Extreme integers and single-element lists.
		{"edge", []traces.Record{edge}},
	}
	for _, tc := range cases {
		for _, f := range traces.Formats {
			t.Run(tc.name+"/"+string(f), func(t *testing.T) {
				name := filepath.Join(t.TempDir(), "t"+extOf[f])
				writeFile(t, name, traces.NewMeta("test"), tc.recs)
				got, _, err := traces.ReadAll(name)
				if err != nil {
					t.Fatalf("ReadAll: %v", err)
				}
				want := tc.recs
				if f == traces.FormatParquet {
					want = sortedByArrival(want)
				}
				diffRecords(t, string(f), got, want)
			})
		}
	}
}

func TestMetaRoundTrip(t *testing.T) {
	m := traces.NewMeta("mooncake:conversation_trace.jsonl")
	m.Tokenizer, m.BlockSize, m.KeyFingerprint, m.KThreshold = "o200k_base", 512, "sha256:abcd", 5
	m.Command = `tokentrace import --format mooncake --out "x y.parquet" in.jsonl`
	m.Set("target", "http://127.0.0.1:8000")
	m.Set("speed", "1.5")
	for _, f := range traces.Formats {
		t.Run(string(f), func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "t"+extOf[f])
			writeFile(t, name, m, randRecords(3, 3, false))
			_, got, err := traces.ReadAll(name)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Errorf("meta = %+v, want %+v", got, m)
			}
		})
	}
}

// TestSniffIgnoresName: Open chooses the codec by content, so a renamed file
// still reads.
func TestSniffIgnoresName(t *testing.T) {
	want := randRecords(4, 50, true)
	for _, f := range traces.Formats {
		t.Run(string(f), func(t *testing.T) {
			dir := t.TempDir()
			name := filepath.Join(dir, "t"+extOf[f])
			writeFile(t, name, traces.NewMeta("test"), want)
			renamed := filepath.Join(dir, "renamed.dat")
			if err := os.Rename(name, renamed); err != nil {
				t.Fatal(err)
			}
			got, _, err := traces.ReadAll(renamed)
			if err != nil {
				t.Fatal(err)
			}
			w := want
			if f == traces.FormatParquet {
				w = sortedByArrival(want)
			}
			diffRecords(t, string(f), got, w)
		})
	}
}

func TestUnknownFormat(t *testing.T) {
	name := filepath.Join(t.TempDir(), "x.txt")
	os.WriteFile(name, []byte("hello world\nnot a trace\n"), 0o644)
	_, err := traces.Open(name)
	if !errors.Is(err, traces.ErrUnknownFormat) || !strings.Contains(err.Error(), name) {
		t.Errorf("Open(text) = %v, want ErrUnknownFormat naming the file", err)
	}
	if _, err := traces.Create(filepath.Join(t.TempDir(), "x.txt"), traces.NewMeta("")); !errors.Is(err, traces.ErrUnknownFormat) {
		t.Errorf("Create(.txt) = %v, want ErrUnknownFormat", err)
	}
}

// TestStreams: every codec can be read from a non-seekable stream (stdin);
// Parquet is spooled to a temporary file.
func TestStreams(t *testing.T) {
	want := randRecords(5, 100, true)
	for _, f := range traces.Formats {
		t.Run(string(f), func(t *testing.T) {
			data := encodeAll(t, f, traces.NewMeta("stream"), traces.DefaultCreateOptions(), want)
			r, err := traces.NewReader(io.NopCloser(bytes.NewReader(data)), "-", traces.DefaultOpenOptions())
			if err != nil {
				t.Fatal(err)
			}
			got, err := traces.ReadFrom(r)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if r.Meta().Source != "stream" {
				t.Errorf("meta source = %q", r.Meta().Source)
			}
			w2 := want
			if f == traces.FormatParquet {
				w2 = sortedByArrival(want)
			}
			diffRecords(t, string(f), got, w2)
		})
	}
}

// TestStdinStdout drives Open("-") and Create("-") through os.Stdin/os.Stdout.
func TestStdinStdout(t *testing.T) {
	dir := t.TempDir()
	want := randRecords(6, 20, false)
	out, err := os.Create(filepath.Join(dir, "stdout.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	saveOut, saveIn := os.Stdout, os.Stdin
	defer func() { os.Stdout, os.Stdin = saveOut, saveIn }()
	os.Stdout = out
	writeFile(t, "-", traces.NewMeta("stdout"), want)
	os.Stdout = saveOut
	out.Close()
	for _, name := range []string{filepath.Join(dir, "stdout.jsonl"), filepath.Join(dir, "x.parquet")} {
		if strings.HasSuffix(name, ".parquet") {
			writeFile(t, name, traces.NewMeta("stdout"), want)
		}
		in, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		os.Stdin = in
		got, m, err := traces.ReadAll("-")
		os.Stdin = saveIn
		in.Close()
		if err != nil {
			t.Fatalf("ReadAll(-) of %s: %v", name, err)
		}
		if m.Source != "stdout" {
			t.Errorf("meta source %q", m.Source)
		}
		w := want
		if strings.HasSuffix(name, ".parquet") {
			w = sortedByArrival(want)
		}
		diffRecords(t, name, got, w)
	}
}

func TestSchemaVersionRejected(t *testing.T) {
	m := traces.NewMeta("future")
	m.SchemaVersion = "2.0"
	for _, f := range traces.Formats {
		t.Run(string(f), func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "t"+extOf[f])
			writeFile(t, name, m, randRecords(7, 3, false))
			_, err := traces.Open(name)
			if !errors.Is(err, traces.ErrSchemaVersion) || !strings.Contains(err.Error(), name) {
				t.Errorf("Open = %v, want ErrSchemaVersion naming %s", err, name)
			}
		})
	}
	// A newer minor version of the same major is accepted.
	m.SchemaVersion = "1.9"
	name := filepath.Join(t.TempDir(), "minor.jsonl")
	writeFile(t, name, m, nil)
	if _, _, err := traces.ReadAll(name); err != nil {
		t.Errorf("minor version: %v", err)
	}
}

// TestTruncated cuts every codec's file short: rows before the damage come
// back, the error names the file and wraps ErrTruncated.
func TestTruncated(t *testing.T) {
	want := randRecords(8, 600, true)
	for _, f := range traces.Formats {
		t.Run(string(f), func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "t"+extOf[f])
			writeFile(t, name, traces.NewMeta("test"), want)
			data, _ := os.ReadFile(name)
			cut := len(data) * 2 / 3
			if f == traces.FormatCSV {
				// A cut inside a row's last field leaves a shorter but
				// well-formed row (a final row needs no newline): cut after
				// a comma, where the row is short of fields.
				cut += bytes.IndexByte(data[cut:], ',') + 1
			}
			os.WriteFile(name, data[:cut], 0o644)
			r, err := traces.Open(name)
			if f == traces.FormatParquet {
				if err == nil || !errors.Is(err, traces.ErrTruncated) || !strings.Contains(err.Error(), name) {
					t.Fatalf("Open(truncated parquet) = %v, want ErrTruncated naming the file", err)
				}
				return
			}
			if err != nil {
				// A zstd stream cut inside its first block has no rows to
				// salvage: Open itself reports the truncation.
				if strings.HasSuffix(name, ".csv.zst") && errors.Is(err, traces.ErrTruncated) && strings.Contains(err.Error(), name) {
					return
				}
				t.Fatalf("Open: %v", err)
			}
			defer r.Close()
			got, err := traces.ReadFrom(r)
			var re *traces.RowError
			if !errors.Is(err, traces.ErrTruncated) || !errors.As(err, &re) || re.File != name || re.Line < 2 {
				t.Fatalf("ReadFrom = %v, want a RowError naming %s and a line wrapping ErrTruncated", err, name)
			}
			if !r.Stats().Truncated {
				t.Error("Stats().Truncated not set")
			}
			if len(got) == 0 || len(got) >= len(want) {
				t.Fatalf("got %d rows, want some but fewer than %d", len(got), len(want))
			}
			diffRecords(t, "salvaged", got, want[:len(got)])
		})
	}
}

func TestTruncatedParquetEmpty(t *testing.T) {
	name := filepath.Join(t.TempDir(), "empty.parquet")
	os.WriteFile(name, nil, 0o644)
	if _, err := traces.Open(name); !errors.Is(err, traces.ErrTruncated) {
		t.Errorf("Open(empty .parquet) = %v, want ErrTruncated", err)
	}
	os.WriteFile(name, []byte("PAR1"), 0o644)
	if _, err := traces.Open(name); !errors.Is(err, traces.ErrTruncated) {
		t.Errorf("Open(magic only) = %v, want ErrTruncated", err)
	}
}

// TestMalformedRows: strict mode fails on the first bad row with its line;
// the default skips and counts.
func TestMalformedRows(t *testing.T) {
	cases := []struct {
		name, file, body string
		wantRows         int
		wantSkip         int64
		firstLine        int64
	}{
		// A JSONL line that is not JSON, and one with a negative token count.
		{"jsonl", "bad.jsonl", `{"tokentrace_meta":{"schema_version":"1.0"}}
{"seq":0,"arrival_ns":0,"input_tokens":5,"output_tokens":1}
this is not json
{"seq":2,"arrival_ns":9,"input_tokens":-5,"output_tokens":1}
{"seq":3,"arrival_ns":10,"input_tokens":5,"output_tokens":1}
`, 2, 2, 3},
		// A CSV row with a missing column, and one with a negative output.
		{"csv", "bad.csv", "seq,arrival_ns,input_tokens,output_tokens\n0,0,5,1\n1,3,5\n2,4,5,-1\n3,5,6,7\n", 2, 2, 3},
		// A CSV cell that is not a number.
		{"csv-number", "bad2.csv", "seq,arrival_ns,input_tokens,output_tokens\n0,0,5,1\n1,x,5,2\n", 1, 1, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), tc.file)
			os.WriteFile(name, []byte(tc.body), 0o644)
			r, err := traces.OpenWith(name, traces.DefaultOpenOptions())
			if err != nil {
				t.Fatal(err)
			}
			got, err := traces.ReadFrom(r)
			r.Close()
			if err != nil {
				t.Fatalf("non-strict: %v", err)
			}
			st := r.Stats()
			if len(got) != tc.wantRows || st.Skipped != tc.wantSkip || st.Rows != int64(tc.wantRows) {
				t.Errorf("non-strict: %d rows, stats %+v; want %d rows, %d skipped", len(got), st, tc.wantRows, tc.wantSkip)
			}
			var re *traces.RowError
			if !errors.As(st.FirstSkip, &re) || re.Line != tc.firstLine || re.File != name {
				t.Errorf("FirstSkip = %v, want line %d of %s", st.FirstSkip, tc.firstLine, name)
			}
			r, err = traces.OpenWith(name, with(traces.DefaultOpenOptions(), func(o *traces.OpenOptions) { o.Strict = true }))
			if err != nil {
				t.Fatal(err)
			}
			_, err = traces.ReadFrom(r)
			r.Close()
			if !errors.As(err, &re) || re.Line != tc.firstLine || !errors.Is(err, traces.ErrMalformed) {
				t.Errorf("strict: %v, want RowError at line %d wrapping ErrMalformed", err, tc.firstLine)
			}
			if strings.Contains(err.Error(), "not json") {
				t.Errorf("error %q quotes row content", err)
			}
		})
	}
}

func TestMalformedParquetRows(t *testing.T) {
	recs := randRecords(9, 10, false)
	recs[3].OutputTokens = -7
	name := filepath.Join(t.TempDir(), "neg.parquet")
	writeFile(t, name, traces.NewMeta("test"), recs)
	r, err := traces.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	got, err := traces.ReadFrom(r)
	if err != nil || len(got) != 9 || r.Stats().Skipped != 1 {
		t.Errorf("non-strict: %d rows, %v, stats %+v; want 9 rows, 1 skipped", len(got), err, r.Stats())
	}
	r.Close()
	r, _ = traces.OpenWith(name, with(traces.DefaultOpenOptions(), func(o *traces.OpenOptions) { o.Strict = true }))
	_, err = traces.ReadFrom(r)
	r.Close()
	var re *traces.RowError
	if !errors.As(err, &re) || re.File != name || re.Line < 1 {
		t.Errorf("strict: %v, want RowError naming the file and row", err)
	}
}

// TestMissingOutcomeColumns: files without outcome columns read them as
// NotReported, never 0.
func TestMissingOutcomeColumns(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a.jsonl": `{"seq":1,"arrival_ns":5,"input_tokens":10,"output_tokens":2,"http_status":null}` + "\n",
		"a.csv":   "seq,arrival_ns,input_tokens,output_tokens\r\n1,5,10,2\r\n",
	}
	want := traces.NewRecord()
	want.Seq, want.ArrivalNs, want.InputTokens, want.OutputTokens = 1, 5, 10, 2
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		got, _, err := traces.ReadAll(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		diffRecords(t, name, got, []traces.Record{want})
	}
}

// TestNoFinalNewline: text files without a final newline (Azure style) read
// completely and are not truncated.
func TestNoFinalNewline(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"a.jsonl": `{"seq":0,"arrival_ns":0,"input_tokens":1,"output_tokens":1}` + "\r\n" + `{"seq":1,"arrival_ns":5,"input_tokens":10,"output_tokens":2}`,
		"a.csv":   "seq,arrival_ns,input_tokens,output_tokens\r\n0,0,1,1\r\n1,5,10,2",
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		r, err := traces.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := traces.ReadFrom(r)
		if err != nil || len(got) != 2 || r.Stats().Truncated {
			t.Errorf("%s: %d rows, %v, %+v; want 2 rows", name, len(got), err, r.Stats())
		}
		r.Close()
	}
}

// TestConcatenatedJSONL: "cat a.jsonl b.jsonl" reads as one trace; the second
// metadata line is skipped, not read as a row.
func TestConcatenatedJSONL(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	ra, rb := randRecords(12, 3, false), randRecords(13, 2, true)
	writeFile(t, a, traces.NewMeta("a"), ra)
	writeFile(t, b, traces.NewMeta("b"), rb)
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	cat := filepath.Join(dir, "cat.jsonl")
	os.WriteFile(cat, append(da, db...), 0o644)
	r, err := traces.Open(cat)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := traces.ReadFrom(r)
	if err != nil {
		t.Fatal(err)
	}
	all := append(ra, rb...)
	diffRecords(t, "cat", got, all)
	// The second file's arrivals start again: out of order, counted, kept.
	st := r.Stats()
	if r.Meta().Source != "a" || st.Skipped != 0 || st.OutOfOrder() != descents(all) {
		t.Errorf("meta %q stats %+v, want no skip and %d rows out of order", r.Meta().Source, st, descents(all))
	}
}

// spillRecords are n records in shuffled order with ties: every arrival is
// shared by three rows (two of them with one seq, told apart by Run), so
// the sort's tie rule shows.
func spillRecords(n int) []traces.Record {
	rng := rand.New(rand.NewPCG(7, 11))
	out := iterRecords(n)
	for i := range out {
		out[i].ArrivalNs = int64(i/3) * 1000
		out[i].Seq = int64(i / 2)
		out[i].Run = string(rune('a' + i%26))
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func writeParquet(t *testing.T, name string, recs []traces.Record, o traces.CreateOptions) {
	t.Helper()
	w, err := traces.CreateWith(name, traces.NewMeta("test"), o)
	if err != nil {
		t.Fatal(err)
	}
	for len(recs) > 0 {
		n := min(len(recs), 333)
		if _, err := w.Write(recs[:n]); err != nil {
			t.Fatal(err)
		}
		recs = recs[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func readParquet(t *testing.T, name string) []traces.Record {
	t.Helper()
	r, err := traces.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := traces.Collect(traces.All(r))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func assertEmptyDir(t *testing.T, dir, when string) {
	t.Helper()
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("%s: %d temporary entries left in %s, first %s", when, len(left), dir, left[0].Name())
	}
}

// A Parquet file larger than its sort budget is spilled in sorted runs and
// merged: the rows, their order (ties included) and every column equal the
// in-memory sort's, and the runs are gone after Close.
func TestParquetSpillMatchesInMemory(t *testing.T) {
	shuffled := spillRecords(20000)
	sorted := slices.Clone(shuffled)
	slices.SortStableFunc(sorted, func(a, b traces.Record) int {
		return cmp.Or(cmp.Compare(a.ArrivalNs, b.ArrivalNs), cmp.Compare(a.Seq, b.Seq))
	})
	// In order for 12000 records, then one earlier than all of them, then
	// shuffled: the writer sets aside what it wrote directly.
	late := append(slices.Clone(sorted[:12000]), sorted[0])
	late = append(late, shuffled[:7999]...)
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		recs   []traces.Record
		budget int64
	}{
		{"shuffled, a few runs", shuffled, 2 << 20},
		{"shuffled, hundreds of runs merged 16 at a time", shuffled, 32 << 10},
		{"shuffled, one record per run", shuffled, 1},
		{"in order: written directly", sorted, 32 << 10},
		{"in order, then out of order: the direct part becomes the first run", late, 256 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			spilled := filepath.Join(dir, "spill.parquet")
			n := tc.recs
			if tc.budget == 1 {
				n = n[:600]
			}
			if len(n) != len(shuffled) && tc.budget != 1 {
				t.Fatalf("test input has %d records", len(n))
			}
			writeParquet(t, spilled, n, with(traces.DefaultCreateOptions(), func(o *traces.CreateOptions) { o.SortMemoryBytes = tc.budget; o.TempDir = tmp; o.RowGroupRows = 4096 }))
			assertEmptyDir(t, tmp, "after Close")
			if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
				t.Errorf("left beside the output: %v", left)
			}
			want := inMemory(t, n)
			got := readParquet(t, spilled)
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("row %d:\n got %+v\nwant %+v", i, got[i], want[i])
				}
			}
		})
	}
}

// Abort after runs were spilled removes them and leaves no output; a
// TempDir that cannot be written is named in the error.
func TestParquetSpillCleanup(t *testing.T) {
	recs := spillRecords(5000)
	tmp, dir := t.TempDir(), t.TempDir()
	out := filepath.Join(dir, "t.parquet")
	w, err := traces.CreateWith(out, traces.NewMeta("test"), with(traces.DefaultCreateOptions(), func(o *traces.CreateOptions) { o.SortMemoryBytes = 64 << 10; o.TempDir = tmp }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(recs); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(tmp); len(left) == 0 {
		t.Fatal("no sorted run was spilled: the test does not test the spill")
	}
	traces.Abort(w)
	assertEmptyDir(t, tmp, "after Abort")
	assertEmptyDir(t, dir, "after Abort (output)")

	w, err = traces.CreateWith(out, traces.NewMeta("test"), with(traces.DefaultCreateOptions(), func(o *traces.CreateOptions) { o.SortMemoryBytes = 64 << 10; o.TempDir = filepath.Join(tmp, "missing") }))
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Write(recs)
	if err == nil {
		t.Fatal("spilling into a missing TempDir: no error")
	}
	if want := "TempDir"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s", err, want)
	}
	traces.Abort(w)
	assertEmptyDir(t, dir, "after a failed spill (output)")
}

// inMemory is recs as the writer sorts them in memory: a plain io.Writer
// (nothing to write directly) and a budget larger than them.
func inMemory(t *testing.T, recs []traces.Record) []traces.Record {
	return viaStream(t, recs, with(traces.DefaultCreateOptions(), func(o *traces.CreateOptions) { o.SortMemoryBytes = 1 << 40 }))
}

// viaStream writes recs through a Parquet writer over a plain io.Writer
// and reads them back.
func viaStream(t *testing.T, recs []traces.Record, o traces.CreateOptions) []traces.Record {
	t.Helper()
	name := filepath.Join(t.TempDir(), "streamed.parquet")
	if err := os.WriteFile(name, encodeAll(t, traces.FormatParquet, traces.NewMeta("test"), o, recs), 0o644); err != nil {
		t.Fatal(err)
	}
	return readParquet(t, name)
}

// A writer over a plain io.Writer (no file to set aside) sorts through
// spilled runs from the start: the rows equal the in-memory sort's.
func TestParquetSpillToStream(t *testing.T) {
	recs := spillRecords(5000)
	got := viaStream(t, recs, with(traces.DefaultCreateOptions(), func(o *traces.CreateOptions) { o.SortMemoryBytes = 64 << 10; o.TempDir = t.TempDir() }))
	if want := inMemory(t, recs); !reflect.DeepEqual(got, want) {
		t.Fatalf("spilled and in-memory sorts differ (%d and %d rows)", len(got), len(want))
	}
}

// A caller may reuse its batch (lists included) once Write returns, as
// traces.Copy and capture do: written directly, sorted in memory or
// spilled, the file holds what was written, not what the buffer became.
func TestParquetWriterDoesNotKeepCallerMemory(t *testing.T) {
	want := iterRecords(3000)
	for _, tc := range []struct {
		name  string
		order []traces.Record
		o     traces.CreateOptions
	}{
		{"in order, written directly", want, traces.DefaultCreateOptions()},
		{"reversed, sorted in memory", reversed(want), traces.DefaultCreateOptions()},
		{"reversed, spilled", reversed(want), with(traces.DefaultCreateOptions(), func(o *traces.CreateOptions) { o.SortMemoryBytes = 64 << 10; o.TempDir = t.TempDir() })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "t.parquet")
			w, err := traces.CreateWith(name, traces.NewMeta("test"), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			batch := make([]traces.Record, 0, 100)
			pb := make([]int64, 0, 1<<16)
			for i, r := range tc.order {
				// The batch's lists live in one reused array.
				start := len(pb)
				pb = append(pb, r.PrefixBlocks...)
				r.PrefixBlocks = pb[start:len(pb):len(pb)]
				if len(r.PrefixBlocks) == 0 {
					r.PrefixBlocks = nil
				}
				batch = append(batch, r)
				if len(batch) == cap(batch) || i == len(tc.order)-1 {
					if _, err := w.Write(batch); err != nil {
						t.Fatal(err)
					}
					for j := range batch {
						batch[j].Seq, batch[j].ArrivalNs, batch[j].Run = -7, -7, "overwritten"
					}
					for j := range pb {
						pb[j] = -99
					}
					batch, pb = batch[:0], pb[:0]
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got := readParquet(t, name)
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i].Seq != want[i].Seq || got[i].Run != want[i].Run || !slices.Equal(got[i].PrefixBlocks, want[i].PrefixBlocks) {
					t.Fatalf("row %d = seq %d run %q blocks %v, want seq %d run %q blocks %v", i, got[i].Seq, got[i].Run, got[i].PrefixBlocks, want[i].Seq, want[i].Run, want[i].PrefixBlocks)
				}
			}
		})
	}
}

func reversed(recs []traces.Record) []traces.Record {
	out := slices.Clone(recs)
	slices.Reverse(out)
	return out
}

// with is o changed by set: tests build options from their constructor.
func with[T any](o T, set func(*T)) T {
	set(&o)
	return o
}
