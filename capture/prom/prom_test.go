package prom

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/internal/promtest"
	"github.com/tokentrace/tokentrace/replay/sim"
)

// load sends n completions to the simulator over about d.
func load(t *testing.T, url string, n int, d time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":48,"ignore_eos":true}`, sim.DefaultModel, strings.Repeat("tok ", 200))
			resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}()
		time.Sleep(d / time.Duration(n))
	}
	wg.Wait()
}

// TestFetchFromRealPrometheus replays load on a simulator that a real
// Prometheus scrapes every second, then reads the window back: every column
// the simulator exports is present, requests finished add up to what was
// sent, the instance is named, and a credential file's content never shows
// up in an error.
func TestFetchFromRealPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and waits for scrapes (~12 s)")
	}
	ctx := context.Background()
	so := sim.DefaultOptions()
	srv, err := sim.Start(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	promURL := promtest.Start(t, strings.TrimPrefix(srv.URL, "http://"))
	promtest.WaitScrapes(t, promURL, 3) // the load must start inside scraped history
	start := time.Now().Truncate(time.Second)
	const n = 60
	load(t, srv.URL, n, 4*time.Second)
	time.Sleep(5 * time.Second) // the last scrapes after the load, past the window
	res, err := Fetch(ctx, Options{URL: promURL, Start: start, Duration: 8 * time.Second, Step: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range res.Missing {
		switch col {
		case "preemptions", "prefix_hit_rate":
			// present in the export but may be empty (no preemptions; hit
			// rate NaN without queries are skipped, not missing)
		default:
			t.Errorf("column %s missing from Prometheus, though the simulator exports it", col)
		}
	}
	finished, maxRunning := 0.0, int64(0)
	for _, s := range res.Samples {
		if s.RequestsFinished > 0 {
			finished += float64(s.RequestsFinished)
		}
		maxRunning = max(maxRunning, s.Running)
	}
	// increase() extrapolates within each step, so the sum is close to n,
	// not exact.
	if finished < 0.8*n || finished > 1.2*n {
		t.Errorf("requests finished over the window: %.0f, want about %d", finished, n)
	}
	if maxRunning <= 0 {
		t.Errorf("no running requests seen in %d samples", len(res.Samples))
	}
	if len(res.Instances) != 1 {
		t.Errorf("instances %v, want the one simulator", res.Instances)
	}
	t.Logf("%d samples, %.0f finished, max running %d, gaps %d, missing %v", len(res.Samples), finished, maxRunning, res.Gaps, res.Missing)

	// A wrong URL fails with a message naming the server; a token never
	// appears in it.
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("s3cret-token\n"), 0o600)
	_, err = Fetch(ctx, Options{URL: "http://127.0.0.1:1", Start: start, Duration: time.Minute, BearerTokenFile: tok, Retries: 1, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("stopped Prometheus: error %v", err)
	}
}

// TestValidate names the option at fault.
func TestValidate(t *testing.T) {
	ok := Options{URL: "http://p:9090", Start: time.Unix(1, 0), Duration: time.Minute, Step: time.Second}
	for _, c := range []struct {
		why  string
		edit func(o *Options)
		want string
	}{
		{"a URL is required", func(o *Options) { o.URL = "" }, "Options.URL is required"},
		{"credentials in the URL are refused without echoing them", func(o *Options) { o.URL = "http://user:pw@p:9090" }, "carries credentials"},
		{"a start is required", func(o *Options) { o.Start = time.Time{} }, "Options.Start"},
		{"the step is whole seconds", func(o *Options) { o.Step = 1500 * time.Millisecond }, "Options.Step"},
		{"too many points are refused", func(o *Options) { o.Duration = 24 * time.Hour }, "11,000 points"},
	} {
		o := ok
		c.edit(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "pw") {
			t.Errorf("%s: %v, want an error containing %q", c.why, err, c.want)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
}
