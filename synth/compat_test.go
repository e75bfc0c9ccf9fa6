package synth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/internal/golden"
)

// TestSessionlessOutputsPinned: a trace without sessions gives the same
// model and the same generated trace as before follow-up turns were
// modelled (files written by that version), and a version-1 model with
// sessions (testdata/model.v1.golden.json) still loads and generates the
// same records. Regenerate with -update only for an intended change.
func TestSessionlessOutputsPinned(t *testing.T) {
	recs := synthetic(600, 12)
	for i := range recs {
		recs[i].Session, recs[i].Turn = 0, 0
	}
	var model bytes.Buffer
	if _, err := fitModel(t, recs).WriteTo(&model); err != nil {
		t.Fatal(err)
	}
	v1, err := ReadModelFile(filepath.Join("testdata", "model.v1.golden.json"))
	if err != nil {
		t.Fatalf("a version-1 model must keep loading: %v", err)
	}
	if v1.Classes[0].Sessions == nil {
		t.Fatal("testdata/model.v1.golden.json should model sessions")
	}
	digest := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	got := map[string]string{
		"nosessions.model.json": model.String(),
		"nosessions.gen.sha256": digest(genBytes(t, fitModel(t, recs), genSeed(3))) + "\n",
		"v1.gen.sha256":         digest(genBytes(t, v1, genSeed(3))) + "\n",
	}
	for name, data := range got {
		golden.Check(t, filepath.Join("testdata", name), []byte(data))
	}
	if !strings.Contains(model.String(), `"version": 1`) {
		t.Error("a model without follow-up turns should stay version 1")
	}
}
