package main

import (
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/internal/promtest"
	"github.com/tokentrace/tokentrace/sim"
)

// startSimServer starts the built-in simulator on loopback, configured by
// config (ApplyConfig; "" = the defaults) and then set (nil = nothing
// more), and closes it when the test ends (a caller may close it sooner).
func startSimServer(t testing.TB, config string, set func(*sim.Options)) *sim.Server {
	t.Helper()
	so := sim.DefaultOptions()
	if err := sim.ApplyConfig(&so, config); err != nil {
		t.Fatal(err)
	}
	if set != nil {
		set(&so)
	}
	srv, err := sim.Start(t.Context(), so)
	if err != nil {
		t.Fatalf("start sim: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// startScraping starts a Prometheus that scrapes srv and waits for its
// first scrapes, so that a load started next lies inside scraped history.
func startScraping(t *testing.T, srv *sim.Server) string {
	t.Helper()
	promURL := promtest.Start(t, strings.TrimPrefix(srv.URL, "http://"))
	promtest.WaitScrapes(t, promURL, 3)
	return promURL
}
