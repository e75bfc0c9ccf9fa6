package sim

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/internal/fserr"
	"github.com/tokentrace/tokentrace/internal/suggest"
	"github.com/tokentrace/tokentrace/sim/engine"
)

// configKey is one key of a configuration string: how its value sets the
// options O (an engine's, or the simulator's for a fleet key), and the
// options' value as that key would give it (FormatConfig).
type configKey[O any] struct {
	set func(o *O, v string) error
	get func(o *O) string
}

// configKeys maps the engine keys of a configuration string (ApplyConfig)
// to the engine option they set; a scope sets them per pool or replica.
// The names are vLLM's server flags where one exists, so "max-num-seqs=64"
// reads as it would on a vllm serve line.
var configKeys = map[string]configKey[engine.Options]{
	"max-num-seqs":           intKey(func(o *engine.Options) *int { return &o.MaxNumSeqs }),
	"max-num-batched-tokens": intKey(func(o *engine.Options) *int { return &o.MaxNumBatchedTokens }),
	"num-gpu-blocks":         intKey(func(o *engine.Options) *int { return &o.NumGPUBlocks }),
	"block-size":             intKey(func(o *engine.Options) *int { return &o.BlockSize }),
	"max-model-len":          intKey(func(o *engine.Options) *int { return &o.MaxModelLen }),
	"max-queued-requests":    intKey(func(o *engine.Options) *int { return &o.MaxQueuedRequests }),
	"stream-interval":        intKey(func(o *engine.Options) *int { return &o.StreamInterval }),
	"step-fixed":             durKey(func(o *engine.Options) *time.Duration { return &o.StepFixed }),
	"prefill-per-token":      durKey(func(o *engine.Options) *time.Duration { return &o.PrefillPerToken }),
	"decode-per-seq":         durKey(func(o *engine.Options) *time.Duration { return &o.DecodePerSeq }),
	"attn-per-context-token": durKey(func(o *engine.Options) *time.Duration { return &o.AttnPerContextToken }),
	"prefix-caching": {
		set: func(o *engine.Options, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("want true or false, got %q", v)
			}
			o.DisablePrefixCaching = !b
			return nil
		},
		get: func(o *engine.Options) string { return strconv.FormatBool(!o.DisablePrefixCaching) },
	},
	"policy": {
		set: func(o *engine.Options, v string) error {
			if v != "fcfs" && v != "priority" {
				return fmt.Errorf("want fcfs or priority, got %q", v)
			}
			o.Policy = v
			return nil
		},
		get: func(o *engine.Options) string { return o.Policy },
	},
}

func intKey[O any](f func(*O) *int) configKey[O] {
	return configKey[O]{
		set: func(o *O, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("want a whole number >= 0, got %q", v)
			}
			*f(o) = n
			return nil
		},
		get: func(o *O) string { return strconv.Itoa(*f(o)) },
	}
}

func durKey[O any](f func(*O) *time.Duration) configKey[O] {
	return configKey[O]{
		set: func(o *O, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("want a duration such as 40us or 6ms, got %q", v)
			}
			*f(o) = d
			return nil
		},
		// "us" rather than Go's "µs": a value a shell and a keyboard take.
		get: func(o *O) string { return strings.Replace(f(o).String(), "µs", "us", 1) },
	}
}

// ConfigKeys lists the keys ApplyConfig takes, sorted ("preset" first):
// config (a configuration file's keys), the engine's and the fleet's. An engine key can also be scoped to a pool
// or a replica of a fleet: "SCOPE.KEY" (see Fleet.Overrides).
func ConfigKeys() []string {
	keys := []string{"preset", "config"}
	for k := range configKeys {
		keys = append(keys, k)
	}
	for k := range fleetKeys {
		keys = append(keys, k)
	}
	slices.Sort(keys[1:])
	return keys
}

