package capture

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/tokentrace/tokentrace/traces"
)

func bufioOf(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

// captureBytes captures the named in-memory logs with o.
func captureBytes(t *testing.T, o Options, logs map[string][]byte, names ...string) (*Result, int) {
	t.Helper()
	var inputs []Input
	for _, n := range names {
		inputs = append(inputs, Input{Name: n, R: bytes.NewReader(logs[n])})
	}
	pl, err := start(context.Background(), o, inputs)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.close()
	runs := pl.spool.spilled
	res := &Result{Meta: pl.meta()}
	for r, err := range pl.records() {
		if err != nil {
			t.Fatal(err)
		}
		res.Records = append(res.Records, r)
	}
	res.Stats = pl.stats
	return res, runs
}

// A capture whose requests outgrow SortMemoryBytes spills sorted runs and
// merges them (and its session counts, made to spill a few at a time): records, metadata and stats equal the in-memory capture's,
// for every log format, the parallel parser, and the sample gateway logs
// with sessions, categories and prefix blocks; the runs are gone after.
func TestSpillSameRecords(t *testing.T) {
	logs := map[string][]byte{}
	for _, f := range []string{"openai.jsonl", "litellm.jsonl", "vllm_old.log", "vllm_new.log", "otlp.jsonl"} {
		b, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		logs[f] = b
	}
	logs["sample.jsonl"] = sampleLogs(t, 3, 40*time.Second)
	tests := []struct {
		name    string
		inputs  []string
		budget  int64
		workers int
	}{
		{"openai-jsonl, one request per run", []string{"openai.jsonl"}, 1, 1},
		{"litellm", []string{"litellm.jsonl"}, 1, 1},
		{"vllm-log", []string{"vllm_old.log", "vllm_new.log"}, 1, 1},
		{"otlp-json, several spans on a line", []string{"otlp.jsonl"}, 1, 1},
		{"several inputs merged by arrival", []string{"vllm_new.log", "openai.jsonl", "otlp.jsonl"}, 1, 2},
		{"sample gateway logs with blocks and sessions, parallel parse", []string{"sample.jsonl"}, 256 << 10, 2},
		{"sample gateway logs, one parser", []string{"sample.jsonl"}, 512 << 10, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Key = []byte("spill-test-key-0123456789")
			o.MinCategorySize, o.BlockSize, o.Year, o.Workers = 2, 16, 2025, tc.workers
			want, runs := captureBytes(t, o, logs, tc.inputs...)
			if runs != 0 {
				t.Fatalf("the in-memory capture spilled %d runs", runs)
			}
			o.TempDir = t.TempDir()
			o.SortMemoryBytes = tc.budget
			// Session counts spill too, a few per run.
			defer func(n int) { endsPerRun = n }(endsPerRun)
			endsPerRun = 3
			got, runs := captureBytes(t, o, logs, tc.inputs...)
			if runs < 2 {
				t.Fatalf("%d runs spilled: the test does not test the merge", runs)
			}
			if len(got.Records) != len(want.Records) || len(want.Records) == 0 {
				t.Fatalf("%d records, want %d", len(got.Records), len(want.Records))
			}
			for i := range want.Records {
				if !reflect.DeepEqual(got.Records[i], want.Records[i]) {
					t.Fatalf("record %d:\n got %+v\nwant %+v", i, got.Records[i], want.Records[i])
				}
			}
			if !reflect.DeepEqual(got.Meta, want.Meta) || !reflect.DeepEqual(got.Stats, want.Stats) {
				t.Errorf("meta or stats differ:\n got %+v %+v\nwant %+v %+v", got.Meta, got.Stats, want.Meta, want.Stats)
			}
			if left, _ := os.ReadDir(o.TempDir); len(left) > 0 {
				t.Errorf("%d temporary entries left", len(left))
			}
		})
	}
}

// cancelAfter cancels a context once n bytes were read.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel func()
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.n -= n; c.n <= 0 {
		c.cancel()
	}
	return n, err
}

