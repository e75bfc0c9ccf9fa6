package traces_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// FuzzValidate feeds arbitrary rows to the shared validation through the
// JSONL decoder: nothing panics; every skipped row is counted under one
// Problem, with a RowError naming its line; every row kept passes
// Record.Validate, holds values in their ranges, and reads back the same,
// with no problem, through every codec.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		`{"seq":0,"arrival_ns":0,"input_tokens":1,"output_tokens":1}`,
		`{"seq":1,"arrival_ns":-5,"input_tokens":1,"output_tokens":1}`,
		`{"seq":1,"arrival_ns":9223372036854775000,"input_tokens":1,"output_tokens":1}`,
		`{"seq":1,"arrival_ns":5,"input_tokens":1.5,"output_tokens":1e30}`,
		`{"seq":1,"arrival_ns":5,"input_tokens":1,"output_tokens":1,"status":"ok","chunk_ns":[1,2,3],"chunk_tokens":[1]}`,
		`{"seq":1,"arrival_ns":5,"input_tokens":1,"output_tokens":1,"status":"ok","sent_ns":-2,"http_status":1000}`,
		"{\"seq\":0,\"arrival_ns\":9}\n{\"seq\":1,\"arrival_ns\":3}",
		`{"seq":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, rows []byte) {
		r, err := traces.NewJSONLReader(bytes.NewReader(rows), "fuzz", traces.DefaultOpenOptions())
		if err != nil {
			return // a metadata line that does not parse
		}
		recs, err := traces.ReadFrom(r)
		st := r.Stats()
		if err != nil && traces.ProblemOf(err) == 0 {
			t.Fatalf("read: %v is not about a row", err)
		}
		var counted int64
		for p, b := range st.Bad {
			if p == int(traces.ProblemOutOfOrder) || b.Rows == 0 {
				continue
			}
			counted += b.Rows
			var re *traces.RowError
			if !errors.As(b.First, &re) || re.Line < 1 || traces.ProblemOf(b.First) != traces.Problem(p) {
				t.Fatalf("%s: first %v is not a RowError of that problem", traces.Problem(p), b.First)
			}
		}
		if counted != st.Skipped {
			t.Fatalf("skipped %d, counted by problem %d", st.Skipped, counted)
		}
		for i := range recs {
			rec := &recs[i]
			if err := rec.Validate(); err != nil {
				t.Fatalf("kept row %d does not validate: %v", i, err)
			}
			if rec.ArrivalNs < 0 || rec.ArrivalNs > traces.MaxTimeNs || rec.InputTokens < 0 || rec.InputTokens > traces.MaxTokens ||
				rec.OutputTokens < 0 || rec.OutputTokens > traces.MaxTokens || (len(rec.ChunkTokens) > 0 && len(rec.ChunkTokens) != len(rec.ChunkNs)) {
				t.Fatalf("kept row %d out of range: %+v", i, rec)
			}
		}
		if len(recs) == 0 {
			return
		}
		// What one codec keeps, every codec keeps, with no problem.
		for _, format := range []traces.Format{traces.FormatJSONL, traces.FormatCSV, traces.FormatParquet} {
			data := encodeAll(t, format, traces.NewMeta("fuzz"), traces.DefaultCreateOptions(), recs)
			back, err := traces.NewReader(bytes.NewReader(data), "fuzz", traces.DefaultOpenOptions())
			if err != nil {
				t.Fatalf("%s: open: %v", format, err)
			}
			got, err := traces.ReadFrom(back)
			back.Close()
			if bst := back.Stats(); err != nil || bst.Skipped != 0 || len(got) != len(recs) {
				t.Fatalf("%s: read back %d of %d rows, skipped %d: %v", format, len(got), len(recs), bst.Skipped, err)
			}
		}
	})
}
