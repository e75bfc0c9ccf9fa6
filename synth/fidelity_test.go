package synth

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/internal/testtraces"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

// publicTrace names a shared public trace and its import format.
type publicTrace struct {
	name, format, path string
}

var publicTraces = []publicTrace{
	{"azure-conv", "azure", "azure_llm_2023/AzureLLMInferenceTrace_conv.csv"},
	{"azure-code", "azure", "azure_llm_2023/AzureLLMInferenceTrace_code.csv"},
	{"mooncake-conv", "mooncake", "mooncake/conversation_trace.jsonl"},
}

// loadPublic imports a shared trace, skipping the test when it is absent.
func loadPublic(t testing.TB, p publicTrace) ([]traces.Record, traces.Meta) {
	t.Helper()
	path := testtraces.Path(t, p.path)
	recs, meta, _, err := formats.ImportAll(context.Background(), p.format, path, traces.DefaultOpenOptions())
	if err != nil {
		t.Fatalf("import %s: %v", path, err)
	}
	return recs, meta
}

// memWriter collects records.
type memWriter struct{ recs []traces.Record }

func (w *memWriter) Write(r []traces.Record) (int, error) {
	w.recs = append(w.recs, r...)
	return len(r), nil
}
func (w *memWriter) Close() error { return nil }

func fitGen(t testing.TB, recs []traces.Record, meta traces.Meta, o GenOptions) (*Model, []traces.Record) {
	t.Helper()
	m := fitModelMeta(t, recs, meta)
	return m, gen(t, m, o)
}

// TestFidelityPublicTraces fits each shared trace, generates the same
// duration and asserts the thresholds on the self-fit.
func TestFidelityPublicTraces(t *testing.T) {
	for _, p := range publicTraces {
		t.Run(p.name, func(t *testing.T) {
			recs, meta := loadPublic(t, p)
			_, syn := fitGen(t, recs, meta, genSeed(7))
			rep := Check(recs, syn, DefaultThresholds())
			for _, c := range rep.Checks {
				t.Logf("self-fit %s %s = %.4f (limit %.4f)", p.name, c.Name, c.Value, c.Threshold)
				if !c.Pass {
					t.Errorf("%s: %s = %.4f, want <= %.4f", p.name, c.Name, c.Value, c.Threshold)
				}
			}
			if !rep.Pass {
				t.Errorf("%s: report does not pass", p.name)
			}
		})
	}
}

// splitHalves splits a trace at half its span; the second half is re-based
// to start at 0.
func splitHalves(recs []traces.Record) (first, second []traces.Record) {
	sorted := append([]traces.Record(nil), recs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].ArrivalNs < sorted[j].ArrivalNs })
	mid := sorted[len(sorted)-1].ArrivalNs / 2
	mid = mid / int64(time.Minute) * int64(time.Minute)
	for _, r := range sorted {
		if r.ArrivalNs < mid {
			first = append(first, r)
		} else {
			r.ArrivalNs -= mid
			second = append(second, r)
		}
	}
	return first, second
}

// TestHeldOutPublicTraces fits the first half of each trace and checks
// against the second. Figures are logged (the README records them), not
// asserted: the second half is a different hour of traffic.
func TestHeldOutPublicTraces(t *testing.T) {
	for _, p := range publicTraces {
		t.Run(p.name, func(t *testing.T) {
			recs, meta := loadPublic(t, p)
			first, second := splitHalves(recs)
			span := second[len(second)-1].ArrivalNs + 1
			_, syn := fitGen(t, first, meta, with(genSeed(7), func(o *GenOptions) { o.Duration = time.Duration(span) }))
			rep := Check(second, syn, DefaultThresholds())
			for _, c := range rep.Checks {
				t.Logf("held-out %s %s = %.4f (limit %.4f, pass %v)", p.name, c.Name, c.Value, c.Threshold, c.Pass)
			}
		})
	}
}