// The spilled runs are removed when the capture is interrupted, when a
// strict capture meets a malformed line, and when the output cannot be
// created.
func TestSpillCleanup(t *testing.T) {
	logs := sampleLogs(t, 5, 30*time.Second)
	o := DefaultOptions()
	o.SortMemoryBytes = 64 << 10
	o.Workers = 1

	t.Run("interrupted", func(t *testing.T) {
		o := o
		o.TempDir = t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		in := &cancelAfter{r: bytes.NewReader(logs), n: len(logs) / 2, cancel: cancel}
		_, err := Run(ctx, o, []string{"-"}, in, "", nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		assertEmpty(t, o.TempDir)
	})
	t.Run("strict, malformed line late in the input", func(t *testing.T) {
		o := o
		o.TempDir, o.Strict = t.TempDir(), true
		bad := append(append([]byte{}, logs...), []byte("{not json\n")...)
		_, err := Run(context.Background(), o, []string{"-"}, bytes.NewReader(bad), "", nil)
		var le *LineError
		if !errors.As(err, &le) {
			t.Fatalf("err = %v, want a *LineError", err)
		}
		assertEmpty(t, o.TempDir)
	})
	t.Run("output cannot be created", func(t *testing.T) {
		o := o
		o.TempDir = t.TempDir()
		_, err := Run(context.Background(), o, []string{"-"}, bytes.NewReader(logs), "", func(m traces.Meta) (traces.Writer, error) {
			return nil, errors.New("no space left on device")
		})
		if err == nil || !strings.Contains(err.Error(), "no space") {
			t.Fatalf("err = %v", err)
		}
		assertEmpty(t, o.TempDir)
	})
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("%d temporary entries left in %s", len(left), dir)
	}
}

// Every field of a redacted request survives a run's encoding: the test
// sets each one (by reflection, so a new field cannot be forgotten).
func TestRunEncodingRoundTrip(t *testing.T) {
	var e redacted
	fill(reflect.ValueOf(&e).Elem(), 1)
	b := encodeRedacted(nil, &e)
	d := decoder{strs: map[string]string{}}
	var got redacted
	if err := d.decode(bufioOf(b), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, e)
	}
	// A run cut short is an error, not a silent end.
	if err := d.decode(bufioOf(b[:len(b)-3]), &got); err == nil || err == io.EOF {
		t.Fatalf("truncated run: err = %v", err)
	}
}

// fill sets every field of v to a distinct non-zero value.
func fill(v reflect.Value, seed int) int {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			// The fields are unexported: set them through their address.
			seed = fill(reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), seed+1)
		}
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(seed * 1000003))
	case reflect.Uint64:
		v.SetUint(uint64(seed) << 40)
	case reflect.String:
		v.SetString(strings.Repeat("x", seed))
	case reflect.Array:
		for i := range v.Len() {
			v.Index(i).SetUint(uint64(seed + i))
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 3, 3)
		for i := range 3 {
			seed = fill(s.Index(i), seed+1)
		}
		v.Set(s)
	default:
		panic("fill: unhandled kind " + v.Kind().String())
	}
	return seed
}

// Requests with the same arrival, input and line (several spans on one
// line) keep their input order across runs and across the merges of runs
// (50 runs: merged 16 at a time), as the in-memory sort keeps it.
func TestSpoolTiesKeepInputOrder(t *testing.T) {
	o := DefaultOptions()
	o.SortMemoryBytes, o.TempDir = 1, t.TempDir()
	s := newSpool(o)
	defer s.close()
	const n = 50
	for i := range n {
		e := redacted{t: int64(i % 3), line: 1, inTok: int32(i)}
		if err := s.add(&e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
	var got []int32
	if err := s.each(func(e *redacted) bool { got = append(got, e.inTok); return true }); err != nil {
		t.Fatal(err)
	}
	var want []int32
	for r := range 3 {
		for i := r; i < n; i += 3 {
			want = append(want, int32(i))
		}
	}
	if !reflect.DeepEqual(got, want) || s.merged == 0 {
		t.Fatalf("order %v, want %v (%d merges)", got, want, s.merged)
	}
}

// A spilled run that cannot be read back ends the record stream with its
// error, the stream's last item, so no caller takes a short trace for a
// whole one.
func TestSpillReadErrorEndsStream(t *testing.T) {
	sample := sampleLogs(t, 7, 20*time.Second)
	o := DefaultOptions()
	o.Key = []byte("spill-test-key-0123456789")
	o.TempDir, o.SortMemoryBytes = t.TempDir(), 64<<10
	pl, err := start(context.Background(), o, []Input{{Name: "sample.jsonl", R: bytes.NewReader(sample)}})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.close()
	if len(pl.spool.runs) < 2 {
		t.Fatalf("%d runs spilled: the test does not read runs back", len(pl.spool.runs))
	}
	if err := os.WriteFile(pl.spool.runs[1], []byte("not a run"), 0o600); err != nil {
		t.Fatal(err)
	}
	var errs []error
	after := 0
	for _, err := range pl.records() {
		if len(errs) > 0 {
			after++
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) != 1 || after != 0 {
		t.Errorf("stream over a damaged run: errors %v, %d items after the first, want one error, last", errs, after)
	}
}
