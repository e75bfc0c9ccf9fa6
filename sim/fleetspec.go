package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/sim/engine"
	"github.com/tokentrace/tokentrace/traces"
)

// Replica roles, the values of the role label on a fleet's /metrics:
// llm-d's llm-d.ai/role values (pkg/plugins/filter/pd_role.go in
// llm-d-inference-scheduler).
const (
	RolePrefillDecode = "prefill-decode" // an aggregated replica: prefills and decodes
	RolePrefill       = "prefill"
	RoleDecode        = "decode"
)

// MaxReplicas bounds a fleet's size (every replica is an engine with its
// own KV cache in memory).
const MaxReplicas = 10000

// Defaults of a fleet's options.
const (
	DefaultRouter = RouterRoundRobin
	// DefaultKVTransferLatency and DefaultKVTransferPerToken: a NIXL pull
	// over a 400 Gb/s RDMA NIC, ~43 GB/s achieved, of 128 KiB of KV per
	// token (Llama-3-8B: 32 layers · 8 KV heads · 128 dims · 2 · 2 B) is
	// ~3 µs a token, after ~1 ms of handshake, notification and scheduling.
	DefaultKVTransferLatency       = time.Millisecond
	DefaultKVTransferPerToken      = 3 * time.Microsecond
	DefaultKVTransferBytesPerToken = 128 << 10
)

// Fleet makes Options describe replicas behind a router instead of one
// engine: either Replicas aggregated replicas, or a prefill pool and a
// decode pool (prefill/decode disaggregation) whose KV caches move from
// one to the other. Start and Simulate run it. The zero value is no fleet.
type Fleet struct {
	// Replicas is the number of aggregated replicas (each prefills and
	// decodes; named replica-0, replica-1, ...). Defaults to 0: no fleet.
	Replicas int
	// Router is the routing policy, one of Routers. Defaults to
	// "round-robin".
	Router string
	// PrefillReplicas and DecodeReplicas size the pools of a disaggregated
	// fleet (named prefill-0, ..., decode-0, ...); both or neither.
	// Default to 0.
	PrefillReplicas, DecodeReplicas int
	// KVTransferLatency is the fixed cost of one KV pull from a prefill to
	// a decode replica, KVTransferPerToken its cost per token on an idle
	// link. Default to 1ms and 3µs.
	KVTransferLatency, KVTransferPerToken time.Duration
	// KVTransferBandwidth caps the bytes per second of all concurrent
	// pulls together (they share it equally); 0 = no cap beyond each
	// pull's own per-token rate. Defaults to 0.
	KVTransferBandwidth float64
	// KVTransferBytesPerToken is the KV cache size of one token, which
	// turns tokens into bytes for the bandwidth cap and the
	// vllm:nixl_bytes_transferred histogram. Defaults to 131072 (128 KiB).
	KVTransferBytesPerToken int
	// Overrides configure pools and single replicas: "SCOPE.KEY=VALUE"
	// with a configuration key (ConfigKeys) and a scope: a pool ("prefill",
	// "decode") or a replica ("replica-3", "decode-0"), e.g.
	// "replica-3.step-fixed=24ms" for one slow replica. Applied over the
	// fleet-wide options, pools before replicas, in order. Block size and
	// context length stay fleet-wide (one model). Defaults to none.
	Overrides []string
}

// IsFleet reports whether o describes a fleet.
func (o *Options) IsFleet() bool {
	return o.Fleet.Replicas > 0 || o.Fleet.PrefillReplicas > 0 || o.Fleet.DecodeReplicas > 0
}

// Disaggregated reports whether o describes a prefill pool and a decode
// pool.
func (o *Options) Disaggregated() bool {
	return o.Fleet.PrefillReplicas > 0 || o.Fleet.DecodeReplicas > 0
}

// fleetSize says how many replicas o has, for messages.
func (o *Options) fleetSize() string {
	if o.Disaggregated() {
		return fmt.Sprintf("%d prefill and %d decode replicas", o.Fleet.PrefillReplicas, o.Fleet.DecodeReplicas)
	}
	return fmt.Sprintf("%d replicas", o.Fleet.Replicas)
}

