package sweep

import (
	"os"
	"testing"

	"github.com/tokentrace/tokentrace/replay"
)

// TestMain tunes the process as the CLI does before a replay (see
// replay.TuneProcess): the lateness these tests check depends on it.
func TestMain(m *testing.M) {
	restore := replay.TuneProcess(1)
	code := m.Run()
	restore()
	os.Exit(code)
}
