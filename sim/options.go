package sim

import "github.com/tokentrace/tokentrace/sim/engine"

// DefaultListen is the address Start serves on by default: any free
// loopback port.
const DefaultListen = "127.0.0.1:0"

// Options configures the simulator: the engine's options (every replica's,
// before Fleet.Overrides), where Start serves, and a fleet. Start from
// DefaultOptions: a field's zero is a value of its own, never its default
// (a preset is a named set of values applied onto them, ApplyPreset).
type Options struct {
	engine.Options
	// Listen is the TCP address Start serves on. Defaults to
	// "127.0.0.1:0" (any free port).
	Listen string
	// Fleet, when it has replicas, makes these options a fleet: replicas
	// (each configured by these options and Fleet.Overrides) behind a
	// router. Defaults to no replicas, with DefaultRouter and the
	// DefaultKVTransfer* values.
	Fleet Fleet
	// ConfigFile is the configuration file ApplyConfig read the keys of
	// (config=FILE); informational once applied: a command running a
	// fitted twin says how its last check went. Defaults to "".
	ConfigFile string
}

// Request is a request arriving at an offline simulation (Simulate).
type Request = engine.Arrival

// DefaultModel is the served model name; DefaultPreset the step-time and
// capacity preset applied by DefaultOptions.
const (
	DefaultModel  = engine.DefaultModel
	DefaultPreset = engine.DefaultPreset
)

// DefaultOptions returns the documented defaults (preset DefaultPreset, no
// fleet).
func DefaultOptions() Options {
	return Options{
		Options: engine.DefaultOptions(),
		Listen:  DefaultListen,
		Fleet: Fleet{
			Router:                  DefaultRouter,
			KVTransferLatency:       DefaultKVTransferLatency,
			KVTransferPerToken:      DefaultKVTransferPerToken,
			KVTransferBytesPerToken: DefaultKVTransferBytesPerToken,
		},
	}
}

// Validate checks the engine's options, then the fleet's shape and every
// replica's options.
func (o *Options) Validate() error {
	if err := o.Options.Validate(); err != nil {
		return err
	}
	return o.validateFleet()
}

// ApplyPreset overwrites o's capacity and step-time fields with the named
// preset's (engine.Presets).
func ApplyPreset(o *Options, name string) error { return engine.ApplyPreset(&o.Options, name) }

// PresetNames lists the names of the presets (engine.Presets).
func PresetNames() []string { return engine.PresetNames() }

// PresetModel is the model name a standalone simulator serves for a
// preset when none is given: DefaultModel for DefaultPreset, else
// "sim-PRESET", so that results say which deployment they came from.
func PresetModel(preset string) string { return engine.PresetModel(preset) }
