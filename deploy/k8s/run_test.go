package k8s

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// fakeKubectl stands in for kubectl: it records each call as one line in
// $FAKE_KUBECTL_LOG and keeps the tree `apply -k DIR` applied in
// $FAKE_KUBECTL_LOG.applied; `wait --for=condition=complete` succeeds and
// `--for=condition=failed` does not, except for the Job named in
// $FAKE_KUBECTL_FAIL, which fails. `cp POD:SRC DST` writes DST.
const fakeKubectl = `#!/usr/bin/env bash
echo "$*" >>"$FAKE_KUBECTL_LOG"
args=()
while [ $# -gt 0 ]; do
  case $1 in --namespace) shift 2 ;; *) args+=("$1"); shift ;; esac
done
set -- "${args[@]}"
case $1 in
  apply) mkdir -p "$FAKE_KUBECTL_LOG.applied"; cp "$3"/*.yaml "$FAKE_KUBECTL_LOG.applied/" ;;
  wait)
    job=""
    for a in "$@"; do case $a in job/*) job=${a#job/} ;; esac; done
    case "$*" in
      *condition=complete*) [ "$job" != "${FAKE_KUBECTL_FAIL:-}" ] || exit 1 ;;
      *condition=failed*) [ "$job" = "${FAKE_KUBECTL_FAIL:-}" ] || exit 1 ;;
    esac ;;
  cp) case $2 in tokentrace-loader:*) echo "<html>" >"$3" ;; esac ;;
  logs) echo '{}' ;;
esac
exit 0
`

// fakeBuild stands in for deploy/image/build.sh: it prints an image name,
// as the real one does last.
const fakeBuild = `#!/usr/bin/env bash
echo "building..." >&2
echo registry.example.com/tokentrace:v9.9.9-test
`

type runResult struct {
	calls   []string
	applied string // the tree kubectl applied
	stderr  string
	err     error
}