// ApplyConfig sets the options a configuration string names, such as
// "preset=tiny,max-num-seqs=64,prefix-caching=false": comma-separated
// key=value pairs (ConfigKeys). A preset is applied first wherever it
// stands, so the other keys override it. The empty string changes nothing.
// The result is validated.
//
// config=FILE reads the keys of a configuration file (ReadConfigFile: a
// twin that tokentrace sim fit wrote, say) as if they stood first; the
// string's other keys override the file's, so "config=twin.conf,
// replicas=4,router=prefix-aware" is the twin four times behind a
// prefix-aware router.
//
// Fleet keys make the options a fleet: "replicas=4,router=prefix-aware",
// or "prefill-replicas=2,decode-replicas=6,kv-transfer-latency=2ms,
// kv-transfer-per-token=5us,kv-transfer-bandwidth=25GB/s"; a key with a
// scope configures one pool or replica ("decode.max-num-seqs=512",
// "replica-3.step-fixed=24ms"; see Fleet.Overrides).
func ApplyConfig(o *Options, s string) error {
	if strings.TrimSpace(s) == "" {
		return o.Validate()
	}
	var kvs [][2]string
	seen := map[string]bool{}
	pairs, err := configPairs(o, s)
	if err != nil {
		return err
	}
	for _, kv := range pairs {
		k, v := kv[0], kv[1]
		seen[k] = true
		if scope, key, scoped := strings.Cut(k, "."); scoped {
			if _, known := configKeys[key]; (!known && key != "preset") || scope == "" {
				return fmt.Errorf("simulator configuration %q: unknown key %q in %q%s (a scoped key is SCOPE.KEY with an engine key: %s)", s, key, k, didYouMean(key, scopedKeys()), strings.Join(scopedKeys(), ", "))
			}
			if fleetWide[key] {
				return fmt.Errorf("simulator configuration %q: %s: %s is fleet-wide (one model, one block size and context length); set it without a scope", s, k, key)
			}
			o.Fleet.Overrides = append(o.Fleet.Overrides, k+"="+v)
			continue
		}
		_, engineKey := configKeys[k]
		if _, fleetKey := fleetKeys[k]; !engineKey && !fleetKey && k != "preset" {
			return fmt.Errorf("simulator configuration %q: unknown key %q%s (keys: %s)", s, k, didYouMean(k, ConfigKeys()), strings.Join(ConfigKeys(), ", "))
		}
		if k == "preset" {
			if err := engine.ApplyPreset(&o.Options, v); err != nil {
				return fmt.Errorf("simulator configuration %q: %w", s, err)
			}
			continue
		}
		kvs = append(kvs, [2]string{k, v})
	}
	for _, kv := range kvs {
		var err error
		if key, ok := configKeys[kv[0]]; ok {
			err = key.set(&o.Options, kv[1])
		} else {
			err = fleetKeys[kv[0]].set(o, kv[1])
		}
		if err != nil {
			return fmt.Errorf("simulator configuration %q: %s: %w", s, kv[0], err)
		}
	}
	if err := checkFleetKeys(o, seen); err != nil {
		return fmt.Errorf("simulator configuration %q: %w", s, err)
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("simulator configuration %q: %w", s, err)
	}
	return nil
}

// configPairs splits a configuration string into its key=value pairs, a
// preset first. A config=FILE pair is replaced by the file's pairs
// (ReadConfigFile), which the string's own keys override, and o
// remembers the file (Options.ConfigFile).
func configPairs(o *Options, s string) ([][2]string, error) {
	var own [][2]string
	file := ""
	given := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("simulator configuration %q: %q is not key=value (keys: %s)", s, part, strings.Join(ConfigKeys(), ", "))
		}
		if piece, spaced := spacedValue(k, v); spaced {
			return nil, fmt.Errorf("simulator configuration %q: %q has a space where a comma goes: keys are separated by commas, no spaces (write %q)", s, piece, commaSeparated(s))
		}
		if given[k] {
			return nil, fmt.Errorf("simulator configuration %q: %s is given twice", s, k)
		}
		given[k] = true
		if k == "config" {
			file = v
			continue
		}
		own = append(own, [2]string{k, v})
	}
	var pairs [][2]string
	if file != "" {
		fromFile, err := ReadConfigFile(file)
		if err != nil {
			return nil, err // it names the file (and its line), the configuration's one key
		}
		for _, kv := range fromFile {
			if !given[kv[0]] {
				pairs = append(pairs, kv)
			}
		}
		o.ConfigFile = file
	}
	pairs = append(pairs, own...)
	// A preset first wherever it stands, so the other keys override it.
	slices.SortStableFunc(pairs, func(a, b [2]string) int {
		return cmpBool(b[0] == "preset", a[0] == "preset")
	})
	return pairs, nil
}

