package replay

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// TestParseTarget: every form of a target spec, and the errors a person
// gets for the near misses.
func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		why, spec string
		url       string                  // a URL target's URL
		sim       func(*sim.Options) bool // a simulator target's check
		err       []string                // an error's words
	}{
		{why: "a URL is a running server", spec: "http://localhost:8000", url: "http://localhost:8000"},
		{why: "an https URL keeps its credentials for the requests", spec: " https://u:p@vllm.example:443/ ", url: "https://u:p@vllm.example:443/"},
		{why: "sim alone is the built-in simulator as the base has it", spec: "sim",
			sim: func(o *sim.Options) bool { return o.MaxNumSeqs == 256 && o.PerRequestMetrics }},
		{why: "sim with no keys is the same", spec: "sim:",
			sim: func(o *sim.Options) bool { return o.MaxNumSeqs == 256 }},
		{why: "sim with keys configures it over the base", spec: "sim:max-num-seqs=32,prefix-caching=false",
			sim: func(o *sim.Options) bool { return o.MaxNumSeqs == 32 && o.DisablePrefixCaching && o.PerRequestMetrics }},
		{why: "a preset applies first wherever it stands", spec: "sim:max-num-seqs=4,preset=tiny",
			sim: func(o *sim.Options) bool { return o.MaxNumSeqs == 4 && o.MaxNumBatchedTokens == 512 }},
		{why: "a fleet is a simulator target", spec: "sim:replicas=4,router=prefix-aware",
			sim: func(o *sim.Options) bool { return o.Fleet.Replicas == 4 && o.Fleet.Router == sim.RouterPrefixAware }},
		{why: "a disaggregated fleet with a scoped key", spec: "sim:prefill-replicas=1,decode-replicas=3,decode.max-num-seqs=64",
			sim: func(o *sim.Options) bool { return o.Disaggregated() && len(o.Fleet.Overrides) == 1 }},
		{why: "an unknown key is named with the keys there are", spec: "sim:colour=blue",
			err: []string{`unknown key "colour"`, "keys: preset, attn-per-context-token"}},
		{why: "a misspelt key gets the key it was meant to be", spec: "sim:max-num-seq=32",
			err: []string{`unknown key "max-num-seq"; did you mean "max-num-seqs"?`}},
		{why: "a bad value names its key and the form it wants", spec: "sim:max-num-seqs=lots",
			err: []string{"max-num-seqs: want a whole number"}},
		{why: "a step budget below a token per running sequence is refused, naming the key", spec: "sim:max-num-batched-tokens=1",
			err: []string{`"max-num-batched-tokens=1"`, "MaxNumBatchedTokens: 1 is below Options.MaxNumSeqs 256"}},
		{why: "a KV cache that cannot hold one request of the context length is refused", spec: "sim:num-gpu-blocks=1",
			err: []string{`"num-gpu-blocks=1"`, "larger than the KV cache (1 blocks of 16 = 16 tokens)"}},
		{why: "a fleet key without replicas says what it needs", spec: "sim:router=prefix-aware",
			err: []string{"router needs replicas"}},
		{why: "an empty spec says the forms", spec: "  ",
			err: []string{"target: empty: want sim, sim:KEY=VALUE,... or a server's URL"}},
		{why: "a URL without a host is refused", spec: "http://",
			err: []string{`"http://" is not a server's URL`}},
		{why: "a host and port without a scheme gets the URL it means", spec: "localhost:8000",
			err: []string{"neither a URL", "did you mean http://localhost:8000?"}},
		{why: "sim with = instead of : gets the spec it means", spec: "sim=max-num-seqs=32",
			err: []string{"did you mean sim:max-num-seqs=32?"}},
		{why: "sim in capitals gets the spec it means", spec: "SIM:replicas=2",
			err: []string{"did you mean sim:replicas=2?"}},
		{why: "credentials are not repeated in an error", spec: "user:secret@localhost:8000",
			err: []string{"(redacted)@localhost:8000"}},
	} {
		t.Run(tc.why, func(t *testing.T) {
			to, err := ParseTarget(tc.spec, BuiltinSim())
			if tc.err != nil {
				if err == nil {
					t.Fatalf("ParseTarget(%q) accepted: %+v", tc.spec, to)
				}
				for _, w := range tc.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("ParseTarget(%q): %q lacks %q", tc.spec, err, w)
					}
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("ParseTarget(%q): the error repeats the credentials: %v", tc.spec, err)
				}
				var oe *traces.OptionError
				if !errors.As(err, &oe) || oe.Option != "target" {
					t.Errorf("ParseTarget(%q): %v is not an option error naming the target", tc.spec, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTarget(%q): %v", tc.spec, err)
			}
			if to.URL != tc.url || (to.Sim != nil) != (tc.sim != nil) {
				t.Fatalf("ParseTarget(%q) = URL %q, sim %v", tc.spec, to.URL, to.Sim != nil)
			}
			if tc.sim != nil && !tc.sim(to.Sim) {
				t.Errorf("ParseTarget(%q): simulator %+v", tc.spec, *to.Sim)
			}
		})
	}
}

