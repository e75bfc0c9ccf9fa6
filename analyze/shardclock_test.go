package analyze

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// TestShardClocks is a table of pooled results files whose clock records
// differ by known amounts: the report gives the spread, and warns only
// above 5 ms.
func TestShardClocks(t *testing.T) {
	type clock struct{ offset, offErr, start string }
	tests := []struct {
		name         string
		files        []clock
		offsetSpread float64 // ms; -1: no ShardClocks
		startSpread  float64
		warnOffset   bool
		warnStart    bool
	}{
		{"shards within 5 ms of each other give the spread and no warning",
			[]clock{{"1000000", "300000", "200000"}, {"3500000", "400000", "2200000"}}, 2.5, 2, false, false},
		{"clock offsets 7 ms apart warn",
			[]clock{{"1000000", "300000", "200000"}, {"8000000", "300000", "300000"}, {"2000000", "300000", "100000"}}, 7, 0.2, true, false},
		{"start errors 12 ms apart warn",
			[]clock{{"0", "500000", "1000000"}, {"0", "500000", "13000000"}}, 0, 12, false, true},
		{"one file with a clock record is no pool",
			[]clock{{"0", "500000", "1000000"}, {"", "", ""}}, -1, 0, false, false},
		{"files without clock records (older replays) give none",
			[]clock{{"", "", ""}, {"", "", ""}}, -1, 0, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var names []string
			for i, c := range tc.files {
				m := traces.NewMeta("replay")
				for k, v := range map[string]string{metaClockOffset: c.offset, metaClockOffsetError: c.offErr, metaStartError: c.start} {
					if v != "" {
						m.Set(k, v)
					}
				}
				name := filepath.Join(dir, fmt.Sprintf("results-%d.parquet", i))
				w, err := traces.Create(name, m)
				if err != nil {
					t.Fatal(err)
				}
				r := rec(int64(i), time.Duration(i)*time.Millisecond, 0, 20*time.Millisecond, 100*time.Millisecond, 100, 10, 1)
				if _, err := w.Write([]traces.Record{r}); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				names = append(names, name)
			}
			rep := mustAnalyzeFiles(t, names, DefaultOptions())
			warned := func(s string) bool {
				for _, w := range rep.Warnings {
					if strings.Contains(w, s) {
						return true
					}
				}
				return false
			}
			if tc.offsetSpread < 0 {
				if rep.ShardClocks != nil {
					t.Fatalf("got %+v, want none", rep.ShardClocks)
				}
				return
			}
			c := rep.ShardClocks
			if c == nil || len(c.Shards) != len(tc.files) || math.Abs(c.OffsetSpreadMs-tc.offsetSpread) > 1e-9 || math.Abs(c.StartErrorSpreadMs-tc.startSpread) > 1e-9 {
				t.Fatalf("got %+v, want offsets spread %v ms, start errors %v ms", c, tc.offsetSpread, tc.startSpread)
			}
			if warned("clocks disagree") != tc.warnOffset || warned("started apart") != tc.warnStart {
				t.Errorf("warnings %q: want offset warning %v, start warning %v", rep.Warnings, tc.warnOffset, tc.warnStart)
			}
			var sb strings.Builder
			if err := rep.WriteText(&sb); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(sb.String(), "Shard clocks") {
				t.Errorf("the text report has no shard clock line:\n%s", sb.String())
			}
		})
	}
}
