// Package k8s holds the Kubernetes manifests of tokentrace (Kustomize, in
// this folder) and the test that validates them without a cluster. It is a
// module of its own so the Kubernetes API types do not weigh on the main one.
package k8s

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// render builds the Kustomize tree in dir, as `kubectl apply -k` would, and
// returns each object as YAML.
func render(dir string) ([][]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	var out [][]byte
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// kustomizedImage is the image the kustomization sets for "tokentrace".
func kustomizedImage(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return "", err
	}
	var k types.Kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		return "", fmt.Errorf("kustomization.yaml: %w", err)
	}
	for _, im := range k.Images {
		if im.Name == "tokentrace" {
			return im.NewName + ":" + im.NewTag, nil
		}
	}
	return "", fmt.Errorf("kustomization.yaml sets no image for tokentrace")
}

var (
	shardArg = regexp.MustCompile(`^--shard=\$\(INDEX\)/(\d+)$`)
	argVar   = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
)

// requiredSecrets are the secrets a Job may need to start: capture cannot
// run without its key. Every other secret is optional, so a pod does not
// wait for one that a run does not use (a server without auth has no API
// key).
var requiredSecrets = []string{"tokentrace-capture-key"}

// check decodes every object strictly (an unknown field fails) and returns
// every broken invariant of the Jobs.
func check(dir string) []error {
	objs, err := render(dir)
	if err != nil {
		return []error{err}
	}
	image, err := kustomizedImage(dir)
	if err != nil {
		return []error{err}
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	jobs := map[string]*batchv1.Job{}
	settings := map[string]map[string]string{}
	for _, b := range objs {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(b, &meta); err != nil {
			return []error{err}
		}
		var obj any
		switch meta.Kind {
		case "Job":
			obj = &batchv1.Job{}
		case "PersistentVolumeClaim":
			obj = &corev1.PersistentVolumeClaim{}
		case "ConfigMap":
			obj = &corev1.ConfigMap{}
		case "Pod":
			obj = &corev1.Pod{}
		default:
			bad("unexpected kind %s", meta.Kind)
			continue
		}
		if err := yaml.UnmarshalStrict(b, obj); err != nil {
			bad("%s: %v", firstLine(b), err)
		}
	}
	var loader *corev1.Pod
	for _, b := range objs {
		j := &batchv1.Job{}
		if yaml.Unmarshal(b, j) == nil && j.Kind == "Job" {
			jobs[j.Name] = j
		}
		p := &corev1.Pod{}
		if yaml.Unmarshal(b, p) == nil && p.Kind == "Pod" && p.Name == "tokentrace-loader" {
			loader = p
		}
		cm := &corev1.ConfigMap{}
		if yaml.Unmarshal(b, cm) == nil && cm.Kind == "ConfigMap" {
			settings[cm.Name] = cm.Data
		}
	}
	if loader == nil {
		bad("pod tokentrace-loader missing: nothing can copy the logs onto the volume")
	} else {
		spec := loader.Spec
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			bad("pod tokentrace-loader: automountServiceAccountToken must be false")
		}
		if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			bad("pod tokentrace-loader: securityContext.runAsNonRoot must be true")
		}
		mounted := false
		for _, v := range spec.Volumes {
			mounted = mounted || (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "tokentrace-data")
		}
		if !mounted {
			bad("pod tokentrace-loader does not mount the tokentrace-data volume")
		}
		for _, c := range spec.Containers {
			if c.Image == image || !strings.Contains(c.Image, ":") || strings.HasSuffix(c.Image, ":latest") {
				// kubectl cp needs tar in the container: not in the FROM
				// scratch tokentrace image.
				bad("pod tokentrace-loader container %s: image %q, want a pinned image with tar (busybox)", c.Name, c.Image)
			}
			checkContainer("pod tokentrace-loader", c, bad)
		}
	}
	for _, name := range []string{"tokentrace-capture", "tokentrace-compose", "tokentrace-replay", "tokentrace-analyze"} {
		if jobs[name] == nil {
			bad("job %s missing", name)
		}
	}
	for name, j := range jobs {
		spec := j.Spec.Template.Spec
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			bad("job %s: automountServiceAccountToken must be false", name)
		}
		if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			bad("job %s: pod securityContext.runAsNonRoot must be true", name)
		}
		for _, v := range spec.Volumes {
			if v.ConfigMap != nil {
				bad("job %s: volume %s is a ConfigMap (1 MiB limit): traces and results belong on a volume", name, v.Name)
			}
		}
		if j.Spec.Suspend == nil || !*j.Spec.Suspend {
			// Applied running, every Job would start at once: compose
			// before capture has written its parts, replay before the
			// trace exists.
			bad("job %s: suspend must be true (run.sh starts the Jobs in order)", name)
		}
		for _, c := range spec.Containers {
			if c.Image != image {
				bad("job %s container %s: image %q, want the kustomization's %q", name, c.Name, c.Image, image)
			}
			checkContainer("job "+name, c, bad)
			checkArgVars("job "+name, c, settings, bad)
		}
		checkSecretsOptional("job "+name, spec, bad)
		if j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion {
			if j.Spec.Completions == nil || j.Spec.Parallelism == nil || *j.Spec.Completions != *j.Spec.Parallelism {
				bad("job %s: completions and parallelism must be set and equal", name)
			}
			if !indexFromAnnotation(spec.Containers) {
				bad("job %s: no INDEX env from the job-completion-index annotation", name)
			}
		}
	}
	if c := jobs["tokentrace-capture"]; c != nil && !slices.Contains(c.Spec.Template.Spec.Containers[0].Args, "--part=$(INDEX)") {
		// Without --part each pod writes a finished trace of its own:
		// k-anonymity per pod, session ids that collide across parts.
		bad("job tokentrace-capture: each pod must write part $(INDEX) (--part=$(INDEX)) for the compose Job")
	}
	if r := jobs["tokentrace-replay"]; r != nil && r.Spec.Completions != nil {
		n := int(*r.Spec.Completions)
		shards := ""
		for _, a := range r.Spec.Template.Spec.Containers[0].Args {
			if m := shardArg.FindStringSubmatch(a); m != nil {
				shards = m[1]
			}
		}
		if shards != fmt.Sprint(n) {
			bad("job tokentrace-replay: --shard=$(INDEX)/N must name N = completions = %d (found %q)", n, shards)
		}
		if a := jobs["tokentrace-analyze"]; a != nil {
			results := 0
			for _, arg := range a.Spec.Template.Spec.Containers[0].Args {
				if strings.HasPrefix(arg, "/data/results-") {
					results++
				}
			}
			if results != n {
				bad("job tokentrace-analyze reads %d results files, the replay writes %d", results, n)
			}
		}
	}
	return errs
}