// TestParseTargetBase: a caller's base is what "sim" means, and the keys
// override it; the base itself is not changed.
func TestParseTargetBase(t *testing.T) {
	base := sim.DefaultOptions()
	base.MaxNumSeqs, base.StepFixed = 8, 3*time.Millisecond
	to, err := ParseTarget("sim:max-num-seqs=16", base)
	if err != nil {
		t.Fatal(err)
	}
	if to.Sim.MaxNumSeqs != 16 || to.Sim.StepFixed != 3*time.Millisecond || base.MaxNumSeqs != 8 {
		t.Errorf("keys over the base: %+v (base now %d seqs)", *to.Sim, base.MaxNumSeqs)
	}
}

// TestFormatSimTargetRoundTrip: the spec a simulator is recorded under
// parses back into the same configuration.
func TestFormatSimTargetRoundTrip(t *testing.T) {
	for _, spec := range []string{"sim", "sim:max-num-seqs=32", "sim:replicas=4,router=prefix-aware,max-num-seqs=4",
		"sim:decode-replicas=3,prefill-replicas=1,preset=tiny,decode.max-num-seqs=8"} {
		to, err := ParseTarget(spec, BuiltinSim())
		if err != nil {
			t.Fatal(err)
		}
		got := FormatSimTarget(*to.Sim)
		again, err := ParseTarget(got, BuiltinSim())
		if err != nil {
			t.Fatalf("%s is recorded as %s, which does not parse: %v", spec, got, err)
		}
		if FormatSimTarget(*again.Sim) != got || sim.FormatConfig(*again.Sim) != sim.FormatConfig(*to.Sim) {
			t.Errorf("%s → %s → %s", spec, got, FormatSimTarget(*again.Sim))
		}
	}
	if got := FormatSimTarget(sim.DefaultOptions()); got != "sim" {
		t.Errorf("FormatSimTarget(defaults) = %q, want sim", got)
	}
}

// TestTargetRecordsSimTarget: a run against the built-in simulator records
// its configuration as a spec (not the context length the trace needed),
// and a run against a URL records none.
func TestTargetRecordsSimTarget(t *testing.T) {
	ctx := context.Background()
	to, err := ParseTarget("sim:max-num-seqs=32,preset=tiny", BuiltinSim())
	if err != nil {
		t.Fatal(err)
	}
	to.LongestRequest = 100000 // larger than tiny's context: raised for the run, not recorded
	tgt, err := StartTarget(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	o := DefaultOptions()
	tgt.Apply(&o)
	res, err := Run(ctx, testTrace(3, 10*time.Millisecond, 32, 2), traces.NewMeta("test"), o)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Meta.Get(MetaSim); got != "sim:preset=tiny,max-num-seqs=32" {
		t.Errorf("%s = %q", MetaSim, got)
	}
	o2 := DefaultOptions()
	o2.URL = tgt.URL
	res, err = Run(ctx, testTrace(2, 10*time.Millisecond, 32, 2), traces.NewMeta("test"), o2)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Meta.Get(MetaSim); got != "" {
		t.Errorf("a URL target's run records %s = %q", MetaSim, got)
	}
}

// FuzzParseTarget: no spec panics; an accepted one is exactly one kind of
// target, a simulator's spec parses back to its configuration, and an
// error never repeats what may be a password.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"sim", "sim:", "sim:max-num-seqs=32", "sim:replicas=4,router=prefix-aware", "http://localhost:8000",
		"https://u:pw@h:1/x", "localhost:8000", "sim=x=1", "SIM", "", "http://", "sim:decode-replicas=2,prefill-replicas=1,decode-0.preset=tiny"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		to, err := ParseTarget(s, BuiltinSim())
		if err != nil {
			if strings.Contains(s, "pw@") && strings.Contains(err.Error(), "pw@") {
				t.Fatalf("ParseTarget(%q): error repeats the credentials: %v", s, err)
			}
			return
		}
		if (to.URL == "") == (to.Sim == nil) {
			t.Fatalf("ParseTarget(%q) = URL %q and sim %v: want exactly one", s, to.URL, to.Sim != nil)
		}
		if to.Sim != nil {
			spec := FormatSimTarget(*to.Sim)
			again, err := ParseTarget(spec, BuiltinSim())
			if err != nil || sim.FormatConfig(*again.Sim) != sim.FormatConfig(*to.Sim) {
				t.Fatalf("ParseTarget(%q) is recorded as %q, which parses to %v, %v", s, spec, again.Sim, err)
			}
		}
	})
}
