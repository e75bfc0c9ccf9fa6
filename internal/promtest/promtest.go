// Package promtest runs a real Prometheus server for tests: the Debian
// prometheus binary as a plain process on loopback, scraping its targets
// every second, stopped when the test ends. Tests skip when the binary is
// not installed (.ci/run installs it). AwaitScrapes also serves the
// postmortem demo (bench/pmdemo), which runs against a Prometheus of its own.
package promtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Start runs the prometheus binary scraping the targets (host:port, each
// its own instance label) every second, on loopback, and stops it when the
// test ends.
func Start(t testing.TB, targets ...string) string {
	t.Helper()
	return start(t, "", targets)
}

// StartDropping is Start with the metrics whose names match the regular
// expression drop left out at scrape time (metric_relabel_configs), as if
// the servers did not export them (an older or newer vLLM).
func StartDropping(t testing.TB, drop string, targets ...string) string {
	t.Helper()
	return start(t, drop, targets)
}

func start(t testing.TB, drop string, targets []string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (Debian package prometheus; .ci/run installs it)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	conf := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: vllm\n    static_configs:\n      - targets: [%s]\n", strings.Join(quoted, ", "))
	if drop != "" {
		conf += fmt.Sprintf("    metric_relabel_configs:\n      - source_labels: [__name__]\n        regex: %s\n        action: drop\n", strconv.Quote(drop))
	}
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr
	running.Store(url, cmd)
	t.Cleanup(func() {
		Stop(url)
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	for i := 0; ; i++ {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return url
			}
		}
		if i > 100 {
			t.Fatalf("prometheus not ready after 10 s: %v\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// running maps a started Prometheus' URL to its process.
var running sync.Map

// Stop stops the Prometheus that Start returned url for (a test of a
// Prometheus that went away); stopping it again does nothing.
func Stop(url string) {
	if c, ok := running.LoadAndDelete(url); ok {
		cmd := c.(*exec.Cmd)
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// WaitScrapes waits until Prometheus has scraped every target n times.
func WaitScrapes(t testing.TB, promURL string, n int) {
	t.Helper()
	if err := AwaitScrapes(promURL, n); err != nil {
		t.Fatal(err)
	}
}

// AwaitScrapes waits (30 s at most) until the Prometheus at promURL has
// scraped every target of job vllm n times.
func AwaitScrapes(promURL string, n int) error {
	q := promURL + "/api/v1/query?query=" + url.QueryEscape(`min(count_over_time(up{job="vllm"}[5m]))`)
	for range 300 {
		if resp, err := http.Get(q); err == nil {
			var body struct {
				Data struct {
					Result []struct {
						Value [2]any `json:"value"`
					} `json:"result"`
				} `json:"data"`
			}
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if len(body.Data.Result) > 0 {
				v, _ := body.Data.Result[0].Value[1].(string)
				if got, err := strconv.Atoi(v); err == nil && got >= n {
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("prometheus at %s did not scrape its targets %d times in 30 s", promURL, n)
}