// checkContainer checks the limits and the security context every
// container must have.
func checkContainer(owner string, c corev1.Container, bad func(string, ...any)) {
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[res]; !ok {
			bad("%s container %s: no %s request", owner, c.Name, res)
		}
		if _, ok := c.Resources.Limits[res]; !ok {
			bad("%s container %s: no %s limit", owner, c.Name, res)
		}
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		bad("%s container %s: readOnlyRootFilesystem must be true", owner, c.Name)
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		bad("%s container %s: allowPrivilegeEscalation must be false", owner, c.Name)
	}
}

// checkArgVars checks that every $(VAR) in c's args is defined by its env
// or a ConfigMap of its envFrom: Kubernetes leaves an undefined one as it
// is, and the command gets "$(VAR)" as a value.
func checkArgVars(owner string, c corev1.Container, settings map[string]map[string]string, bad func(string, ...any)) {
	defined := map[string]bool{}
	for _, e := range c.Env {
		defined[e.Name] = true
	}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef != nil {
			for k := range settings[from.ConfigMapRef.Name] {
				defined[k] = true
			}
		}
	}
	for _, a := range c.Args {
		for _, m := range argVar.FindAllStringSubmatch(a, -1) {
			if !defined[m[1]] {
				bad("%s container %s: arg %q uses $(%s), which no env or ConfigMap defines", owner, c.Name, a, m[1])
			}
		}
	}
}

