package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// The parts of a URL that may hold a secret, each with a canary of its
// own: no output, file, metadata or message of any command may hold one.
var urlCanaries = []string{"cnyUser7", "cnyPass7", "cnyQuery7", "cnyFrag7"}

// canaryURL is base (scheme://host:port[/path]) with a canary in each of
// its user, password, query value and fragment.
func canaryURL(base string) string {
	scheme, rest, _ := strings.Cut(base, "://")
	sep := "?"
	if strings.Contains(rest, "?") {
		sep = "&"
	}
	if !strings.Contains(rest, "/") {
		rest += "/"
	}
	return fmt.Sprintf("%s://%s:%s@%s%stoken=%s#%s", scheme, urlCanaries[0], urlCanaries[1], rest, sep, urlCanaries[2], urlCanaries[3])
}

// credURL is base with canaries in its userinfo only (a URL a server
// answers at its usual paths).
func credURL(base string) string {
	scheme, rest, _ := strings.Cut(base, "://")
	return fmt.Sprintf("%s://%s:%s@%s", scheme, urlCanaries[0], urlCanaries[1], rest)
}

// queryURL is base with canaries in a query value and the fragment only.
func queryURL(base string) string {
	return fmt.Sprintf("%s/?token=%s#%s", base, urlCanaries[2], urlCanaries[3])
}

// canaryIn names the canaries text holds.
func canaryIn(text string) []string {
	var found []string
	for _, c := range urlCanaries {
		if strings.Contains(text, c) {
			found = append(found, c)
		}
	}
	return found
}