// runScript runs run.sh with a stand-in kubectl on PATH and a stand-in
// image build, extra environment env, and args.
func runScript(t *testing.T, env []string, args ...string) runResult {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"kubectl": fakeKubectl, "build.sh": fakeBuild} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(dir, "kubectl.log")
	cmd := exec.Command("bash", append([]string{"run.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FAKE_KUBECTL_LOG="+log, "BUILD_IMAGE="+filepath.Join(bin, "build.sh"), "OUT="+filepath.Join(dir, "out"))
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	b, _ := os.ReadFile(log)
	var calls []string
	if s := strings.TrimSpace(string(b)); s != "" {
		calls = strings.Split(s, "\n")
	}
	return runResult{calls: calls, applied: log + ".applied", stderr: stderr.String(), err: err}
}

// index is the position of the first call containing every part, -1 if
// none.
func (r runResult) index(parts ...string) int {
	return slices.IndexFunc(r.calls, func(c string) bool {
		for _, p := range parts {
			if !strings.Contains(c, p) {
				return false
			}
		}
		return true
	})
}

// inputs writes n stand-in log files (or a trace when ext is ".parquet").
func inputs(t *testing.T, n int, ext string) []string {
	t.Helper()
	dir := t.TempDir()
	var out []string
	for i := range n {
		p := filepath.Join(dir, "gateway-"+string(rune('a'+i))+ext)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// TestRunScriptOrder runs deploy/k8s/run.sh against a stand-in kubectl:
// the tree is applied once with the image build.sh printed, the logs go
// onto the volume through the loader before anything runs, and capture,
// compose, replay and analyze are each started only after the one before
// has completed (kubectl wait --for=condition=complete), START_AT set just
// before the replay. (kubectl apply -k started all four Jobs at once.)
func TestRunScriptOrder(t *testing.T) {
	out := t.TempDir()
	logs := inputs(t, 4, ".jsonl.gz")
	r := runScript(t, nil, append([]string{"--namespace", "bench", "--target-url", "http://vllm.bench:8000", "--model", "llama-test", "--out", out}, logs...)...)
	if r.err != nil {
		t.Fatalf("run.sh: %v\n%s\ncalls:\n%s", r.err, r.stderr, strings.Join(r.calls, "\n"))
	}
	for _, c := range r.calls {
		if !strings.HasPrefix(c, "--namespace bench ") {
			t.Errorf("call without the namespace: %q", c)
		}
	}
	apply := r.index("apply -k")
	ready := r.index("wait --for=condition=Ready pod/tokentrace-loader")
	if apply < 0 || ready < apply {
		t.Fatalf("want apply -k, then the wait for the loader; calls:\n%s", strings.Join(r.calls, "\n"))
	}
	if n := strings.Count(strings.Join(r.calls, "\n"), "apply -k"); n != 1 {
		t.Errorf("apply -k %d times, want once (Jobs are immutable; they are resumed, not re-applied)", n)
	}
	prev := ready
	for i := range logs {
		c := r.index("cp "+logs[i], "tokentrace-loader:/data/logs/"+string(rune('0'+i))+".jsonl.gz")
		if c < prev {
			t.Errorf("log %d copied at call %d, want after call %d", i, c, prev)
		}
		prev = c
	}
	for _, job := range []string{"tokentrace-capture", "tokentrace-compose", "tokentrace-replay", "tokentrace-analyze"} {
		start := r.index("patch job "+job, `"suspend":false`)
		done := r.index("wait --for=condition=complete", "job/"+job)
		if start < prev || done < start {
			t.Errorf("%s: started at call %d and waited for at %d; want both after call %d, in that order", job, start, done, prev)
		}
		if job == "tokentrace-replay" {
			if s := r.index("patch configmap tokentrace-settings", "START_AT"); s < 0 || s > start || s < r.index("job/tokentrace-compose") {
				t.Errorf("START_AT set at call %d, want after compose completed and before the replay starts (%d)", s, start)
			}
		}
		prev = done
	}
	if c := r.index("cp tokentrace-loader:/data/report.html"); c < prev {
		t.Errorf("report copied at call %d, want after analyze completed (%d)", c, prev)
	}
	if _, err := os.Stat(filepath.Join(out, "report.html")); err != nil {
		t.Errorf("report.html not in --out: %v", err)
	}

	// What was applied: the image build.sh printed, set through
	// kustomize's images:, on every Job, and the settings given.
	if errs := check(r.applied); len(errs) > 0 {
		t.Errorf("the applied tree does not validate: %v", errs)
	}
	image, err := kustomizedImage(r.applied)
	if err != nil || image != "registry.example.com/tokentrace:v9.9.9-test" {
		t.Errorf("applied image %q (%v), want build.sh's registry.example.com/tokentrace:v9.9.9-test", image, err)
	}
	objs, err := render(r.applied)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range objs {
		var cm corev1.ConfigMap
		if yaml.Unmarshal(b, &cm) == nil && cm.Kind == "ConfigMap" {
			if cm.Data["TARGET_URL"] != "http://vllm.bench:8000" || cm.Data["MODEL"] != "llama-test" {
				t.Errorf("settings %v, want --target-url and --model", cm.Data)
			}
		}
	}
}

// A Job that fails stops the run there, naming it and its logs; the steps
// after it never start.
func TestRunScriptStopsOnFailedJob(t *testing.T) {
	r := runScript(t, []string{"FAKE_KUBECTL_FAIL=tokentrace-replay"}, inputs(t, 4, ".jsonl.gz")...)
	if r.err == nil {
		t.Fatal("run.sh succeeded though the replay Job failed")
	}
	if !strings.Contains(r.stderr, "tokentrace-replay failed") || !strings.Contains(r.stderr, "kubectl logs job/tokentrace-replay") {
		t.Errorf("stderr %q does not name the failed Job and its logs", r.stderr)
	}
	if r.index("patch job tokentrace-analyze") >= 0 {
		t.Error("analyze started after the replay failed")
	}
}

// A finished trace skips capture and compose; a wrong number of logs is
// refused before kubectl is called.
func TestRunScriptInputs(t *testing.T) {
	r := runScript(t, []string{"IMAGE=example.com/tt@sha256:0123"}, inputs(t, 1, ".parquet")...)
	if r.err != nil {
		t.Fatalf("run.sh with a trace: %v\n%s", r.err, r.stderr)
	}
	if r.index("cp ", "tokentrace-loader:/data/trace.parquet") < 0 || r.index("patch job tokentrace-capture") >= 0 || r.index("patch job tokentrace-compose") >= 0 {
		t.Errorf("with a trace: want it copied to /data/trace.parquet and no capture or compose; calls:\n%s", strings.Join(r.calls, "\n"))
	}
	if r.index("get secret tokentrace-capture-key") >= 0 {
		t.Error("with a trace, the capture key was required")
	}
	if image, err := kustomizedImage(r.applied); err != nil || !strings.HasPrefix(image, "example.com/tt:") {
		// kustomizedImage reads newName:newTag; a digest leaves newTag out.
		b, _ := os.ReadFile(filepath.Join(r.applied, "kustomization.yaml"))
		if !bytes.Contains(b, []byte("newName: example.com/tt")) || !bytes.Contains(b, []byte("digest: sha256:0123")) {
			t.Errorf("IMAGE with a digest not set as newName and digest:\n%s", b)
		}
	}

	r = runScript(t, nil, inputs(t, 3, ".jsonl.gz")...)
	if r.err == nil || !strings.Contains(r.stderr, "give 4 log files") || len(r.calls) > 0 {
		t.Errorf("3 logs for 4 capture pods: err %v, stderr %q, %d kubectl calls; want a refusal before any call", r.err, r.stderr, len(r.calls))
	}
}
