package validate

import (
	"reflect"
	"testing"

	"github.com/tokentrace/tokentrace/replay"
)

// Every replay default reaches the replays validate runs: from
// DefaultOptions, each run's replay options are replay.DefaultOptions() but for
// what the run sets itself (its name and speed), so a default given on
// replay's side only, or on validate's only, fails here.
func TestReplayDefaultsReachRuns(t *testing.T) {
	o := DefaultOptions()
	got := o.runOptions("real-a")
	want := replay.DefaultOptions()
	want.Run, want.Speed = "real-a", o.Speed
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		if g, w := gv.Field(i), wv.Field(i); !reflect.DeepEqual(g.Interface(), w.Interface()) {
			t.Errorf("replay option %s: validate's runs get %v, replay's default is %v", name, g, w)
		}
	}
	// What the caller sets stays.
	o = DefaultOptions()
	o.Replay.Timeout, o.Replay.Model = 7, "m"
	if r := o.runOptions("x"); r.Timeout != 7 || r.Model != "m" || r.Drain != replay.DefaultDrain {
		t.Errorf("caller's Timeout and Model with defaults: got Timeout %v, Model %q, Drain %v", r.Timeout, r.Model, r.Drain)
	}
}
