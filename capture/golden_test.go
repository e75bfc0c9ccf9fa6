package capture

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/internal/golden"
	"github.com/tokentrace/tokentrace/traces"
)

// TestGolden captures every fixture with a fixed key and compares the JSONL
// trace (metadata line included) with testdata/golden/<fixture>.jsonl.
// Run with -update after an intended change and review the diff.
func TestGolden(t *testing.T) {
	for _, f := range []string{"openai.jsonl", "litellm.jsonl", "vllm_old.log", "vllm_new.log", "otlp.jsonl", "otlp_agent.jsonl"} {
		t.Run(f, func(t *testing.T) {
			o := DefaultOptions()
			o.Key = []byte("golden-test-key-0123456789")
			o.MinCategorySize = 2
			o.BlockSize = 16
			o.Year = 2025
			res := captureFiles(t, o, f)
			var buf bytes.Buffer
			w, err := traces.NewJSONLWriter(&buf, res.Meta)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(res.Records)
			w.Close()
			path := filepath.Join("testdata", "golden", strings.TrimSuffix(f, filepath.Ext(f))+".jsonl")
			if golden.Update() {
				golden.Write(t, path, buf.Bytes())
				return
			}
			// Compare decoded records and metadata, not bytes, so a new
			// column in package traces does not break this test.
			want := golden.Read(t, path)
			r, err := traces.NewJSONLReader(bytes.NewReader(want), path, strictOpen())
			if err != nil {
				t.Fatal(err)
			}
			wantRecs, err := traces.ReadFrom(r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := traces.NewJSONLReader(&buf, "got", strictOpen())
			if err != nil {
				t.Fatal(err)
			}
			gotRecs, err := traces.ReadFrom(got)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gotRecs, wantRecs) || !reflect.DeepEqual(got.Meta(), r.Meta()) {
				t.Errorf("%s differs from %s (run with -update and review the diff)", f, path)
			}
		})
	}
}

// strictOpen is traces.DefaultOpenOptions failing on the first bad row.
func strictOpen() traces.OpenOptions {
	o := traces.DefaultOpenOptions()
	o.Strict = true
	return o
}