// ReplicaSpec is one replica of a fleet: its name (the pod label and the
// replica column), role and engine options.
type ReplicaSpec struct {
	Name string
	Role string
	// Pool is the pool a scope can name ("prefill", "decode"), "" for an
	// aggregated replica.
	Pool    string
	Options engine.Options
}

// ReplicaSpecs resolves the fleet o describes into its replicas, pools
// then replica overrides applied (nil when o is not a fleet). Every
// replica's options are validated.
func (o Options) ReplicaSpecs() ([]ReplicaSpec, error) {
	if !o.IsFleet() {
		return nil, nil
	}
	if err := o.validateFleetShape(); err != nil {
		return nil, err
	}
	base := o.engineOptions()
	base.TruthOut = ""
	var specs []ReplicaSpec
	add := func(prefix, role, pool string, n int) {
		for i := range n {
			specs = append(specs, ReplicaSpec{Name: prefix + "-" + strconv.Itoa(i), Role: role, Pool: pool, Options: base})
		}
	}
	if o.Disaggregated() {
		add("prefill", RolePrefill, "prefill", o.Fleet.PrefillReplicas)
		add("decode", RoleDecode, "decode", o.Fleet.DecodeReplicas)
	} else {
		add("replica", RolePrefillDecode, "", o.Fleet.Replicas)
	}
	type override struct{ scope, key, value, text string }
	var pools, singles []override
	for _, ov := range o.Fleet.Overrides {
		kv, v, ok := strings.Cut(ov, "=")
		scope, k, ok2 := strings.Cut(kv, ".")
		if !ok || !ok2 || scope == "" || k == "" || v == "" {
			return nil, traces.OptionErrorf("sim", "Options.Fleet.Overrides", "%q is not SCOPE.KEY=VALUE", ov)
		}
		x := override{scope, k, v, ov}
		switch {
		case scope == "prefill" || scope == "decode":
			if !o.Disaggregated() {
				return nil, fmt.Errorf("sim: fleet override %q: the fleet has no %s pool (%s); scopes: %s", ov, scope, o.fleetSize(), scopeList(specs, false))
			}
			pools = append(pools, x)
		case slices.IndexFunc(specs, func(s ReplicaSpec) bool { return s.Name == scope }) >= 0:
			singles = append(singles, x)
		default:
			return nil, fmt.Errorf("sim: fleet override %q: no replica or pool %q; scopes: %s", ov, scope, scopeList(specs, o.Disaggregated()))
		}
	}
	var errs []error
	for i := range specs {
		sp := &specs[i]
		var mine []override
		for _, x := range pools {
			if x.scope == sp.Pool {
				mine = append(mine, x)
			}
		}
		for _, x := range singles {
			if x.scope == sp.Name {
				mine = append(mine, x)
			}
		}
		// A preset first, as in ApplyConfig; block size and context
		// length stay the fleet's.
		for _, x := range mine {
			if x.key == "preset" {
				if err := engine.ApplyPreset(&sp.Options, x.value); err != nil {
					errs = append(errs, fmt.Errorf("sim: fleet override %q: %w", x.text, err))
				}
				sp.Options.BlockSize, sp.Options.MaxModelLen = base.BlockSize, base.MaxModelLen
			}
		}
		for _, x := range mine {
			if x.key == "preset" {
				continue
			}
			key, ok := configKeys[x.key]
			_, isFleetKey := fleetKeys[x.key]
			if !ok || fleetWide[x.key] {
				why := "unknown key"
				if ok || isFleetKey {
					why = "not settable per replica or pool"
				}
				errs = append(errs, fmt.Errorf("sim: fleet override %q: %s %q (per replica or pool: %s)", x.text, why, x.key, strings.Join(scopedKeys(), ", ")))
				continue
			}
			if err := key.set(&sp.Options, x.value); err != nil {
				errs = append(errs, fmt.Errorf("sim: fleet override %q: %w", x.text, err))
			}
		}
		if err := sp.Options.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("sim: replica %s: %w", sp.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return specs, nil
}

func scopeList(specs []ReplicaSpec, pools bool) string {
	var s []string
	if pools {
		s = append(s, "prefill", "decode")
	}
	if n := len(specs); n > 0 {
		if n <= 3 {
			for _, sp := range specs {
				s = append(s, sp.Name)
			}
		} else {
			s = append(s, specs[0].Name+" … "+specs[n-1].Name)
		}
	}
	return strings.Join(s, ", ")
}

// engineOptions are the engine's options o gives every replica before
// overrides: the fleet's KV size of a token included, for the pulls'
// bytes.
func (o *Options) engineOptions() engine.Options {
	e := o.Options
	e.KVBytesPerToken = o.Fleet.KVTransferBytesPerToken
	return e
}

// validateFleetShape checks the fleet's sizes, router and KV transfer.
func (o *Options) validateFleetShape() error {
	f := &o.Fleet
	var errs []error
	if n := []int{f.Replicas, f.PrefillReplicas, f.DecodeReplicas}; slices.Min(n) < 0 || slices.Max(n) > MaxReplicas || n[0]+n[1]+n[2] > MaxReplicas {
		errs = append(errs, traces.OptionErrorf("sim", "Options.Fleet", "replica counts must be within 0..%d in all (replicas %d, prefill-replicas %d, decode-replicas %d)",
			MaxReplicas, f.Replicas, f.PrefillReplicas, f.DecodeReplicas))
	}
	switch {
	case f.Replicas > 0 && o.Disaggregated():
		errs = append(errs, traces.OptionErrorf("sim", "Options.Fleet", "replicas (%d aggregated) and prefill-replicas/decode-replicas (a disaggregated fleet) exclude each other", f.Replicas))
	case f.PrefillReplicas > 0 && f.DecodeReplicas == 0:
		errs = append(errs, traces.OptionErrorf("sim", "Options.Fleet", "prefill-replicas %d needs a decode pool (decode-replicas): a pool of size 0 serves nothing", f.PrefillReplicas))
	case f.DecodeReplicas > 0 && f.PrefillReplicas == 0:
		errs = append(errs, traces.OptionErrorf("sim", "Options.Fleet", "decode-replicas %d needs a prefill pool (prefill-replicas): a pool of size 0 serves nothing", f.DecodeReplicas))
	}
	if !slices.Contains(Routers, f.Router) {
		errs = append(errs, traces.OptionErrorf("sim", "Options.Fleet.Router", "%q isn't one of [%s]", f.Router, strings.Join(Routers, ", ")))
	}
	if f.KVTransferLatency < 0 || f.KVTransferPerToken < 0 {
		errs = append(errs, traces.OptionErrorf("sim", "Options.Fleet", "kv-transfer-latency %v and kv-transfer-per-token %v must not be negative", f.KVTransferLatency, f.KVTransferPerToken))
	}
	if f.KVTransferBandwidth < 0 || math.IsNaN(f.KVTransferBandwidth) || math.IsInf(f.KVTransferBandwidth, 0) {
		errs = append(errs, traces.OptionErrorf("sim", "Options.Fleet.KVTransferBandwidth", "must be a finite number of bytes/s >= 0 (0 = no cap), got %g", f.KVTransferBandwidth))
	}
	if o.Disaggregated() && f.KVTransferBytesPerToken <= 0 {
		errs = append(errs, traces.OptionErrorf("sim", "Options.Fleet.KVTransferBytesPerToken", "must be positive, got %d", f.KVTransferBytesPerToken))
	}
	return errors.Join(errs...)
}

// validateFleet checks a fleet's shape and every replica's options.
func (o *Options) validateFleet() error {
	if !o.IsFleet() {
		return nil
	}
	_, err := o.ReplicaSpecs()
	return err
}

// fleetKeys are the configuration keys (ApplyConfig) that shape a fleet.
// Keys given explicitly are checked together after all are applied
// (checkFleetKeys).
var fleetKeys = map[string]configKey[Options]{
	"replicas":                    poolKey(func(o *Options) *int { return &o.Fleet.Replicas }),
	"prefill-replicas":            poolKey(func(o *Options) *int { return &o.Fleet.PrefillReplicas }),
	"decode-replicas":             poolKey(func(o *Options) *int { return &o.Fleet.DecodeReplicas }),
	"kv-transfer-latency":         durKey(func(o *Options) *time.Duration { return &o.Fleet.KVTransferLatency }),
	"kv-transfer-per-token":       durKey(func(o *Options) *time.Duration { return &o.Fleet.KVTransferPerToken }),
	"kv-transfer-bytes-per-token": intKey(func(o *Options) *int { return &o.Fleet.KVTransferBytesPerToken }),
	"kv-transfer-bandwidth": {
		set: func(o *Options, v string) error {
			b, err := ParseBandwidth(v)
			if err != nil {
				return err
			}
			o.Fleet.KVTransferBandwidth = b
			return nil
		},
		get: func(o *Options) string { return FormatBandwidth(o.Fleet.KVTransferBandwidth) },
	},
	"router": {
		set: func(o *Options, v string) error {
			if !slices.Contains(Routers, v) {
				return fmt.Errorf("unknown router policy %q (policies: %s)", v, strings.Join(Routers, ", "))
			}
			o.Fleet.Router = v
			return nil
		},
		get: func(o *Options) string { return o.Fleet.Router },
	},
}

// fleetWide are engine keys a scope cannot set: one model serves the
// fleet, with one block size and context length.
var fleetWide = map[string]bool{"block-size": true, "max-model-len": true}

func poolKey(f func(*Options) *int) configKey[Options] {
	return configKey[Options]{
		set: func(o *Options, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxReplicas {
				return fmt.Errorf("want a whole number of replicas from 1 to %d (a pool of size 0 serves nothing), got %q", MaxReplicas, v)
			}
			*f(o) = n
			return nil
		},
		get: func(o *Options) string { return strconv.Itoa(*f(o)) },
	}
}

// scopedKeys lists the keys a scope can set.
func scopedKeys() []string {
	keys := []string{"preset"}
	for k := range configKeys {
		if !fleetWide[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys[1:])
	return keys
}

// checkFleetKeys checks the fleet keys given together in one
// configuration: a router or a KV-transfer key means nothing without the
// replicas it applies to.
func checkFleetKeys(o *Options, given map[string]bool) error {
	switch {
	case given["router"] && !o.IsFleet():
		return errors.New("router needs replicas (or prefill-replicas and decode-replicas)")
	}
	for k := range given {
		if strings.HasPrefix(k, "kv-transfer-") && !o.Disaggregated() {
			return fmt.Errorf("%s applies to a disaggregated fleet: set prefill-replicas and decode-replicas", k)
		}
	}
	return nil
}

// ParseBandwidth parses a rate in bytes per second: a number of bytes/s,
// or with a unit B/s, kB/s, MB/s, GB/s, TB/s (powers of 1000) or KiB/s,
// MiB/s, GiB/s, TiB/s (powers of 1024), e.g. "25GB/s"; 0 means no cap.
func ParseBandwidth(v string) (float64, error) {
	s := strings.TrimSpace(v)
	mult := 1.0
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB/s", 1 << 10}, {"MiB/s", 1 << 20}, {"GiB/s", 1 << 30}, {"TiB/s", 1 << 40},
		{"kB/s", 1e3}, {"KB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9}, {"TB/s", 1e12}, {"B/s", 1}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("want a rate in bytes/s such as 25GB/s or 3GiB/s (0 = no cap), got %q", v)
	}
	return f * mult, nil
}

// FormatBandwidth says a rate in bytes per second as ParseBandwidth reads
// it back exactly: in the largest unit that holds it as a whole number
// ("25GB/s", "3GiB/s"), else in bytes/s; "0" for no cap.
func FormatBandwidth(b float64) string {
	if b == 0 {
		return "0"
	}
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"TB/s", 1e12}, {"TiB/s", 1 << 40}, {"GB/s", 1e9}, {"GiB/s", 1 << 30}, {"MB/s", 1e6}, {"MiB/s", 1 << 20}, {"kB/s", 1e3}, {"KiB/s", 1 << 10}} {
		if v := b / u.mult; v >= 1 && v == math.Trunc(v) && v*u.mult == b {
			return strconv.FormatFloat(v, 'f', -1, 64) + u.suffix
		}
	}
	return strconv.FormatFloat(b, 'f', -1, 64)
}
