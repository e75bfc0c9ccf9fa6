package capture

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

const goodLine = `{"time":"2025-03-01T10:00:00Z","request":{"model":"m","messages":[{"role":"user","content":"hi"}]},"response":{"usage":{"prompt_tokens":5,"completion_tokens":2}}}`

func TestBadInput(t *testing.T) {
	huge := `{"time":"2025-03-01T10:00:00Z","request":{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", 20<<20) + `"}]}}`
	lines := []string{
		goodLine,                          // 1
		`{"time":"2025-03-01T10:00:0`,     // 2 broken JSON
		huge,                              // 3 20 MB line
		"{\"time\":\"x\xff\xfe\"}",        // 4 non-UTF-8
		`{"request":{"model":"m"}}`,       // 5 missing time
		`{"time":"2025-03-01T10:00:01Z"}`, // 6 missing request
		`{"time":true,"request":{}}`,      // 7 bad time
		`{"time":"2025-03-01T10:00:02Z","request":{"model":"m","messages":"x"}}`, // 8 bad value
		``,        // 9 blank: ignored
		`[1,2,3]`, // 10 not an object
		goodLine,  // 11
	}
	in := strings.Join(lines, "\n") + "\n"
	o := DefaultOptions()
	o.BlockSize = 0
	res := mustCapture(t, o, []Input{{Name: "bad.jsonl", R: strings.NewReader(in)}})
	if len(res.Records) != 2 {
		t.Errorf("kept %d records, want the 2 good lines", len(res.Records))
	}
	want := map[string][2]int64{ // kind → count, first line
		KindBadJSON:  {1, 2},
		KindTooLong:  {1, 3},
		KindNotUTF8:  {1, 4},
		KindMissing:  {2, 5},
		KindBadValue: {3, 7},
	}
	got := map[string][2]int64{}
	for _, p := range res.Stats.Problems {
		got[p.Kind] = [2]int64{p.Count, p.First.Line}
		if !strings.HasPrefix(p.First.Error(), "bad.jsonl:") {
			t.Errorf("problem message %q does not name the file and line", p.First.Error())
		}
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got count,line %v, want %v", k, got[k], w)
		}
	}
	if res.Stats.Lines != 11 {
		t.Errorf("lines %d", res.Stats.Lines)
	}

	// --strict fails on the first.
	o.Strict = true
	_, err := Capture(context.Background(), o, []Input{{Name: "bad.jsonl", R: strings.NewReader(in)}})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 || le.Kind != KindBadJSON {
		t.Errorf("strict: %v", err)
	}
}

func compressed(t *testing.T, kind string, data []byte) []byte {
	var buf bytes.Buffer
	switch kind {
	case "gzip":
		zw := gzip.NewWriter(&buf)
		zw.Write(data)
		zw.Close()
	case "zstd":
		zw, _ := zstd.NewWriter(&buf)
		zw.Write(data)
		zw.Close()
	}
	return buf.Bytes()
}

func TestCompressedAndTruncated(t *testing.T) {
	var sb strings.Builder
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		// random content so the compressed stream spans many blocks
		fmt.Fprintf(&sb, `{"time":"2025-03-01T10:00:00Z","request":{"model":"m","messages":[{"role":"user","content":"%x"}]},"response":{"usage":{"prompt_tokens":5,"completion_tokens":2}}}`+"\n", rng.Uint64()^rng.Uint64()<<7)
	}
	plain := []byte(sb.String())
	o := DefaultOptions()
	o.BlockSize = 0
	for _, kind := range []string{"gzip", "zstd"} {
		data := compressed(t, kind, plain)
		res, err := Capture(context.Background(), o, []Input{{Name: "x", R: bytes.NewReader(data)}})
		if err != nil || len(res.Records) != 2000 || res.Stats.Malformed() != 0 {
			t.Fatalf("%s: %v, %d records, problems %+v", kind, err, len(res.Records), res.Stats.Problems)
		}
		// Cut the stream short: lines before the damage are kept and the
		// damage is reported at the next line.
		cut := data[:len(data)*2/3]
		res, err = Capture(context.Background(), o, []Input{{Name: "x", R: bytes.NewReader(cut)}})
		if err != nil {
			t.Fatalf("%s truncated: %v", kind, err)
		}
		p, ok := problemOf(res, KindTruncated)
		if !ok || p.Count != 1 || len(res.Records) == 0 || len(res.Records) >= 2000 || p.First.Line != int64(len(res.Records))+1 {
			t.Errorf("%s truncated: %d records, problems %+v", kind, len(res.Records), res.Stats.Problems)
		}
		o2 := o
		o2.Strict = true
		if _, err := Capture(context.Background(), o2, []Input{{Name: "x", R: bytes.NewReader(cut)}}); err == nil {
			t.Errorf("%s truncated strict: no error", kind)
		}
	}
	// A damaged gzip header.
	res, err := Capture(context.Background(), o, []Input{{Name: "x", R: bytes.NewReader([]byte{0x1f, 0x8b, 0, 0})}})
	if err != nil || res.Stats.Malformed() != 1 {
		t.Errorf("damaged header: %v %+v", err, res)
	}
}

func TestLineReaderLimits(t *testing.T) {
	in := "short\n" + strings.Repeat("x", 5000) + "\nlast-no-newline"
	lr := &lineReader{br: bufioReader(in, 16), max: 1024}
	var got []string
	var long []int64
	for {
		l, tooLong, err := lr.next()
		if err != nil {
			break
		}
		if tooLong {
			long = append(long, lr.line)
			continue
		}
		got = append(got, string(l))
	}
	if strings.Join(got, ",") != "short,last-no-newline" || len(long) != 1 || long[0] != 2 {
		t.Errorf("got %q, long lines %v", got, long)
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Capture(ctx, DefaultOptions(), []Input{{Name: "x", R: strings.NewReader(goodLine + "\n")}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
}
