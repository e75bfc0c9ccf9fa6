package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestVersionStamped checks that a version stamped at link time
// (-X main.version, as the image build does) is what `version` prints.
func TestVersionStamped(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v1.2.3-test"
	var so, se bytes.Buffer
	if code := Main(context.Background(), []string{"tokentrace", "version"}, nil, &so, &se); code != 0 {
		t.Fatalf("exit %d: %s", code, se.String())
	}
	if !strings.HasPrefix(so.String(), "tokentrace v1.2.3-test (trace schema ") {
		t.Errorf("version printed %q", so.String())
	}
}
