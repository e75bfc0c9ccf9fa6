package sim

import (
	"strings"
	"testing"
	"time"
)

// TestFleetConfig: the fleet keys shape a fleet, and scoped keys configure
// its pools and replicas.
func TestFleetConfig(t *testing.T) {
	o := DefaultOptions()
	if err := ApplyConfig(&o, "prefill-replicas=2,decode-replicas=3,router=prefix-aware,kv-transfer-latency=2ms,"+
		"kv-transfer-per-token=5us,kv-transfer-bandwidth=25GB/s,decode.max-num-seqs=512,decode-1.step-fixed=20ms,prefill.preset=phi4-mini-l4"); err != nil {
		t.Fatal(err)
	}
	f := o.Fleet
	if f.PrefillReplicas != 2 || f.DecodeReplicas != 3 || f.Router != RouterPrefixAware || f.KVTransferLatency != 2*time.Millisecond ||
		f.KVTransferPerToken != 5*time.Microsecond || f.KVTransferBandwidth != 25e9 {
		t.Fatalf("fleet %+v", f)
	}
	specs, err := o.ReplicaSpecs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sp := range specs {
		names = append(names, sp.Name+":"+sp.Role)
	}
	if got := strings.Join(names, " "); got != "prefill-0:prefill prefill-1:prefill decode-0:decode decode-1:decode decode-2:decode" {
		t.Fatalf("replicas %s", got)
	}
	if p := specs[0].Options; p.StepFixed != 28*time.Millisecond || p.MaxModelLen != o.MaxModelLen || p.BlockSize != o.BlockSize {
		t.Errorf("prefill-0: the pool's preset should set step times, not the context length: %+v", p)
	}
	if d := specs[3].Options; d.MaxNumSeqs != 512 || d.StepFixed != 20*time.Millisecond {
		t.Errorf("decode-1: pool then replica overrides: %+v", d)
	}
	if d := specs[2].Options; d.MaxNumSeqs != 512 || d.StepFixed != o.StepFixed {
		t.Errorf("decode-0: %+v", d)
	}
	if kv := specs[4].Options.KVBytesPerToken; kv != o.Fleet.KVTransferBytesPerToken {
		t.Errorf("decode-2 counts a pulled token as %d bytes, want the fleet's %d", kv, o.Fleet.KVTransferBytesPerToken)
	}
}

// TestFleetConfigErrors: bad fleet configurations are refused with an
// error that names what is wrong and what would do.
func TestFleetConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		why, spec string
		want      []string
	}{
		{"an unknown router lists the policies", "replicas=2,router=random", []string{`unknown router policy "random"`, "round-robin, least-outstanding, session-affinity, prefix-aware"}},
		{"a pool of size 0 serves nothing", "replicas=0", []string{"replicas", "pool of size 0"}},
		{"a prefill pool of size 0 too", "prefill-replicas=0,decode-replicas=2", []string{"prefill-replicas", "pool of size 0"}},
		{"a prefill pool needs a decode pool", "prefill-replicas=2", []string{"needs a decode pool"}},
		{"a decode pool needs a prefill pool", "decode-replicas=2", []string{"needs a prefill pool"}},
		{"aggregated and disaggregated exclude each other", "replicas=2,prefill-replicas=1,decode-replicas=1", []string{"exclude each other"}},
		{"a router needs replicas", "router=prefix-aware", []string{"router needs replicas"}},
		{"KV transfer needs pools", "replicas=2,kv-transfer-latency=1ms", []string{"kv-transfer-latency applies to a disaggregated fleet"}},
		{"a bandwidth needs a unit it knows", "prefill-replicas=1,decode-replicas=1,kv-transfer-bandwidth=fast", []string{"kv-transfer-bandwidth", "25GB/s"}},
		{"a replica out of range is named, with the ones there are", "replicas=4,replica-7.step-fixed=1ms", []string{`"replica-7"`, "replica-0 … replica-3"}},
		{"an aggregated fleet has no pools", "replicas=2,decode.max-num-seqs=4", []string{"no decode pool"}},
		{"block size is fleet-wide", "replicas=2,replica-1.block-size=32", []string{"fleet-wide"}},
		{"a scoped key must be an engine key", "replicas=2,replica-1.router=round-robin", []string{`unknown key "router"`}},
		{"a scoped value is checked", "replicas=2,replica-1.step-fixed=soon", []string{"replica-1.step-fixed=soon", "duration"}},
		{"a scoped value that breaks the replica names it", "replicas=2,replica-1.num-gpu-blocks=8", []string{"replica replica-1", "larger than the KV cache"}},
	} {
		o := DefaultOptions()
		err := ApplyConfig(&o, tc.spec)
		if err == nil {
			t.Errorf("%s: %q accepted", tc.why, tc.spec)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q: error %q lacks %q", tc.why, tc.spec, err, w)
			}
		}
	}
}

