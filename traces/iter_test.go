package traces_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// iterRecords makes n records, every third with lists, so list storage
// reuse between batches would show.
func iterRecords(n int) []traces.Record {
	out := make([]traces.Record, n)
	for i := range out {
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs, r.InputTokens = int64(i), int64(i)*1000, int32(i%97)
		if i%3 == 0 {
			r.PrefixBlocks = []int64{int64(i), int64(i) + 1}
			r.AfterSeqs = []int64{int64(i) / 2, int64(i) / 3}
			r.Status, r.SentNs, r.ChunkNs, r.ChunkTokens = traces.StatusOK, 5, []int64{int64(i), int64(i) + 7}, []int32{1, 2}
		}
		out[i] = r
	}
	return out
}

// All streams every record of a file across several read batches, and
// Collect keeps them intact although the reader reuses its list storage.
func TestAllCollectRoundTrip(t *testing.T) {
	want := iterRecords(2500)
	for _, ext := range []string{".parquet", ".jsonl", ".csv"} {
		name := filepath.Join(t.TempDir(), "t"+ext)
		if err := traces.WriteAll(name, traces.NewMeta("test"), want); err != nil {
			t.Fatal(err)
		}
		r, err := traces.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := traces.Collect(traces.All(r))
		r.Close()
		if err != nil {
			t.Fatalf("%s: Collect: %v", ext, err)
		}
		checkIterRecords(t, ext+" All", got, want)
		// The same read ahead on another goroutine.
		if r, err = traces.Open(name); err != nil {
			t.Fatal(err)
		}
		got, err = traces.Collect(traces.AllAhead(r))
		r.Close()
		if err != nil {
			t.Fatalf("%s: Collect(AllAhead): %v", ext, err)
		}
		checkIterRecords(t, ext+" AllAhead", got, want)
	}
}

func checkIterRecords(t *testing.T, what string, got, want []traces.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !slices.Equal(got[i].PrefixBlocks, want[i].PrefixBlocks) || !slices.Equal(got[i].AfterSeqs, want[i].AfterSeqs) || !slices.Equal(got[i].ChunkNs, want[i].ChunkNs) || got[i].Seq != want[i].Seq {
			t.Fatalf("%s: record %d = %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

// AllAhead stops reading when the loop ends early (the caller may close
// the reader then), and passes a damaged file's error after its rows.
func TestAllAheadStopsAndFails(t *testing.T) {
	want := iterRecords(5000)
	name := filepath.Join(t.TempDir(), "t.jsonl")
	if err := traces.WriteAll(name, traces.NewMeta("test"), want); err != nil {
		t.Fatal(err)
	}
	r, err := traces.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range traces.AllAhead(r) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 10 {
			break
		}
	}
	r.Close() // the reading goroutine stopped before the loop returned
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.jsonl")
	if err := os.WriteFile(cut, b[:len(b)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err = traces.Open(cut); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := traces.Collect(traces.AllAhead(r))
	if !errors.Is(err, traces.ErrTruncated) || len(got) < 3000 || len(got) >= 5000 {
		t.Errorf("damaged file: %d records, %v; want the rows before the damage and ErrTruncated", len(got), err)
	}
}

// Copy writes a stream to a writer byte for byte as WriteAll would, with the
// stream's list storage reused under it.
func TestCopyMatchesWriteAll(t *testing.T) {
	recs := iterRecords(3000)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	if err := traces.WriteAll(a, traces.NewMeta("test"), recs); err != nil {
		t.Fatal(err)
	}
	src, err := traces.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	w, err := traces.Create(b, traces.NewMeta("test"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := traces.Copy(w, traces.All(src))
	if err != nil || n != int64(len(recs)) {
		t.Fatalf("Copy = %d, %v; want %d, nil", n, err, len(recs))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ba, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ba, bb) {
		t.Error("Copy's output differs from WriteAll's")
	}
}

// A truncated file yields the rows before the damage, then ErrTruncated.
func TestAllTruncated(t *testing.T) {
	name := filepath.Join(t.TempDir(), "t.jsonl")
	if err := traces.WriteAll(name, traces.NewMeta("test"), iterRecords(10)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(name)
	if err := os.WriteFile(name, b[:len(b)-5], 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := traces.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := traces.Collect(traces.All(r))
	if !errors.Is(err, traces.ErrTruncated) || len(got) != 9 {
		t.Errorf("Collect = %d records, %v; want 9 and ErrTruncated", len(got), err)
	}
}

// Breaking out of the loop stops the stream without reading further.
func TestAllEarlyStop(t *testing.T) {
	n := 0
	for range traces.Values(iterRecords(100)) {
		n++
		if n == 5 {
			break
		}
	}
	if n != 5 {
		t.Errorf("read %d records after break at 5", n)
	}
}

// "-" reads and writes the injected stdio, not the process's.
func TestInjectedStdio(t *testing.T) {
	var out bytes.Buffer
	w, err := traces.CreateWith("-", traces.NewMeta("test"), with(traces.DefaultCreateOptions(), func(o *traces.CreateOptions) { o.Stdout = &out }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := traces.Copy(w, traces.Values(iterRecords(3))); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := traces.OpenWith("-", with(traces.DefaultOpenOptions(), func(o *traces.OpenOptions) { o.Stdin = strings.NewReader(out.String()) }))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := traces.Collect(traces.All(r))
	if err != nil || len(got) != 3 || r.Meta().Source != "test" {
		t.Errorf("read back %d records, %v, meta %+v; want 3 of source test", len(got), err, r.Meta())
	}
}