// checkSecretsOptional checks that every secret spec mounts or reads is
// optional unless it is one of requiredSecrets: a missing one would hold
// its pods in ContainerCreating.
func checkSecretsOptional(owner string, spec corev1.PodSpec, bad func(string, ...any)) {
	for _, v := range spec.Volumes {
		if s := v.Secret; s != nil && !slices.Contains(requiredSecrets, s.SecretName) && (s.Optional == nil || !*s.Optional) {
			bad("%s: volume %s: secret %s must be optional: true (a run without it must not wait for it)", owner, v.Name, s.SecretName)
		}
	}
	for _, c := range spec.Containers {
		for _, e := range c.Env {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				continue
			}
			if r := e.ValueFrom.SecretKeyRef; !slices.Contains(requiredSecrets, r.Name) && (r.Optional == nil || !*r.Optional) {
				bad("%s container %s: env %s: secret %s must be optional: true", owner, c.Name, e.Name, r.Name)
			}
		}
	}
}

func indexFromAnnotation(cs []corev1.Container) bool {
	for _, c := range cs {
		for _, e := range c.Env {
			if e.Name == "INDEX" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
				e.ValueFrom.FieldRef.FieldPath == "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
				return true
			}
		}
	}
	return false
}

func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

// TestManifests checks the shipped tree.
func TestManifests(t *testing.T) {
	for _, err := range check(".") {
		t.Error(err)
	}
}

// TestManifestsCatchMistakes breaks a copy of the tree in one way per case
// and checks that the validation names the mistake.
func TestManifestsCatchMistakes(t *testing.T) {
	cases := []struct {
		name, file, old, new, want string
	}{
		{"an unknown field fails strict decoding", "replay-job.yaml", "backoffLimit: 0", "backoffLimit: 0\n  backofLimit: 1", "unknown field"},
		{"a container without a CPU limit is caught", "analyze-job.yaml", `limits: {cpu: "2", memory: 8Gi}`, `limits: {memory: 8Gi}`, "no cpu limit"},
		{"a shard count that disagrees with completions is caught", "replay-job.yaml", "--shard=$(INDEX)/4", "--shard=$(INDEX)/8", "must name N = completions"},
		{"parallelism that disagrees with completions is caught", "capture-job.yaml", "parallelism: 4", "parallelism: 2", "completions and parallelism"},
		{"a writable root filesystem is caught", "capture-job.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem"},
		{"a capture pod that writes a finished trace instead of a part is caught", "capture-job.yaml", "- --part=$(INDEX)", "- --keep-hashes", "--part=$(INDEX)"},
		{"an image not set by the kustomization is caught", "replay-job.yaml", "image: tokentrace", "image: busybox", "want the kustomization's"},
		{"a Job applied running (all four would start at once) is caught", "compose-job.yaml", "suspend: true", "suspend: false", "suspend must be true"},
		{"a loader without tar (the tokentrace image) is caught", "loader-pod.yaml", "image: docker.io/library/busybox:1.37", "image: tokentrace", "want a pinned image with tar"},
		{"a required API-key secret is caught", "replay-job.yaml", "            optional: true\n", "", "secret tokentrace-api-key must be optional"},
		{"an arg variable nothing defines is caught", "kustomization.yaml", "      - API_KEY_PATH=\n", "", "uses $(API_KEY_PATH), which no env or ConfigMap defines"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			files, _ := filepath.Glob("*.yaml")
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if f == c.file {
					if !bytes.Contains(b, []byte(c.old)) {
						t.Fatalf("%s does not contain %q", f, c.old)
					}
					b = bytes.Replace(b, []byte(c.old), []byte(c.new), 1)
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			errs := check(dir)
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), c.want) {
				t.Errorf("errors %q do not mention %q", msgs, c.want)
			}
		})
	}
}
