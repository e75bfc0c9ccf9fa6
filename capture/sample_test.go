package capture

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

func sampleLogs(t testing.TB, seed int64, d time.Duration) []byte {
	t.Helper()
	o := DefaultSampleOptions()
	o.Duration = d
	var buf bytes.Buffer
	if err := WriteSampleLogs(context.Background(), &buf, seed, o); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSampleLogs(t *testing.T) {
	d := 60 * time.Second
	if testing.Short() || raceEnabled {
		d = 20 * time.Second
	}
	data := sampleLogs(t, 1, d)
	if a, b := sampleLogs(t, 2, 3*time.Second), sampleLogs(t, 2, 3*time.Second); !bytes.Equal(a, b) {
		t.Fatal("same seed, different logs")
	}
	o := DefaultOptions()
	o.BlockSize = 0
	res := mustCapture(t, o, []Input{{Name: "sample", R: bytes.NewReader(data)}})
	n := len(res.Records)
	lo, hi := 1500*int(d/time.Second)/60, 3000*int(d/time.Second)/60
	if n < lo || n > hi {
		t.Errorf("%d requests over %v, want %d–%d", n, d, lo, hi)
	}
	if res.Stats.Malformed() != 0 {
		t.Errorf("problems %+v", res.Stats.Problems)
	}
	var errs, streamed, multi, cats int
	for _, r := range res.Records {
		if r.Status != traces.StatusOK {
			errs++
		}
		if r.FirstTokenNs >= 0 {
			streamed++
		}
		if r.Turn > 1 {
			multi++
		}
		if r.Category != "" {
			cats++
		}
	}
	if errs == 0 || streamed == 0 || streamed == n || multi == 0 || cats == 0 {
		t.Errorf("errors %d, streamed %d, later turns %d, categorized %d of %d", errs, streamed, multi, cats, n)
	}
	if res.Stats.Categories < 4 || res.Stats.CategoriesDropped < 1 {
		t.Errorf("categories kept %d dropped %d", res.Stats.Categories, res.Stats.CategoriesDropped)
	}
	last := res.Records[n-1].ArrivalNs
	if last < int64(d)*8/10 || last > int64(d) {
		t.Errorf("last arrival %v", time.Duration(last))
	}
}

// TestSampleUsageMatchesTokenizer strips the usage numbers from sample logs:
// tokenizing the requests must give exactly the usage the generator wrote,
// which pins capture's chat token count.
func TestSampleUsageMatchesTokenizer(t *testing.T) {
	data := sampleLogs(t, 3, 4*time.Second)
	var stripped bytes.Buffer
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if resp, ok := m["response"].(map[string]any); ok {
			delete(resp, "usage")
		}
		b, _ := json.Marshal(m)
		stripped.Write(b)
		stripped.WriteByte('\n')
	}
	o := DefaultOptions()
	o.BlockSize = 64
	withUsage := mustCapture(t, o, []Input{{R: bytes.NewReader(data)}})
	tokenized := mustCapture(t, o, []Input{{R: &stripped}})
	if len(withUsage.Records) != len(tokenized.Records) || len(withUsage.Records) == 0 {
		t.Fatalf("%d vs %d records", len(withUsage.Records), len(tokenized.Records))
	}
	for i := range withUsage.Records {
		a, b := withUsage.Records[i], tokenized.Records[i]
		if a.Status != traces.StatusOK {
			continue
		}
		if a.InputTokens != b.InputTokens || a.OutputTokens != b.OutputTokens {
			t.Errorf("seq %d: usage %d/%d, tokenized %d/%d", i, a.InputTokens, a.OutputTokens, b.InputTokens, b.OutputTokens)
		}
		if len(a.PrefixBlocks) != len(b.PrefixBlocks) {
			t.Errorf("seq %d: blocks %d vs %d", i, len(a.PrefixBlocks), len(b.PrefixBlocks))
		}
	}
	if tokenized.Meta.Tokenizer != DefaultTokenizer {
		t.Errorf("tokenizer %q", tokenized.Meta.Tokenizer)
	}
}