// TestURLCanariesNeverLeave feeds canaries through every URL-valued flag
// of replay (--url, --target, --metrics-url), sweep (--url, --target),
// validate (--target NAME=URL), postmortem (--prometheus) and sim
// (--otlp-traces-endpoint), against servers that answer and ones that do
// not, with credentials in the userinfo, a query value and the fragment,
// and in a URL without a scheme: none reaches stdout, stderr, any file the
// command wrote (raw bytes and, for traces and series, their metadata as
// inspect, inspect --json and analyze --json print it), or any message.
func TestURLCanariesNeverLeave(t *testing.T) {
	if testing.Short() {
		t.Skip("replays against live servers")
	}
	ctx := context.Background()
	so := sim.DefaultOptions()
	so.AnyModel, so.Virtual = true, true
	srv, err := sim.Start(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// A Prometheus that answers every query with no series.
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"success","data":{"resultType":"matrix","result":[]}}`)
	}))
	defer prom.Close()
	dead := "http://127.0.0.1:1" // refuses connections

	dir := t.TempDir()
	trace := writeReplayTrace(t, 12)
	// postmortem's trace has an exact start.
	pmTrace := filepath.Join(dir, "incident.jsonl")
	recs, m, err := traces.ReadAll(trace)
	if err != nil {
		t.Fatal(err)
	}
	m.Set("capture.start", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano))
	m.Set("capture.start_precision", "exact")
	writeTrace(t, pmTrace, m, recs)

	type run struct {
		why  string
		args []string
	}
	out := func(name string) string { return filepath.Join(dir, name) }
	replayArgs := func(name string, flags ...string) []string {
		return append(append([]string{"replay", "--max-lateness", "1m", "--timeout", "5s", "--out", out(name)}, flags...), trace)
	}
	sweepArgs := func(name string, flags ...string) []string {
		return append(append([]string{"sweep", "--slo", "ttft=10s", "--speeds", "20", "--chart", "none", "--timeout", "5s", "--out-dir", out(name)}, flags...), trace)
	}
	validateArgs := func(name, target string) []string {
		return []string{"validate", "--resamples", "100", "--timeout", "5s", "--target", "a=" + target, "--target", "b=sim:max-num-seqs=4",
			"--out-dir", out(name), "--html", out(name + ".html"), trace, trace}
	}
	runs := []run{
		{"replay --url with credentials (answers)", replayArgs("r1.parquet", "--url", credURL(srv.URL))},
		{"replay --target with credentials, query and fragment (answers 404)", replayArgs("r2.jsonl", "--target", canaryURL(srv.URL))},
		{"replay --target that refuses", replayArgs("r3.jsonl", "--target", canaryURL(dead))},
		{"replay --target without a scheme", replayArgs("r4.jsonl", "--target", urlCanaries[0]+":"+urlCanaries[1]+"@127.0.0.1:1")},
		{"replay --metrics-url with credentials and query (answers)", replayArgs("r5.csv", "--target", credURL(srv.URL), "--metrics-url", canaryURL(srv.URL+"/metrics"))},
		{"replay --metrics-url that refuses", replayArgs("r6.jsonl.zst", "--metrics-url", canaryURL(dead+"/metrics"))},
		{"sweep --url with credentials (answers)", sweepArgs("s1", "--url", credURL(srv.URL))},
		{"sweep --target that refuses", sweepArgs("s2", "--target", canaryURL(dead))},
		{"validate --target NAME=URL with credentials (answers)", validateArgs("v1", credURL(srv.URL))},
		{"validate --target NAME=URL that refuses", validateArgs("v2", canaryURL(dead))},
		{"postmortem --prometheus with credentials, query and fragment (no series)", []string{"postmortem", "--prometheus", canaryURL(prom.URL),
			"--step", "1s", "--metrics-out", out("pm.metrics.jsonl"), "--html", out("pm.html"), "--json", out("pm.json"), pmTrace}},
		{"postmortem --prometheus with a query and fragment (no series)", []string{"postmortem", "--prometheus", queryURL(prom.URL),
			"--step", "1s", "--metrics-out", out("pm2.metrics.jsonl"), "--html", out("pm2.html"), "--json", out("pm2.json"), pmTrace}},
		{"postmortem --prometheus with credentials that refuses", []string{"postmortem", "--prometheus", canaryURL(dead), "--step", "1s", "--timeout", "2s", pmTrace}},
		{"postmortem --prometheus with a query that refuses", []string{"postmortem", "--prometheus", queryURL(dead), "--step", "1s", "--timeout", "2s", pmTrace}},
		{"sim --otlp-traces-endpoint of the wrong scheme", []string{"sim", "--otlp-traces-endpoint", strings.Replace(canaryURL(dead), "http", "ftp", 1)}},
	}
	// The runs side by side, each in a child process: they mostly wait on
	// the servers (and on the ones that refuse).
	t.Run("runs", func(t *testing.T) {
		for _, r := range runs {
			t.Run(r.why, func(t *testing.T) {
				t.Parallel()
				code, so, se := runCLIChild(t, "", nil, r.args...)
				t.Logf("exit %d: %s", code, lastLine(se))
				if c := canaryIn(so + se); len(c) > 0 {
					t.Errorf("exit %d; canaries %v in its output:\n%s%s", code, c, so, se)
				}
			})
		}
	})
	// sim with spans exported to an endpoint that refuses: served until
	// cancelled, with a request in between.
	simOut := simWithCanaryEndpoint(t, canaryURL(dead+"/v1/traces"), out("truth.jsonl"))
	if c := canaryIn(simOut); len(c) > 0 {
		t.Errorf("sim --otlp-traces-endpoint: canaries %v in its output:\n%s", c, simOut)
	}
	checkNoCanaryFiles(t, dir)
	// A results file an older tokentrace wrote with the secrets in its
	// metadata: read, it says none of them again.
	old := filepath.Join(t.TempDir(), "old.jsonl")
	recs, m, err = traces.ReadAll(out("r1.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	writeTrace(t, old, m, recs)
	first, rest, _ := strings.Cut(string(readFile(t, old)), "\n")
	first = strings.Replace(first, `"command":"`, `"command":"tokentrace replay --url `+canaryURL(srv.URL)+` `, 1)
	first = strings.Replace(first, `"extra":{`, `"extra":{"replay.target":"`+canaryURL(srv.URL)+`",`, 1)
	writeTestFile(t, old, []byte(first+"\n"+rest))
	if len(canaryIn(string(readFile(t, old)))) != len(urlCanaries) {
		t.Fatalf("the old file does not hold the canaries: %.300s", first)
	}
	for _, args := range [][]string{{"inspect", old}, {"inspect", "--json", old}, {"analyze", "--json", old}, {"analyze", old}} {
		code, so, se := runCLI(nil, args...)
		if c := canaryIn(so + se); len(c) > 0 || code != 0 {
			t.Errorf("%v on a file holding secrets: exit %d, prints canaries %v:\n%s%s", args, code, c, so, se)
		}
	}
}

// simWithCanaryEndpoint runs `tokentrace sim --otlp-traces-endpoint
// endpoint --truth-out truth`, sends it a request and stops it; it returns
// everything the command printed.
func simWithCanaryEndpoint(t *testing.T, endpoint, truth string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr syncBuf
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, []string{"tokentrace", "sim", "--virtual", "--otlp-traces-endpoint", endpoint, "--truth-out", truth}, strings.NewReader(""), pw, &stderr)
		pw.Close()
	}()
	br := bufio.NewReader(pr)
	stdout, err := br.ReadString('\n') // the URL line
	if err != nil {
		t.Fatal(err)
	}
	var rest strings.Builder
	done := make(chan struct{})
	go func() { io.Copy(&rest, br); close(done) }()
	url := strings.TrimSpace(stdout)
	if resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"m","prompt":"hi","max_tokens":2,"ignore_eos":true}`)); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	} else {
		t.Logf("request to sim at %q: %v", url, err)
	}
	time.Sleep(100 * time.Millisecond) // the span's export is tried
	cancel()
	select {
	case c := <-code:
		t.Logf("sim --otlp-traces-endpoint: exit %d", c)
	case <-time.After(10 * time.Second):
		t.Fatal("sim did not stop on cancel")
	}
	<-done
	return string(stdout) + rest.String() + stderr.String()
}

// checkNoCanaryFiles reads every file under dir: its bytes, and for a
// trace, results or series file its metadata as inspect (text and JSON)
// and analyze --json print it.
func checkNoCanaryFiles(t *testing.T, dir string) {
	t.Helper()
	n := 0
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		n++
		b, err := os.ReadFile(path)
		if err != nil {
			t.Error(err)
			return nil
		}
		if c := canaryIn(string(b)); len(c) > 0 {
			t.Errorf("%s holds canaries %v", path, c)
		}
		switch ext := strings.TrimSuffix(filepath.Ext(strings.TrimSuffix(path, ".zst")), "."); ext {
		case "parquet", "jsonl", "csv":
			if _, m, err := traces.ReadAll(path); err == nil {
				if c := canaryIn(fmt.Sprintf("%+v", m)); len(c) > 0 {
					t.Errorf("%s's metadata holds canaries %v", path, c)
				}
			} else if _, m, err := traces.ReadSamples(path); err == nil {
				if c := canaryIn(fmt.Sprintf("%+v", m)); len(c) > 0 {
					t.Errorf("%s's series metadata holds canaries %v", path, c)
				}
			}
			for _, args := range [][]string{{"inspect", path}, {"inspect", "--json", path}, {"analyze", "--json", path}} {
				_, so, se := runCLI(nil, args...)
				if c := canaryIn(so + se); len(c) > 0 {
					t.Errorf("%v prints canaries %v:\n%s%s", args, c, so, se)
				}
			}
		}
		return nil
	})
	if n < 10 {
		t.Errorf("only %d files written; the runs did not get far enough to test their outputs", n)
	}
	t.Logf("%d files checked", n)
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}