// spacedValue reports a value that holds a space, as when pairs are
// separated by spaces instead of commas ("replicas=4 router=prefix-aware"
// reads as replicas "4 router=prefix-aware"), with the piece after the
// space. A file's name may hold spaces: config's value is spaced only
// when another pair follows the space.
func spacedValue(k, v string) (string, bool) {
	fs := strings.Fields(v)
	if len(fs) < 2 {
		return "", false
	}
	if k == "config" && !strings.Contains(strings.Join(fs[1:], " "), "=") {
		return "", false
	}
	return k + "=" + v, true
}

// commaSeparated is s with its pairs separated by commas alone.
func commaSeparated(s string) string {
	var parts []string
	for _, part := range strings.Split(s, ",") {
		parts = append(parts, strings.Fields(part)...)
	}
	return strings.Join(parts, ",")
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// ReadConfigFile reads a simulator configuration file (what config=FILE
// names, and what tokentrace sim fit writes): one KEY=VALUE a line, with
// the keys ApplyConfig takes, blank lines and lines starting with # (a
// fitted twin's report) aside. A key it does not know, or one given
// twice, is an error naming the file, the line and the key.
func ReadConfigFile(name string) ([][2]string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fserr.Wrap("read configuration file", name, err)
	}
	var pairs [][2]string
	seen := map[string]int{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		at := fmt.Sprintf("%s:%d", name, i+1)
		switch {
		case !ok || k == "" || v == "":
			return nil, fmt.Errorf("%s: %q is not KEY=VALUE", at, line)
		case k == "config":
			return nil, fmt.Errorf("%s: a configuration file cannot include another (config=%s)", at, v)
		case seen[k] > 0:
			return nil, fmt.Errorf("%s: %s is given twice (line %d too)", at, k, seen[k])
		case !knownKey(k):
			return nil, fmt.Errorf("%s: unknown key %q%s (keys: %s; SCOPE.KEY for a pool or replica)", at, k, didYouMean(k, ConfigKeys()), strings.Join(ConfigKeys(), ", "))
		}
		seen[k] = i + 1
		pairs = append(pairs, [2]string{k, v})
	}
	return pairs, nil
}

// knownKey reports whether k is a configuration key, or an engine key
// with a scope.
func knownKey(k string) bool {
	if _, scoped, ok := strings.Cut(k, "."); ok {
		_, known := configKeys[scoped]
		return known || scoped == "preset"
	}
	_, engineKey := configKeys[k]
	_, fleetKey := fleetKeys[k]
	return engineKey || fleetKey || k == "preset"
}

// didYouMean is "; did you mean KEY?" for the known key nearest a
// mistyped one ("" when none is near).
func didYouMean(k string, keys []string) string {
	if near := suggest.Nearest(k, keys); near != "" {
		return fmt.Sprintf("; did you mean %q?", near)
	}
	return ""
}

// FormatConfig is the configuration string that ApplyConfig turns
// DefaultOptions into o's configuration: o's preset when it is not
// DefaultPreset, then every key whose value differs from that preset's:
// the fleet's (sorted) when o is a fleet, the engine's (sorted), and the
// fleet's overrides as given.
// Options outside the keys (the model, the listen address, faults) are not
// in it. "" for the defaults. Results record it, so that a run says which
// simulator it ran against in the form a target takes ("sim:" + it).
func FormatConfig(o Options) string {
	base := DefaultOptions()
	var parts []string
	if o.Preset != base.Preset && ApplyPreset(&base, o.Preset) == nil {
		parts = append(parts, "preset="+o.Preset)
	}
	parts = appendChanged(parts, fleetKeys, &o, &base, func(k string) bool {
		// Refused without the replicas they apply to.
		return k == "router" && !o.IsFleet() || strings.HasPrefix(k, "kv-transfer-") && !o.Disaggregated()
	})
	parts = appendChanged(parts, configKeys, &o.Options, &base.Options, func(string) bool { return false })
	parts = append(parts, o.Fleet.Overrides...)
	return strings.Join(parts, ",")
}

// appendChanged appends "KEY=VALUE" for every key of keys (sorted, skip
// aside) whose value in o differs from base's.
func appendChanged[O any](parts []string, keys map[string]configKey[O], o, base *O, skip func(k string) bool) []string {
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if skip(k) {
			continue
		}
		if v := keys[k].get(o); v != keys[k].get(base) {
			parts = append(parts, k+"="+v)
		}
	}
	return parts
}
