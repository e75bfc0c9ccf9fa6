package capture

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestWorkersSameOutput: the records, metadata and problems do not depend
// on the number of parsing goroutines.
func TestWorkersSameOutput(t *testing.T) {
	inputs := map[string][]byte{"sample": sampleLogs(t, 4, 6*time.Second)}
	for _, f := range []string{"openai.jsonl", "litellm.jsonl", "otlp.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		// Many copies so batches split and problems repeat.
		inputs[f] = bytes.Repeat(b, 300)
	}
	for name, data := range inputs {
		var base *Result
		for _, workers := range []int{1, 2, 3} {
			o := DefaultOptions()
			o.Workers = workers
			o.MinCategorySize = 2
			o.BlockSize = 32
			o.Key = []byte("0123456789abcdef0123")
			res, err := Capture(context.Background(), o, []Input{{Name: name, R: bytes.NewReader(data)}})
			if err != nil {
				t.Fatalf("%s workers=%d: %v", name, workers, err)
			}
			if base == nil {
				base = res
				if len(res.Records) == 0 {
					t.Fatalf("%s: no records", name)
				}
				continue
			}
			if !reflect.DeepEqual(res.Records, base.Records) {
				t.Errorf("%s: records differ with %d workers", name, workers)
			}
			if !reflect.DeepEqual(res.Meta, base.Meta) || !reflect.DeepEqual(res.Stats, base.Stats) {
				t.Errorf("%s: meta or stats differ with %d workers:\n%+v\n%+v", name, workers, res.Stats, base.Stats)
			}
		}
	}
}
