package replay

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// TestMain tunes the process as the CLI does before a replay (see
// replay.TuneProcess): the lateness these tests check depends on it.
func TestMain(m *testing.M) {
	restore := TuneProcess(1)
	code := m.Run()
	restore()
	os.Exit(code)
}

// TestRunLeavesProcessSettingsAlone checks that the library does not touch
// process-wide knobs: GOMAXPROCS and the GC percent are the same during
// and after a Run as before it (only TuneProcess changes them).
func TestRunLeavesProcessSettingsAlone(t *testing.T) {
	f := newFake(0)
	defer f.Close()
	procs := runtime.GOMAXPROCS(0)
	gc := debug.SetGCPercent(137)
	defer debug.SetGCPercent(gc)
	o := DefaultOptions()
	o.URL = f.srv.URL + "/v1/"
	var during int
	o.OnStart = func(time.Time) { during = runtime.GOMAXPROCS(0) }
	if _, err := Run(context.Background(), testTrace(5, time.Millisecond, 8, 2), traces.NewMeta("test"), o); err != nil {
		t.Fatal(err)
	}
	if during != procs || runtime.GOMAXPROCS(0) != procs {
		t.Errorf("GOMAXPROCS %d before, %d during, %d after Run", procs, during, runtime.GOMAXPROCS(0))
	}
	if now := debug.SetGCPercent(gc); now != 137 {
		t.Errorf("GC percent changed by Run: %d, want 137", now)
	}
}
