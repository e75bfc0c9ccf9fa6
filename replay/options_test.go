package replay

import (
	"errors"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// DefaultOptions is the one place replay's defaults live, valid once URL
// is set; a zero a caller sets stays a zero: Validate refuses the zeros
// replay cannot use, naming the option, and keeps those that mean
// something (no drain, no clock probes, no cap).
func TestDefaultOptionsAndZeros(t *testing.T) {
	d := DefaultOptions()
	d.URL = "http://127.0.0.1:1"
	if err := d.Validate(); err != nil {
		t.Fatalf("the defaults with a URL: %v", err)
	}
	for option, zero := range map[string]func(*Options){
		"Options.Speed":                          func(o *Options) { o.Speed = 0 },
		"Options.Timeout":                        func(o *Options) { o.Timeout = 0 },
		"Options.BlockSize":                      func(o *Options) { o.BlockSize = 0 },
		"Options.JournalSync":                    func(o *Options) { o.JournalSync = 0 },
		"Options.Run":                            func(o *Options) { o.Run = "" },
		"Options.API":                            func(o *Options) { o.API = "" },
		"Options.Sessions":                       func(o *Options) { o.Sessions = "" },
		"Options.ShardIndex, Options.ShardCount": func(o *Options) { o.ShardCount = 0 },
	} {
		o := d
		zero(&o)
		var oe *traces.OptionError
		if err := o.Validate(); !errors.As(err, &oe) || oe.Option != option {
			t.Errorf("%s = 0: error %v, want an option error naming it", option, err)
		}
	}
	for name, zero := range map[string]func(*Options){
		"Drain":          func(o *Options) { o.Drain = 0 },
		"ClockProbes":    func(o *Options) { o.ClockProbes = 0 },
		"MaxConcurrency": func(o *Options) { o.MaxConcurrency = 0 },
		"TraceClass":     func(o *Options) { o.TraceClass = "" },
	} {
		o := d
		zero(&o)
		if err := o.Validate(); err != nil {
			t.Errorf("%s = 0 means something: %v", name, err)
		}
	}
}
