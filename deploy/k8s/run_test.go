package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// fakeKubectl stands in for kubectl: it records each call as one line in
// $FAKE_KUBECTL_LOG and keeps the tree `apply -k DIR` applied in
// $FAKE_KUBECTL_LOG.applied; `wait --for=condition=complete` succeeds and
// `--for=condition=failed` does not, except for the Job named in
// $FAKE_KUBECTL_FAIL, which fails. `cp POD:SRC DST` writes DST. The secrets
// in $FAKE_KUBECTL_SECRETS exist (default: both). A stuck cluster: the pods
// of $FAKE_KUBECTL_PULL wait in ImagePullBackOff (for the first
// $FAKE_KUBECTL_PULL_POLLS looks at them, if set) and their Job does not
// complete; with FAKE_KUBECTL_CLAIM=Pending the volume's claim stays Pending
// (its storage class provisions no ReadWriteMany) and the loader never
// gets ready; FAKE_KUBECTL_UNSCHEDULABLE names a Job whose pods fit no node.
// A wait that does not succeed takes a second, as a real one takes its
// --timeout.
const fakeKubectl = `#!/usr/bin/env bash
echo "$*" >>"$FAKE_KUBECTL_LOG"
args=()
while [ $# -gt 0 ]; do
  case $1 in --namespace) shift 2 ;; *) args+=("$1"); shift ;; esac
done
set -- "${args[@]}"
claim=${FAKE_KUBECTL_CLAIM:-Bound}
# pulling NAME: whether the pods of NAME are (still) failing to pull.
pulling() {
  [ "$1" = "${FAKE_KUBECTL_PULL:-}" ] || return 1
  [ -n "${FAKE_KUBECTL_PULL_POLLS:-}" ] || return 0
  n=$(cat "$FAKE_KUBECTL_LOG.polls" 2>/dev/null || echo 0)
  [ "$n" -lt "$FAKE_KUBECTL_PULL_POLLS" ]
}
case $1 in
  apply)
    if [ "$2" = -f ]; then cat >"$FAKE_KUBECTL_LOG.stdin"
    else mkdir -p "$FAKE_KUBECTL_LOG.applied"; cp "$3"/*.yaml "$FAKE_KUBECTL_LOG.applied/"; fi ;;
  create) printf 'apiVersion: v1\nkind: Secret\n' ;;
  get)
    case $2 in
      secret) [[ " ${FAKE_KUBECTL_SECRETS-tokentrace-capture-key tokentrace-api-key} " == *" $3 "* ]] || { echo "Error from server (NotFound): secrets \"$3\" not found" >&2; exit 1; } ;;
      pvc) printf '%s' "$claim" ;;
      events) [ "$claim" = Bound ] || printf 'WaitForFirstConsumer: waiting for first consumer to be created before binding\nProvisioningFailed: failed to provision volume with StorageClass "standard": NodePath only supports ReadWriteOnce and ReadWriteOncePod access modes\n' ;;
      pods)
        name=""
        for a; do case $a in app.kubernetes.io/name=*) name=${a#*=} ;; esac; done
        if pulling "$name"; then
          printf '%s-0-x7k2p\tImagePullBackOff\tBack-off pulling image "localhost/tokentrace:v9.9.9-test"\n' "$name"
          n=$(cat "$FAKE_KUBECTL_LOG.polls" 2>/dev/null || echo 0); echo $((n + 1)) >"$FAKE_KUBECTL_LOG.polls"
        fi
        if [ "$name" = "${FAKE_KUBECTL_UNSCHEDULABLE:-}" ]; then
          printf '%s-2-q8m4d\tUnschedulable\t0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.\n' "$name"
        fi
        if [ "$name" = tokentrace-loader ] && [ "$claim" != Bound ]; then
          printf 'tokentrace-loader\tUnschedulable\t0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.\n'
        fi ;;
    esac ;;
  wait)
    job=""
    for a in "$@"; do case $a in job/*) job=${a#job/} ;; esac; done
    case "$*" in
      *condition=Ready*) [ "$claim" = Bound ] || { sleep 1; exit 1; } ;;
      *condition=complete*)
        if [ "$job" = "${FAKE_KUBECTL_FAIL:-}" ] || pulling "$job" || [ "$job" = "${FAKE_KUBECTL_UNSCHEDULABLE:-}" ]; then sleep 1; exit 1; fi ;;
      *condition=failed*) [ "$job" = "${FAKE_KUBECTL_FAIL:-}" ] || exit 1 ;;
    esac ;;
  exec) case "$*" in *"ls results-"*) echo results-0.metrics.parquet results-0.parquet results-1.parquet results-2.parquet results-3.parquet ;; esac ;;
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

// fakeTool stands in for podman and kind: it records each call, named, in
// $FAKE_KUBECTL_LOG.tools.
const fakeTool = `#!/usr/bin/env bash
echo "$(basename "$0") $*" >>"$FAKE_KUBECTL_LOG.tools"
`

type runResult struct {
	calls   []string
	applied string // the tree kubectl applied
	tools   string // the calls of podman and kind
	out     string // the --out directory
	stderr  string
	err     error
	took    time.Duration
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
	for name, body := range map[string]string{"kubectl": fakeKubectl, "build.sh": fakeBuild, "podman": fakeTool, "kind": fakeTool} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(dir, "kubectl.log")
	out := filepath.Join(dir, "out")
	// A run.sh that waits for what never happens fails the test here,
	// instead of holding it for run.sh's --timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{"run.sh"}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FAKE_KUBECTL_LOG="+log, "BUILD_IMAGE="+filepath.Join(bin, "build.sh"), "OUT="+out)
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	b, _ := os.ReadFile(log)
	tools, _ := os.ReadFile(log + ".tools")
	var calls []string
	if s := strings.TrimSpace(string(b)); s != "" {
		calls = strings.Split(s, "\n")
	}
	return runResult{calls: calls, applied: log + ".applied", tools: string(tools), out: out, stderr: stderr.String(), err: err, took: took}
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
	// --out brings back what the run made: the report, every shard's
	// results (and scraped metrics) and the trace captured from the logs.
	for _, f := range []string{"report.html", "report.json", "results-0.parquet", "results-3.parquet", "results-0.metrics.parquet", "trace.parquet"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s not in --out: %v", f, err)
		}
	}

	// What was applied: the image build.sh printed, set through
	// kustomize's images:, on every Job, and the settings given.
	if s := appliedSettings(t, r); s["TARGET_URL"] != "http://vllm.bench:8000" || s["MODEL"] != "llama-test" {
		t.Errorf("settings %v, want --target-url and --model", s)
	}
	image, err := kustomizedImage(r.applied)
	if err != nil || image != "registry.example.com/tokentrace:v9.9.9-test" {
		t.Errorf("applied image %q (%v), want build.sh's registry.example.com/tokentrace:v9.9.9-test", image, err)
	}
}

// appliedSettings checks that the tree run.sh applied validates and
// returns its settings ConfigMap's data.
func appliedSettings(t *testing.T, r runResult) map[string]string {
	t.Helper()
	if errs := check(r.applied); len(errs) > 0 {
		t.Errorf("the applied tree does not validate: %v", errs)
	}
	objs, err := render(r.applied)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range objs {
		var cm corev1.ConfigMap
		if yaml.Unmarshal(b, &cm) == nil && cm.Kind == "ConfigMap" {
			return cm.Data
		}
	}
	t.Fatal("no settings ConfigMap applied")
	return nil
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

// A cluster where a step can never finish (an image it cannot pull, a claim
// its storage class cannot provision, pods that fit no node) stops the run
// within a minute, with the --stuck-after default where the case says so,
// naming the pod or the claim, the reason and the fix, instead of waiting
// for --timeout (six hours); the steps after it never start.
func TestRunScriptStopsWhenStuck(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want []string // in stderr
		next string   // a Job that must not start
	}{
		{"an image the cluster cannot pull", []string{"FAKE_KUBECTL_PULL=tokentrace-capture"},
			[]string{"pod tokentrace-capture-0-x7k2p: ImagePullBackOff", "cannot pull registry.example.com/tokentrace:v9.9.9-test", "--push", "--kind"}, "tokentrace-compose"},
		{"a claim that stays Pending", []string{"FAKE_KUBECTL_CLAIM=Pending"},
			[]string{"volume claim tokentrace-data is Pending (ProvisioningFailed: ", "NodePath only supports ReadWriteOnce", "--storage-class", "--access-mode ReadWriteOnce"}, "tokentrace-capture"},
		{"replay pods that fit no node", []string{"FAKE_KUBECTL_UNSCHEDULABLE=tokentrace-replay", "STUCK_AFTER=3"},
			[]string{"pod tokentrace-replay-2-q8m4d: Unschedulable (0/3 nodes are available: 3 Insufficient cpu.", "no node can run it"}, "tokentrace-analyze"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runScript(t, tc.env, inputs(t, 4, ".jsonl.gz")...)
			if r.err == nil {
				t.Fatalf("run.sh succeeded on a stuck cluster; stderr:\n%s", r.stderr)
			}
			if r.took > 60*time.Second {
				t.Errorf("run.sh took %v to give up, want under a minute", r.took)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
				}
			}
			if r.index("patch job "+tc.next) >= 0 {
				t.Errorf("%s started after the run was stuck", tc.next)
			}
		})
	}
}

// A pull that fails a couple of times and then succeeds (a registry
// hiccup) does not stop the run.
func TestRunScriptRidesOutABriefPullFailure(t *testing.T) {
	r := runScript(t, []string{"FAKE_KUBECTL_PULL=tokentrace-capture", "FAKE_KUBECTL_PULL_POLLS=2"}, inputs(t, 4, ".jsonl.gz")...)
	if r.err != nil {
		t.Fatalf("run.sh: %v\n%s", r.err, r.stderr)
	}
}

// The API key is optional: without one (and no secret in the namespace)
// the replay runs without it; with --api-key-file run.sh stores it as the
// secret and points the replay pods at it, and the key itself appears in
// no kubectl argument and no message.
func TestRunScriptAPIKey(t *testing.T) {
	trace := inputs(t, 1, ".parquet")

	r := runScript(t, []string{"FAKE_KUBECTL_SECRETS="}, trace...)
	if r.err != nil {
		t.Fatalf("run.sh without an API key: %v\n%s", r.err, r.stderr)
	}
	if got, ok := appliedSettings(t, r)["API_KEY_PATH"]; !ok || got != "" {
		t.Errorf("without a key: API_KEY_PATH %q (set %v), want empty", got, ok)
	}
	if r.index("create secret") >= 0 || !strings.Contains(r.stderr, "no Authorization header") {
		t.Errorf("without a key: want no secret created and a note; stderr:\n%s", r.stderr)
	}

	key := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(key, []byte("sk-very-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runScript(t, []string{"FAKE_KUBECTL_SECRETS="}, append([]string{"--api-key-file", key}, trace...)...)
	if r.err != nil {
		t.Fatalf("run.sh with an API key: %v\n%s", r.err, r.stderr)
	}
	if r.index("create secret generic tokentrace-api-key", "--from-file=key="+key) < 0 || r.index("apply -f -") < 0 {
		t.Errorf("with --api-key-file: want the secret created from the file and applied; calls:\n%s", strings.Join(r.calls, "\n"))
	}
	if got := appliedSettings(t, r)["API_KEY_PATH"]; got != "/secrets/api/key" {
		t.Errorf("with a key: API_KEY_PATH %q, want /secrets/api/key", got)
	}
	if strings.Contains(strings.Join(r.calls, "\n")+r.stderr, "very-secret") {
		t.Error("the key appears in a kubectl argument or a message")
	}

	r = runScript(t, nil, trace...) // the secret exists in the namespace
	if r.err != nil {
		t.Fatalf("run.sh with an existing secret: %v\n%s", r.err, r.stderr)
	}
	if got := appliedSettings(t, r)["API_KEY_PATH"]; got != "/secrets/api/key" || r.index("create secret") >= 0 {
		t.Errorf("with an existing secret: API_KEY_PATH %q, want /secrets/api/key, and no secret created", got)
	}
}

// --storage-class and --access-mode reach the applied claim; --kind loads
// the built image into the kind cluster's nodes before anything is
// applied.
func TestRunScriptVolumeAndKind(t *testing.T) {
	r := runScript(t, nil, append([]string{"--storage-class", "nfs-client", "--access-mode", "ReadWriteOnce", "--kind", "tt"}, inputs(t, 1, ".parquet")...)...)
	if r.err != nil {
		t.Fatalf("run.sh: %v\n%s", r.err, r.stderr)
	}
	if errs := check(r.applied); len(errs) > 0 {
		t.Errorf("the applied tree does not validate: %v", errs)
	}
	objs, err := render(r.applied)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range objs {
		var pvc corev1.PersistentVolumeClaim
		if yaml.Unmarshal(b, &pvc) == nil && pvc.Kind == "PersistentVolumeClaim" {
			found = true
			if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "nfs-client" || !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
				t.Errorf("claim: class %v, modes %v; want nfs-client, [ReadWriteOnce]", pvc.Spec.StorageClassName, pvc.Spec.AccessModes)
			}
		}
	}
	if !found {
		t.Error("no claim applied")
	}
	if !strings.Contains(r.tools, "podman save -o ") || !strings.Contains(r.tools, " registry.example.com/tokentrace:v9.9.9-test\nkind load image-archive --name tt ") {
		t.Errorf("--kind: want podman save of the image, then kind load image-archive; calls:\n%s", r.tools)
	}
	if strings.Contains(r.stderr, "is a local image") {
		t.Error("--kind still warned that the image is local")
	}
}

// waiting.gotmpl, the template run.sh gives kubectl to list the pods that
// wait, run as kubectl runs it (text/template over the decoded JSON, a
// missing key empty): one line per waiting container or unscheduled pod,
// nothing for a running pod or one being deleted.
func TestWaitingTemplate(t *testing.T) {
	tmpl, err := template.ParseFiles("waiting.gotmpl")
	if err != nil {
		t.Fatal(err)
	}
	deleted := metav1.Now()
	pod := func(name string, status corev1.PodStatus) corev1.Pod {
		return corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: name}, Status: status}
	}
	waiting := func(reason, msg string) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: "replay", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	}
	gone := pod("old-0", corev1.PodStatus{ContainerStatuses: waiting("ImagePullBackOff", "")})
	gone.DeletionTimestamp = &deleted
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "List", APIVersion: "v1"}, Items: []corev1.Pod{
		pod("pull-0", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: waiting("ImagePullBackOff", `Back-off pulling image "localhost/tokentrace:v1"`)}),
		pod("bad-0", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: waiting("InvalidImageName", "")}),
		pod("fit-0", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient cpu."}}}),
		pod("run-0", corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "replay", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}),
		pod("new-0", corev1.PodStatus{Phase: corev1.PodPending}),
		gone,
	}}
	b, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := tmpl.Execute(&out, obj); err != nil {
		t.Fatal(err)
	}
	want := "pull-0\tImagePullBackOff\tBack-off pulling image \"localhost/tokentrace:v1\"\n" +
		"bad-0\tInvalidImageName\t\n" +
		"fit-0\tUnschedulable\t0/3 nodes are available: 3 Insufficient cpu.\n"
	if out.String() != want {
		t.Errorf("template printed\n%q\nwant\n%q", out.String(), want)
	}
}
