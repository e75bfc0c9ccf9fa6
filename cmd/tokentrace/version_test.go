package main

import (
	"strings"
	"testing"
)

// TestVersionStamped checks that a version stamped at link time
// (-X main.version, as the image build does) is what `version` prints.
func TestVersionStamped(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v1.2.3-test"
	if so, _ := runMain(t, "version"); !strings.HasPrefix(so, "tokentrace v1.2.3-test (trace schema ") {
		t.Errorf("version printed %q", so)
	}
}
