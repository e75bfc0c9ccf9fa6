package capture

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/internal/testtraces"
	"github.com/tokentrace/tokentrace/traces"
)

// sampleShards writes the demo's sample logs and splits them by arrival
// time into n shards of equal span (what n capture pods would read).
func sampleShards(t *testing.T, o SampleOptions, n int) (all string, shards []string) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSampleLogs(context.Background(), &buf, 1, o); err != nil {
		t.Fatal(err)
	}
	shards = make([]string, n)
	var sb = make([]strings.Builder, n)
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var l struct{ Time time.Time }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		i := min(int(l.Time.Sub(o.Start)*time.Duration(n)/o.Duration), n-1)
		sb[i].Write(sc.Bytes())
		sb[i].WriteByte('\n')
	}
	for i := range sb {
		shards[i] = sb[i].String()
	}
	return buf.String(), shards
}

// captureParts captures each shard as a part and writes it to dir.
func captureParts(t *testing.T, o Options, dir string, shards []string) {
	t.Helper()
	for i, s := range shards {
		po := o
		po.Part, po.PartIndex = true, i
		res := mustCapture(t, po, []Input{{Name: fmt.Sprintf("shard-%d", i), R: strings.NewReader(s)}})
		w, err := traces.Create(filepath.Join(dir, fmt.Sprintf("part-%05d.parquet", i)), res.Meta)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(res.Records); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func compose(t *testing.T, o ComposeOptions, parts []string, out string) ComposeStats {
	t.Helper()
	st, err := Compose(context.Background(), o, parts, "", func(m traces.Meta) (traces.Writer, error) { return traces.Create(out, m) })
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestComposedPartsEqualOneCapture: the sample logs captured as four parts
// split by time and composed give the rows of one capture of all the logs
// (lengths, arrivals, categories and blocks exactly; sessions up to a
// consistent relabelling), with a k that only the whole trace reaches for
// some category: each part alone would have dropped it.
func TestComposedPartsEqualOneCapture(t *testing.T) {
	so := DefaultSampleOptions()
	so.Rate = 6
	all, shards := sampleShards(t, so, 4)
	o := DefaultOptions()
	o.Key = []byte("a test key of sixteen bytes or more")
	o.Tokenizer = "cl100k_base"
	dir := t.TempDir()
	partsDir := filepath.Join(dir, "parts")
	captureParts(t, o, mkdir(t, partsDir), shards)

	// A deferred part is never read as a finished trace.
	if _, err := traces.Open(partsDir); !errors.Is(err, traces.ErrKAnonDeferred) {
		t.Fatalf("opening the parts as a trace: got %v, want ErrKAnonDeferred", err)
	}

	// k: one more than a common category's largest count in any one part.
	perPart := map[string][]int{}
	for i := range shards {
		r, err := traces.OpenWith(filepath.Join(partsDir, fmt.Sprintf("part-%05d.parquet", i)), partMeta())
		if err != nil {
			t.Fatal(err)
		}
		recs, err := traces.Collect(traces.All(r))
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if rec.Category != "" {
				if perPart[rec.Category] == nil {
					perPart[rec.Category] = make([]int, len(shards))
				}
				perPart[rec.Category][i]++
			}
		}
	}
	k, total := 0, 0
	for _, ns := range perPart {
		sum, most := 0, 0
		for _, n := range ns {
			sum += n
			most = max(most, n)
		}
		if sum > total {
			k, total = most+1, sum
		}
	}
	if k < 2 || k > total {
		t.Fatalf("no category spread over parts: %v", perPart)
	}
	t.Logf("k = %d: the largest category has %d requests, at most %d in one part", k, total, k-1)

	// The parts as the capture Job writes them, with that k.
	o.MinCategorySize = k
	partsDir = mkdir(t, filepath.Join(dir, "parts-k"))
	captureParts(t, o, partsDir, shards)
	out := filepath.Join(dir, "composed.parquet")
	st := compose(t, DefaultComposeOptions(), []string{filepath.Join(partsDir, "*.parquet")}, out)
	got, meta := testtraces.ReadAll(t, out)
	if meta.KAnonDeferred() || meta.KThreshold != k {
		t.Errorf("composed meta: deferred %v, k %d; want finished, k %d", meta.KAnonDeferred(), meta.KThreshold, k)
	}

	single := mustCapture(t, o, []Input{{Name: "all", R: strings.NewReader(all)}})
	want := single.Records
	if len(got) != len(want) || st.Requests != int64(len(want)) {
		t.Fatalf("composed %d rows (stats %d), single capture %d", len(got), st.Requests, len(want))
	}
	sessG2W, sessW2G := map[int64]int64{}, map[int64]int64{}
	kept, sessions := 0, 0
	for i := range want {
		g, w := got[i], want[i]
		where := fmt.Sprintf("row %d", i)
		if g.ArrivalNs != w.ArrivalNs || g.InputTokens != w.InputTokens || g.OutputTokens != w.OutputTokens ||
			g.FirstTokenNs != w.FirstTokenNs || g.FinishNs != w.FinishNs || g.Status != w.Status {
			t.Fatalf("%s: composed %+v\nsingle %+v", where, g, w)
		}
		if g.Category != w.Category || g.PrefixTokens != w.PrefixTokens {
			t.Fatalf("%s: category %q (%d tokens), single capture %q (%d)", where, g.Category, g.PrefixTokens, w.Category, w.PrefixTokens)
		}
		if fmt.Sprint(g.PrefixBlocks) != fmt.Sprint(w.PrefixBlocks) {
			t.Fatalf("%s: blocks %v, single capture %v", where, g.PrefixBlocks, w.PrefixBlocks)
		}
		if (g.Session == 0) != (w.Session == 0) || g.Turn != w.Turn {
			t.Fatalf("%s: session %d turn %d, single capture session %d turn %d", where, g.Session, g.Turn, w.Session, w.Turn)
		}
		if g.Session != 0 {
			if m, ok := sessG2W[g.Session]; ok && m != w.Session {
				t.Fatalf("%s: composed session %d is single-capture sessions %d and %d", where, g.Session, m, w.Session)
			}
			if m, ok := sessW2G[w.Session]; ok && m != g.Session {
				t.Fatalf("%s: single-capture session %d is composed sessions %d and %d", where, w.Session, m, g.Session)
			}
			sessG2W[g.Session], sessW2G[w.Session] = w.Session, g.Session
			sessions++
		}
		if g.Category != "" {
			kept++
		}
	}
	if kept < total || sessions == 0 || len(sessG2W) != single.Stats.Sessions {
		t.Errorf("composed: %d rows with a category (want at least %d), %d rows in %d sessions (single capture %d sessions)", kept, total, sessions, len(sessG2W), single.Stats.Sessions)
	}
}

// TestComposeRefuses is a table of inputs Compose must not take: parts
// that do not belong together (other keys, schemas, block sizes, k or
// session idle; one shard twice), tampered metadata, a
// finished trace. Each refusal names the part and why.
func TestComposeRefuses(t *testing.T) {
	so := DefaultSampleOptions()
	so.Duration, so.Rate = 10*time.Second, 2
	_, shards := sampleShards(t, so, 2)
	o := DefaultOptions()
	o.Key = []byte("a test key of sixteen bytes or more")
	o.Tokenizer = "cl100k_base"
	dir := t.TempDir()
	captureParts(t, o, dir, shards)
	whole := filepath.Join(dir, "whole.parquet")
	res := mustCapture(t, o, []Input{{Name: "s", R: strings.NewReader(shards[0])}})
	w, _ := traces.Create(whole, res.Meta)
	w.Write(res.Records)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	o2 := o
	o2.Key, o2.Part, o2.PartIndex = []byte("another key of sixteen bytes or more"), true, 1
	other := mkdir(t, filepath.Join(dir, "other"))
	res2 := mustCapture(t, o2, []Input{{Name: "s", R: strings.NewReader(shards[1])}})
	w, _ = traces.Create(filepath.Join(other, "part-1.parquet"), res2.Meta)
	w.Write(res2.Records)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p0, p1 := filepath.Join(dir, "part-00000.parquet"), filepath.Join(dir, "part-00001.parquet")
	// tampered is part 1 with its metadata edited by edit.
	tampered := func(name string, edit func(m *traces.Meta)) string {
		r, err := traces.OpenWith(p1, func() traces.OpenOptions { o := traces.DefaultOpenOptions(); o.AllowDeferred = true; return o }())
		if err != nil {
			t.Fatal(err)
		}
		recs, err := traces.ReadFrom(r)
		m := r.Meta()
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		edit(&m)
		out := filepath.Join(mkdir(t, filepath.Join(dir, name)), "part-1.jsonl")
		if err := traces.WriteAll(out, m, recs); err != nil {
			t.Fatal(err)
		}
		return out
	}
	tests := []struct {
		name  string
		parts []string
		o     ComposeOptions
		want  string
	}{
		{"a finished trace is not a part", []string{p0, whole}, DefaultComposeOptions(), "is not a capture part"},
		{"parts captured with different keys do not compose", []string{p0, filepath.Join(other, "part-1.parquet")}, DefaultComposeOptions(), "captured with key"},
		{"a smaller k than the parts were captured for is refused", []string{p0}, func() ComposeOptions { o := DefaultComposeOptions(); o.MinCategorySize = 2; return o }(), "MinCategorySize"},
		{"the same part given twice", []string{p0, p1, p0}, DefaultComposeOptions(), "are both part 0 of the capture"},
		{"two captures of one shard", []string{p0, tampered("copy", func(m *traces.Meta) { m.Set(metaPart, "0") })}, DefaultComposeOptions(), "are both part 0 of the capture"},
		{"a part of another schema", []string{p0, tampered("schema", func(m *traces.Meta) { m.SchemaVersion = "1.7" })}, DefaultComposeOptions(), "has schema 1.7, part " + p0 + " 1.0"},
		{"a part with another block size", []string{p0, tampered("bs", func(m *traces.Meta) { m.BlockSize *= 2 })}, DefaultComposeOptions(), "has block size"},
		{"a part whose k was edited", []string{p0, tampered("k", func(m *traces.Meta) { m.Set(metaPartK, "1") })}, DefaultComposeOptions(), "has k 1"},
		{"a part whose session idle was edited", []string{p0, tampered("idle", func(m *traces.Meta) { m.Set(metaPartIdle, "5m0s") })}, DefaultComposeOptions(), "session idle 5m0s"},
		{"a part whose arrivals are not Unix ns", []string{p0, tampered("arrivals", func(m *traces.Meta) { m.Set(metaPartArrivals, "offset_ns") })}, DefaultComposeOptions(), `capture.arrivals is "offset_ns", not unix_ns`},
		{"a part without its index", []string{p0, tampered("noindex", func(m *traces.Meta) { delete(m.Extra, metaPart) })}, DefaultComposeOptions(), "metadata capture.kanon_k/capture.session_idle/capture.part"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compose(context.Background(), tc.o, tc.parts, "", func(m traces.Meta) (traces.Writer, error) {
				return traces.Create(filepath.Join(t.TempDir(), "out.parquet"), m)
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestPartNeedsKey: a part without the shared key is an option error.
func TestPartNeedsKey(t *testing.T) {
	o := DefaultOptions()
	o.Part = true
	var oe *traces.OptionError
	if err := o.Validate(); !errors.As(err, &oe) || oe.Option != "Options.Key" {
		t.Fatalf("got %v, want an OptionError on Key", err)
	}
}

func mkdir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestComposerSessions is a table of one session id's rows across parts
// and the sessions compose makes of them (idle 1 h).
func TestComposerSessions(t *testing.T) {
	h := int64(time.Hour)
	tests := []struct {
		name   string
		at     []int64 // arrivals of rows with session id 7
		turns  []int32
		sameAs []int // index of the row whose session each row shares (-1 none)
	}{
		{"rows within the idle time are one session with turns from 1", []int64{0, h / 2, h}, []int32{1, 2, 3}, []int{0, 0, 0}},
		{"a gap longer than the idle time starts a second session with an id of its own", []int64{0, h / 6, 2 * h, 2*h + h/6}, []int32{1, 2, 1, 2}, []int{0, 0, 2, 2}},
		{"a row alone in its session is single-shot", []int64{0, 2 * h, 2*h + h/6}, []int32{0, 1, 2}, []int{-1, 1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newComposer(1, time.Hour, false)
			rows := make([]traces.Record, len(tc.at))
			for i, a := range tc.at {
				rows[i] = traces.NewRecord()
				rows[i].ArrivalNs, rows[i].Session = a, 7
				c.count(&rows[i])
			}
			c.endCount()
			for i := range rows {
				c.rewrite(&rows[i])
			}
			for i, r := range rows {
				if r.Turn != tc.turns[i] {
					t.Errorf("row %d: turn %d, want %d", i, r.Turn, tc.turns[i])
				}
				switch j := tc.sameAs[i]; {
				case j < 0 && r.Session != 0:
					t.Errorf("row %d: session %d, want none", i, r.Session)
				case j >= 0 && r.Session != rows[j].Session:
					t.Errorf("row %d: session %d, want row %d's %d", i, r.Session, j, rows[j].Session)
				case j >= 0 && j != tc.sameAs[0] && tc.sameAs[0] >= 0 && r.Session == rows[0].Session:
					t.Errorf("row %d: shares the first session's id %d after the idle gap", i, r.Session)
				}
			}
		})
	}
}
