package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// TestExpandInputs is a table of log arguments and the files they name.
func TestExpandInputs(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"gw.log", "gw.log.1.gz", "gw.log.2.zst", "odd[1].log"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := func(n string) string { return filepath.Join(dir, n) }
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr string
	}{
		{"a pattern expands to its matches in name order", []string{p("gw.log*")}, []string{p("gw.log"), p("gw.log.1.gz"), p("gw.log.2.zst")}, ""},
		{"stdin and plain names are kept as given", []string{"-", p("gw.log")}, []string{"-", p("gw.log")}, ""},
		{"a file whose name looks like a pattern is taken as it is", []string{p("odd[1].log")}, []string{p("odd[1].log")}, ""},
		{"a pattern that matches nothing is an error naming it", []string{p("none*.log")}, nil, "none*.log"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ExpandInputs(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// Two rotated files that overlap in time are merged by arrival and the
// overlap is reported; files one after the other are not reported.
func TestOverlappingInputs(t *testing.T) {
	var a, b bytes.Buffer
	so := DefaultSampleOptions()
	so.Duration = 20 * time.Second
	if err := WriteSampleLogs(context.Background(), &a, 1, so); err != nil {
		t.Fatal(err)
	}
	so.Start = so.Start.Add(10 * time.Second)
	if err := WriteSampleLogs(context.Background(), &b, 2, so); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	res := mustCapture(t, o, []Input{{Name: "a.log", R: bytes.NewReader(a.Bytes())}, {Name: "b.log", R: bytes.NewReader(b.Bytes())}})
	if len(res.Stats.Overlaps) != 1 || res.Stats.Overlaps[0].A != "a.log" || res.Stats.Overlaps[0].B != "b.log" {
		t.Fatalf("overlaps %+v, want a.log with b.log", res.Stats.Overlaps)
	}
	if d := time.Duration(res.Stats.Overlaps[0].Ns); d < 8*time.Second || d > 10*time.Second {
		t.Errorf("overlap %v, want about 10s", d)
	}
	for i := 1; i < len(res.Records); i++ {
		if res.Records[i].ArrivalNs < res.Records[i-1].ArrivalNs {
			t.Fatalf("record %d arrives before record %d: inputs not merged by arrival", i, i-1)
		}
	}
	so.Start = so.Start.Add(20 * time.Second)
	b.Reset()
	if err := WriteSampleLogs(context.Background(), &b, 2, so); err != nil {
		t.Fatal(err)
	}
	res = mustCapture(t, o, []Input{{Name: "a.log", R: bytes.NewReader(a.Bytes())}, {Name: "b.log", R: bytes.NewReader(b.Bytes())}})
	if len(res.Stats.Overlaps) != 0 {
		t.Errorf("consecutive files reported as overlapping: %+v", res.Stats.Overlaps)
	}
}

// A truncated .gz in the middle of a glob of rotated logs is reported by
// name and every other file is captured; strict mode fails naming it.
func TestTruncatedFileInGlob(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for f := range 3 {
		var sb strings.Builder
		for i := range 300 {
			fmt.Fprintf(&sb, `{"time":"2025-03-01T10:%02d:%02dZ","request":{"model":"m","messages":[{"role":"user","content":"%d-%d"}]},"response":{"usage":{"prompt_tokens":5,"completion_tokens":2}}}`+"\n", f*5+i/60, i%60, f, i)
		}
		data := compressed(t, "gzip", []byte(sb.String()))
		if f == 1 {
			data = data[:len(data)/2]
		}
		name := filepath.Join(dir, fmt.Sprintf("gw.log.%d.gz", f))
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, name)
	}
	o := DefaultOptions()
	o.BlockSize = 0
	var got []traces.Record
	stats, err := Run(context.Background(), o, []string{filepath.Join(dir, "gw.log.*.gz")}, nil, "", func(m traces.Meta) (traces.Writer, error) {
		return &collect{out: &got}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var trunc *Problem
	for i := range stats.Problems {
		if stats.Problems[i].Kind == KindTruncated {
			trunc = &stats.Problems[i]
		}
	}
	if trunc == nil || trunc.First.File != lines[1] {
		t.Fatalf("problems %+v: want the truncated file %s named", stats.Problems, lines[1])
	}
	if stats.Inputs != 3 || len(got) <= 600 || len(got) >= 900 {
		t.Errorf("%d inputs, %d records: want the 600 of the whole files and part of the damaged one", stats.Inputs, len(got))
	}
	o.Strict = true
	_, err = Run(context.Background(), o, []string{filepath.Join(dir, "gw.log.*.gz")}, nil, "", func(m traces.Meta) (traces.Writer, error) {
		return &collect{out: &got}, nil
	})
	var le *LineError
	if !errors.As(err, &le) || le.File != lines[1] {
		t.Errorf("strict: %v, want a LineError naming %s", err, lines[1])
	}
}

// collect is a traces.Writer that keeps the records.
type collect struct{ out *[]traces.Record }

func (c *collect) Write(recs []traces.Record) (int, error) {
	for i := range recs {
		*c.out = append(*c.out, recs[i].Clone())
	}
	return len(recs), nil
}
func (c *collect) Close() error { return nil }

// Options.Progress hears how far a capture is: reading with lines and
// requests that only grow, then writing up to every request.
func TestProgress(t *testing.T) {
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 0
	var logs bytes.Buffer
	if err := WriteSampleLogs(context.Background(), &logs, 1, DefaultSampleOptions()); err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 2} {
		var got []Progress
		o := DefaultOptions()
		o.Workers = workers
		o.Progress = func(p Progress) { got = append(got, p) }
		res := mustCapture(t, o, []Input{{Name: "logs", R: bytes.NewReader(logs.Bytes())}})
		var reading, writing int
		var prev Progress
		for _, p := range got {
			switch p.Phase {
			case "reading":
				reading++
				if writing > 0 || p.Lines < prev.Lines || p.Requests < prev.Requests {
					t.Fatalf("%d workers: reading progress %+v after %+v", workers, p, prev)
				}
			case "writing":
				writing++
				if p.Written < prev.Written || p.Requests != int64(len(res.Records)) {
					t.Fatalf("%d workers: writing progress %+v after %+v (%d records)", workers, p, prev, len(res.Records))
				}
			default:
				t.Fatalf("phase %q", p.Phase)
			}
			prev = p
		}
		if reading == 0 || writing == 0 {
			t.Errorf("%d workers: %d reading and %d writing reports, want some of each", workers, reading, writing)
		}
	}
}