func TestParseBandwidth(t *testing.T) {
	for in, want := range map[string]float64{"0": 0, "1000": 1000, "25GB/s": 25e9, "2 GiB/s": 2 << 30, "1.5MB/s": 1.5e6, "3KiB/s": 3072} {
		if got, err := ParseBandwidth(in); err != nil || got != want {
			t.Errorf("ParseBandwidth(%q) = %g, %v; want %g", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1GB/s", "fast", "1 Gb/s", "NaN"} {
		if _, err := ParseBandwidth(in); err == nil {
			t.Errorf("ParseBandwidth(%q) accepted", in)
		}
	}
}

// FuzzApplyConfig: no configuration string panics, and one that is
// accepted describes replicas that all validate and is said again by
// FormatConfig as a string that gives the same options.
func FuzzApplyConfig(f *testing.F) {
	for _, s := range []string{"", "preset=tiny,max-num-seqs=4", "replicas=4,router=prefix-aware",
		"prefill-replicas=2,decode-replicas=3,kv-transfer-bandwidth=25GB/s,decode.max-num-seqs=8,decode-1.preset=tiny",
		"replicas=2,replica-1.step-fixed=3ms", "replicas=3,replica-0.prefix-caching=false,router=session-affinity", "a.b.c=d", "replicas=2,.x=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o := DefaultOptions()
		if err := ApplyConfig(&o, s); err != nil {
			return
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("%q accepted but does not validate: %v", s, err)
		}
		specs, err := o.ReplicaSpecs()
		if err != nil {
			t.Fatalf("%q accepted but its replicas do not resolve: %v", s, err)
		}
		if want := o.Fleet.Replicas + o.Fleet.PrefillReplicas + o.Fleet.DecodeReplicas; len(specs) != want {
			t.Fatalf("%q: %d replicas, want %d", s, len(specs), want)
		}
		for _, sp := range specs {
			if sp.Options.BlockSize != o.BlockSize || sp.Options.MaxModelLen != o.MaxModelLen {
				t.Fatalf("%q: replica %s: %+v", s, sp.Name, sp.Options)
			}
		}
		f := FormatConfig(o)
		back := DefaultOptions()
		if err := ApplyConfig(&back, f); err != nil {
			t.Fatalf("%q is said as %q, which is refused: %v", s, f, err)
		}
		if a, b := configOf(&o), configOf(&back); !equalMaps(a, b) {
			t.Fatalf("%q is said as %q, which gives other options:\n%v\n%v", s, f, a, b)
		}
	})
}

// TestOverridePrecedence: a replica's options are the fleet's, then its
// pool's overrides, then its own, in the order given within each; a
// scoped preset comes first within its scope (as in ApplyConfig) and never
// changes the fleet-wide block size or context length.
func TestOverridePrecedence(t *testing.T) {
	for _, tc := range []struct {
		why, spec string
		// replica → max-num-seqs and step-fixed
		seqs  map[string]int
		fixed map[string]time.Duration
	}{
		{"A replica's own key wins over its pool's, whatever their order in the string.",
			"prefill-replicas=1,decode-replicas=2,decode-1.max-num-seqs=4,decode.max-num-seqs=8",
			map[string]int{"prefill-0": 256, "decode-0": 8, "decode-1": 4}, nil},
		{"A pool's key leaves the other pool alone.",
			"prefill-replicas=2,decode-replicas=1,prefill.step-fixed=9ms",
			map[string]int{"prefill-0": 256, "decode-0": 256}, map[string]time.Duration{"prefill-0": 9 * time.Millisecond, "prefill-1": 9 * time.Millisecond, "decode-0": 6 * time.Millisecond}},
		{"A scoped preset applies before the scope's other keys, which override it.",
			"replicas=2,replica-1.max-num-seqs=3,replica-1.preset=tiny",
			map[string]int{"replica-0": 256, "replica-1": 3}, map[string]time.Duration{"replica-0": 6 * time.Millisecond, "replica-1": time.Millisecond}},
		{"A pool's preset and a replica's key: the replica keeps the preset's other values.",
			"prefill-replicas=1,decode-replicas=2,decode.preset=tiny,decode-0.step-fixed=3ms",
			map[string]int{"prefill-0": 256, "decode-0": 16, "decode-1": 16}, map[string]time.Duration{"decode-0": 3 * time.Millisecond, "decode-1": time.Millisecond}},
	} {
		t.Run(tc.why, func(t *testing.T) {
			o := config(t, tc.spec)
			specs, err := o.ReplicaSpecs()
			if err != nil {
				t.Fatal(err)
			}
			for _, sp := range specs {
				if want, ok := tc.seqs[sp.Name]; ok && sp.Options.MaxNumSeqs != want {
					t.Errorf("%s: max-num-seqs %d, want %d", sp.Name, sp.Options.MaxNumSeqs, want)
				}
				if want, ok := tc.fixed[sp.Name]; ok && sp.Options.StepFixed != want {
					t.Errorf("%s: step-fixed %v, want %v", sp.Name, sp.Options.StepFixed, want)
				}
				if sp.Options.BlockSize != o.BlockSize || sp.Options.MaxModelLen != o.MaxModelLen {
					t.Errorf("%s: block size %d and context %d, want the fleet's %d and %d", sp.Name, sp.Options.BlockSize, sp.Options.MaxModelLen, o.BlockSize, o.MaxModelLen)
				}
			}
		})
	}
}
