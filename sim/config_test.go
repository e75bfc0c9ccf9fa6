package sim

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// configOf is every configuration key's value in o, for comparing two
// options by what a configuration string can set.
func configOf(o *Options) map[string]string {
	m := map[string]string{"preset": o.Preset, "overrides": strings.Join(o.Fleet.Overrides, ";")}
	for k, ck := range configKeys {
		m[k] = ck.get(&o.Options)
	}
	if o.IsFleet() {
		for k, ck := range fleetKeys {
			m[k] = ck.get(o)
		}
	}
	return m
}

// TestFormatConfig: the configuration string of options names what differs
// from the defaults, in a stable order, and applying it to the defaults
// gives the same options back.
func TestFormatConfig(t *testing.T) {
	for _, tc := range []struct {
		why, in, want string
	}{
		{"the defaults need no key", "", ""},
		{"one engine key is said as given", "max-num-seqs=32", "max-num-seqs=32"},
		{"a key set to its default is left out", "max-num-seqs=256,prefix-caching=true", ""},
		{"durations read in us, not µs", "prefill-per-token=30us,step-fixed=6.5ms", "prefill-per-token=30us,step-fixed=6.5ms"},
		{"a preset comes first and its own values are left out", "max-num-seqs=8,preset=tiny", "preset=tiny,max-num-seqs=8"},
		{"a fleet's keys come before the engine's", "max-num-seqs=4,router=prefix-aware,replicas=4", "replicas=4,router=prefix-aware,max-num-seqs=4"},
		{"a disaggregated fleet keeps its link and its overrides in order",
			"prefill-replicas=1,decode-replicas=3,kv-transfer-bandwidth=25GB/s,decode-2.step-fixed=9ms,decode.max-num-seqs=8",
			"decode-replicas=3,kv-transfer-bandwidth=25GB/s,prefill-replicas=1,decode-2.step-fixed=9ms,decode.max-num-seqs=8"},
	} {
		t.Run(tc.why, func(t *testing.T) {
			o := DefaultOptions()
			if err := ApplyConfig(&o, tc.in); err != nil {
				t.Fatal(err)
			}
			got := FormatConfig(o)
			if got != tc.want {
				t.Errorf("FormatConfig after %q = %q, want %q", tc.in, got, tc.want)
			}
			back := DefaultOptions()
			if err := ApplyConfig(&back, got); err != nil {
				t.Fatalf("ApplyConfig(%q): %v", got, err)
			}
			if a, b := configOf(&o), configOf(&back); !equalMaps(a, b) {
				t.Errorf("%q does not give the options back:\n%v\n%v", got, a, b)
			}
		})
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestFormatConfigByHand: options set field by field (not through a
// configuration string) are said by the keys that set those fields.
func TestFormatConfigByHand(t *testing.T) {
	o := DefaultOptions()
	o.MaxNumSeqs, o.DisablePrefixCaching, o.Policy = 32, true, "priority"
	o.Fleet.Replicas, o.Fleet.Router = 2, RouterLeastOutstanding
	o.Fleet.KVTransferLatency = 0 // no pools: not a key of this fleet
	o.PerRequestMetrics, o.Seed = true, 9
	if got, want := FormatConfig(o), "replicas=2,router=least-outstanding,max-num-seqs=32,policy=priority,prefix-caching=false"; got != want {
		t.Errorf("FormatConfig = %q, want %q", got, want)
	}
}

// TestConfigDidYouMean: a misspelt key is answered with the key meant,
// besides the list of keys.
func TestConfigDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"max-num-seq=32", `unknown key "max-num-seq"; did you mean "max-num-seqs"? (keys: preset,`},
		{"replicas=2,rotuer=prefix-aware", `did you mean "router"?`},
		{"replicas=2,replica-1.step-fixd=3ms", `unknown key "step-fixd" in "replica-1.step-fixd"; did you mean "step-fixed"?`},
		{"colour=blue", `unknown key "colour" (keys: preset,`},
	} {
		o := DefaultOptions()
		err := ApplyConfig(&o, tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ApplyConfig(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestFormatBandwidth(t *testing.T) {
	for _, b := range []float64{0, 1, 1000, 1500, 25e9, 2 << 30, 1.5e6, 3072, 123456789.5, 1e18} {
		s := FormatBandwidth(b)
		got, err := ParseBandwidth(s)
		if err != nil || got != b {
			t.Errorf("FormatBandwidth(%g) = %q, read back as %g, %v", b, s, got, err)
		}
	}
	if got := FormatBandwidth(25e9); got != "25GB/s" {
		t.Errorf("FormatBandwidth(25e9) = %q, want 25GB/s", got)
	}
}

// keyValues sets every configuration key to a value other than its
// default, with the keys it needs beside it (a router needs replicas, a
// KV-transfer key a disaggregated fleet).
var keyValues = []struct{ key, value, with string }{
	{"preset", "tiny", ""},
	{"max-num-seqs", "32", ""},
	{"max-num-batched-tokens", "1024", ""},
	{"num-gpu-blocks", "30000", ""},
	{"block-size", "32", ""},
	{"max-model-len", "4096", ""},
	{"max-queued-requests", "100", ""},
	{"stream-interval", "4", ""},
	{"step-fixed", "7ms", ""},
	{"prefill-per-token", "30us", ""},
	{"decode-per-seq", "50us", ""},
	{"attn-per-context-token", "60ns", ""},
	{"prefix-caching", "false", ""},
	{"policy", "priority", ""},
	{"replicas", "3", ""},
	{"router", "prefix-aware", "replicas=2"},
	{"prefill-replicas", "2", "decode-replicas=3"},
	{"decode-replicas", "4", "prefill-replicas=1"},
	{"kv-transfer-latency", "2ms", "prefill-replicas=1,decode-replicas=1"},
	{"kv-transfer-per-token", "5us", "prefill-replicas=1,decode-replicas=1"},
	{"kv-transfer-bytes-per-token", "65536", "prefill-replicas=1,decode-replicas=1"},
	{"kv-transfer-bandwidth", "25GB/s", "prefill-replicas=1,decode-replicas=1"},
}

// TestEveryKeyRoundTrips: for every key ApplyConfig takes, alone and
// scoped to a replica and to a pool where it can be, FormatConfig says
// the value as given (a configuration file by the keys it holds), and
// ApplyConfig of what FormatConfig says gives the same options and
// replicas back (ApplyConfig∘FormatConfig is the identity on what the
// keys set).
func TestEveryKeyRoundTrips(t *testing.T) {
	file := filepath.Join(t.TempDir(), "twin.conf")
	if err := os.WriteFile(file, []byte("# fitted\nstep-fixed=7ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{"config": true}
	// spec → what FormatConfig must say of its last key.
	says := map[string]string{"config=" + file: "step-fixed=7ms"}
	specs := []string{"config=" + file}
	for _, kv := range keyValues {
		covered[kv.key] = true
		spec := kv.key + "=" + kv.value
		if kv.with != "" {
			spec = kv.with + "," + spec
		}
		specs = append(specs, spec)
		if !fleetWide[kv.key] && configKeys[kv.key].set != nil || kv.key == "preset" {
			specs = append(specs, "replicas=2,replica-1."+kv.key+"="+kv.value,
				"prefill-replicas=1,decode-replicas=2,decode."+kv.key+"="+kv.value)
		}
	}
	for _, k := range ConfigKeys() {
		if !covered[k] {
			t.Errorf("key %s has no value in keyValues: add one so that its round trip is checked", k)
		}
	}
	for _, spec := range specs {
		o := DefaultOptions()
		if err := ApplyConfig(&o, spec); err != nil {
			t.Fatalf("ApplyConfig(%q): %v", spec, err)
		}
		got := FormatConfig(o)
		last, ok := says[spec]
		if !ok {
			last = spec[strings.LastIndex(spec, ",")+1:]
		}
		if !strings.Contains(","+got+",", ","+last+",") {
			t.Errorf("FormatConfig after %q = %q: no %q", spec, got, last)
		}
		back := DefaultOptions()
		if err := ApplyConfig(&back, got); err != nil {
			t.Fatalf("ApplyConfig(FormatConfig) = ApplyConfig(%q): %v", got, err)
		}
		if a, b := configOf(&o), configOf(&back); !equalMaps(a, b) {
			t.Errorf("%q → %q does not give the options back:\n%v\n%v", spec, got, a, b)
		}
		sa, errA := o.ReplicaSpecs()
		sb, errB := back.ReplicaSpecs()
		if errA != nil || errB != nil || !reflect.DeepEqual(sa, sb) {
			t.Errorf("%q → %q: replicas differ (%v, %v)", spec, got, errA, errB)
		}
		if again := FormatConfig(back); again != got {
			t.Errorf("FormatConfig is not stable: %q, then %q", got, again)
		}
	}
}

// TestConfigFile: config=FILE applies a configuration file's keys (its
// comments aside), the string's own keys override them and the options
// remember the file; a file with an unknown key, a malformed line or a
// key given twice is refused naming the file, the line and the key.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	twin := filepath.Join(dir, "twin.conf")
	if err := os.WriteFile(twin, []byte("# a fitted twin\nstep-fixed=7ms\n\nmax-num-seqs = 48\n# report\n#   step-fixed: fitted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	if err := ApplyConfig(&o, "config="+twin+",replicas=4,router=prefix-aware,max-num-seqs=64"); err != nil {
		t.Fatal(err)
	}
	if o.StepFixed != 7*time.Millisecond || o.MaxNumSeqs != 64 || o.Fleet.Replicas != 4 || o.Fleet.Router != RouterPrefixAware || o.ConfigFile != twin {
		t.Errorf("got step-fixed %v, max-num-seqs %d, replicas %d, router %s, file %q", o.StepFixed, o.MaxNumSeqs, o.Fleet.Replicas, o.Fleet.Router, o.ConfigFile)
	}
	if got := FormatConfig(o); !strings.Contains(got, "step-fixed=7ms") || strings.Contains(got, "config=") {
		t.Errorf("FormatConfig = %q: want the file's keys, not the file", got)
	}
	for _, c := range []struct{ body, want string }{
		{"step-fixed=7ms\nmax-num-seq=48\n", `twin.conf:2: unknown key "max-num-seq"; did you mean "max-num-seqs"?`},
		{"step-fixed 7ms\n", `twin.conf:1: "step-fixed 7ms" is not KEY=VALUE`},
		{"step-fixed=7ms\nstep-fixed=8ms\n", "twin.conf:2: step-fixed is given twice (line 1 too)"},
		{"config=other.conf\n", "twin.conf:1: a configuration file cannot include another"},
		{"decode.bogus=1\n", `twin.conf:1: unknown key "decode.bogus"`},
	} {
		if err := os.WriteFile(twin, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		o := DefaultOptions()
		err := ApplyConfig(&o, "config="+twin)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.body, err, c.want)
		}
	}
	o = DefaultOptions()
	if err := ApplyConfig(&o, "config="+filepath.Join(dir, "missing.conf")); err == nil || !strings.Contains(err.Error(), "missing.conf") {
		t.Errorf("a missing file: %v", err)
	}
}
