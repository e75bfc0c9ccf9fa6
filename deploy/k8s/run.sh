#!/usr/bin/env bash
# Runs the whole pipeline on Kubernetes, in order: capture → compose → replay → analyze.
#
#   deploy/k8s/run.sh [flags] LOG...      capture the logs (one file per capture pod), then the rest
#   deploy/k8s/run.sh [flags] TRACE.parquet  replay and analyze a finished trace
#
# Flags (each also as an environment variable):
#   --image IMAGE          the image to run (IMAGE), from a registry the cluster pulls from;
#                          default: build it with deploy/image/build.sh (BUILD_IMAGE overrides
#                          that command) and use the name it prints (localhost/tokentrace:VERSION,
#                          which a cluster cannot pull: give --push or --kind with it)
#   --push                 push the image it built (PUSH=1) with podman: for a registry the
#                          cluster pulls from (build it as one: --image is then not given, so
#                          give its name with IMAGE_NAME=registry.example.com/tokentrace:v1)
#   --kind CLUSTER         load the image into the nodes of the kind cluster CLUSTER (KIND)
#                          instead: podman save, then kind load image-archive
#   --namespace NS         namespace of every object (NAMESPACE; default: kubectl's current one)
#   --target-url URL       the server to replay against (TARGET_URL)
#   --model NAME           model name of every request (MODEL)
#   --run NAME             run label, request ids RUN-SEQ (RUN)
#   --api-key-file FILE    the server's bearer token (API_KEY_FILE): stored as the secret
#                          tokentrace-api-key; without it an existing secret is used, and with
#                          none the requests carry no Authorization header
#   --storage-class NAME   storage class of the volume (STORAGE_CLASS; default: the cluster's)
#   --access-mode MODE     access mode of the volume (ACCESS_MODE; ReadWriteMany): ReadWriteOnce
#                          for a one-node cluster whose storage has no ReadWriteMany (kind)
#   --start-in SECONDS     START_AT = this far after the replay Job is started (START_IN; 120)
#   --timeout SECONDS      longest wait for one step (TIMEOUT; 21600)
#   --stuck-after SECONDS  how long a pod may wait for an image it cannot pull, a node it does
#                          not fit, or the volume's claim stay Pending, before the run stops
#                          (STUCK_AFTER; 30; more on a cluster that adds nodes on demand)
#   --out DIR              where the report (report.html, report.json), the results
#                          (results-*.parquet) and a captured trace.parquet land (OUT; .)
#
# What it does: copies deploy/k8s to a temporary directory and sets the image and the settings
# there (kustomize `images:` and the settings ConfigMap); creates or updates the API-key secret
# when a key is given; deletes the Jobs and the loader Pod of an earlier run; `kubectl apply -k`
# (the volume, the settings, the loader Pod and the four Jobs, created suspended); copies the
# inputs onto the volume through the loader Pod (`kubectl cp`); then starts each Job
# (unsuspends it) and waits for it to complete (`kubectl wait --for=condition=complete`) before
# the next; sets START_AT just before the replay Job starts; copies the report, the results and
# a captured trace back; deletes the loader Pod. A Job that fails stops the run with its name and
# the command that shows its logs; so does a pod that cannot start (an image the cluster cannot
# pull, no node it fits, a volume claim that stays Pending), within --stuck-after, naming the
# pod, the reason and the fix. The secret tokentrace-capture-key must exist to capture logs
# (docs/kubernetes.md says how to create it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

image=${IMAGE:-} push=${PUSH:-} kind=${KIND:-} ns=${NAMESPACE:-} target=${TARGET_URL:-} model=${MODEL:-} run=${RUN:-}
api_key_file=${API_KEY_FILE:-} storage_class=${STORAGE_CLASS:-} access_mode=${ACCESS_MODE:-}
start_in=${START_IN:-120} timeout=${TIMEOUT:-21600} stuck_after=${STUCK_AFTER:-30} out=${OUT:-.}
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
die() { echo "run.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case $1 in
    --image) image=$2; shift 2 ;;
    --push) push=1; shift ;;
    --kind) kind=$2; shift 2 ;;
    --namespace) ns=$2; shift 2 ;;
    --target-url) target=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --run) run=$2; shift 2 ;;
    --api-key-file) api_key_file=$2; shift 2 ;;
    --storage-class) storage_class=$2; shift 2 ;;
    --access-mode) access_mode=$2; shift 2 ;;
    --start-in) start_in=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --stuck-after) stuck_after=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage ;;
    --) shift; break ;;
    -*) echo "run.sh: unknown flag $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "run.sh: give the logs to capture, or one trace (.parquet)" >&2; usage; }
for f in "$@"; do [ -f "$f" ] || die "$f: no such file"; done
case $start_in in ''|*[!0-9]*) die "--start-in $start_in: want whole seconds" ;; esac
case $timeout in ''|*[!0-9]*) die "--timeout $timeout: want whole seconds" ;; esac
case $stuck_after in ''|*[!0-9]*) die "--stuck-after $stuck_after: want whole seconds" ;; esac
case $access_mode in ''|ReadWriteMany|ReadWriteOnce|ReadWriteOncePod) ;;
  *) die "--access-mode $access_mode: want ReadWriteMany, ReadWriteOnce or ReadWriteOncePod" ;; esac
[ -z "$api_key_file" ] || [ -f "$api_key_file" ] || die "--api-key-file $api_key_file: no such file"

k() { kubectl ${ns:+--namespace "$ns"} "$@"; }
say() { echo "run.sh: $*" >&2; }
kubectl_ns="kubectl ${ns:+--namespace $ns }"

# The inputs: logs, one per capture pod, or one finished trace.
trace=""
if [ $# -eq 1 ] && [[ $1 == *.parquet ]]; then
  trace=$1
else
  pods=$(awk '/^  completions:/ {print $2; exit}' "$here/capture-job.yaml")
  [ "$#" -eq "$pods" ] || die "capture-job.yaml runs $pods capture pods (completions: $pods): give $pods log files (split by time), or change its completions and parallelism"
  for f in "$@"; do
    [[ $f == *.jsonl.gz ]] || die "$f: the capture pods read gzip'd JSON lines (logs/INDEX.jsonl.gz): gzip it, or edit capture-job.yaml"
  done
fi

# The image: built here unless given, pushed or loaded into kind if asked, then written into
# a copy of the tree.
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
if [ -z "$image" ]; then
  build=${BUILD_IMAGE:-$root/deploy/image/build.sh}
  say "building the image with $build"
  image=$("$build" ${IMAGE_NAME:+"$IMAGE_NAME"} | tail -n 1)
  [ -n "$image" ] || die "$build printed no image name"
  if [ -n "$push" ]; then
    say "pushing $image"
    podman push "$image"
  fi
fi
if [ -n "$kind" ]; then
  say "loading $image into the nodes of the kind cluster $kind"
  podman save -o "$tree/image.tar" "$image" || die "podman save $image failed (an image built with Docker: kind load docker-image --name $kind $image)"
  kind load image-archive --name "$kind" "$tree/image.tar"
  rm -f "$tree/image.tar"
elif [ -z "$push" ] && [[ $image == localhost/* ]]; then
  say "note: $image is a local image: a cluster runs it only if it was loaded into its nodes (--kind CLUSTER for kind); a cluster that pulls from a registry needs --push with IMAGE_NAME=REGISTRY/tokentrace:TAG, or --image"
fi
case $image in
  *@*) name=${image%@*} ref="digest: ${image#*@}" ;;
  *) last=${image##*/}
     if [[ $last == *:* ]]; then name=${image%:*} ref="newTag: ${image##*:}"; else name=$image ref="newTag: latest"; fi ;;
esac
cp "$here"/*.yaml "$tree/"
kz=$tree/kustomization.yaml
# API_KEY_PATH is where replay finds the key in its pod: set when there is a secret to mount.
key_path=""
if [ -n "$api_key_file" ]; then
  key_path=/secrets/api/key
  say "storing $api_key_file as the secret tokentrace-api-key"
  k create secret generic tokentrace-api-key --from-file=key="$api_key_file" --dry-run=client -o yaml | k apply -f - >/dev/null
elif k get secret tokentrace-api-key >/dev/null 2>&1; then
  key_path=/secrets/api/key
  say "the replay sends the key of the existing secret tokentrace-api-key"
else
  say "no API key (no --api-key-file, no secret tokentrace-api-key): the requests carry no Authorization header"
fi
edits=(-e "s|^    newName: .*|    newName: $name|" -e "s|^    newTag: .*|    $ref|" -e "s|^      - API_KEY_PATH=.*|      - API_KEY_PATH=$key_path|")
for kv in "TARGET_URL=$target" "MODEL=$model" "RUN=$run"; do
  if [ -n "${kv#*=}" ]; then edits+=(-e "s|^      - ${kv%%=*}=.*|      - $kv|"); fi
done
sed "${edits[@]}" "$here/kustomization.yaml" >"$kz"
grep -q "^    newName: $name\$" "$kz" || die "could not set the image in kustomization.yaml"
awk -v mode="${access_mode:-ReadWriteMany}" -v class="$storage_class" '
  /^  accessModes:/ { print "  accessModes: [\"" mode "\"]"; next }
  { print }
  /^spec:$/ && class != "" { print "  storageClassName: " class }' "$here/volume.yaml" >"$tree/volume.yaml"
say "image $image"

if [ -z "$trace" ]; then
  k get secret tokentrace-capture-key >/dev/null || die "secret tokentrace-capture-key is missing (docs/kubernetes.md: kubectl create secret generic tokentrace-capture-key --from-file=key=FILE)"
fi

# stuck_reason NAME: when the volume's claim, or a pod labelled app.kubernetes.io/name=NAME,
# is in a state that does not end by itself, prints one line: a key (what is stuck, and how),
# a tab, then what, the reason and the fix.
claim_fix="Fix: delete the claim (${kubectl_ns}delete pvc tokentrace-data) and run again with --storage-class NAME of a class that provisions ${access_mode:-ReadWriteMany} volumes (ReadWriteMany: NFS, CephFS, EFS, Azure Files, Filestore; ${kubectl_ns}get storageclass), or on a one-node cluster (kind, minikube) with --access-mode ReadWriteOnce"
stuck_reason() {
  local phase events event pod reason msg
  phase=$(k get pvc tokentrace-data -o jsonpath='{.status.phase}' 2>/dev/null || true)
  if [ "$phase" = Pending ]; then
    events=$(k get events --field-selector involvedObject.kind=PersistentVolumeClaim,involvedObject.name=tokentrace-data \
      --sort-by=.metadata.creationTimestamp -o go-template='{{range .items}}{{.reason}}: {{.message}}{{"\n"}}{{end}}' 2>/dev/null || true)
    event=$(printf '%s\n' "$events" | grep '^ProvisioningFailed' | tail -n 1 || true)
    [ -n "$event" ] || event=$(printf '%s\n' "$events" | grep . | tail -n 1 || true)
    # WaitForFirstConsumer: the claim binds once a pod that mounts it is scheduled; the pod says why not.
    if [[ $event != WaitForFirstConsumer* ]]; then
      printf 'claim\tthe volume claim tokentrace-data is Pending%s: its storage class (%s) does not provision it. %s\n' \
        "${event:+ ($event)}" "${storage_class:-the default}" "$claim_fix"
      return
    fi
  fi
  while IFS=$'\t' read -r pod reason msg; do
    [ -n "$pod" ] || continue
    case $reason in
      ImagePullBackOff|ErrImagePull|InvalidImageName|ErrImageNeverPull)
        if [ "$pod" = tokentrace-loader ]; then
          printf '%s\tpod %s: %s%s: the cluster cannot pull the loader'"'"'s image (busybox, loader-pod.yaml). Fix: mirror it to a registry the cluster pulls from and set it in loader-pod.yaml\n' \
            "$pod image" "$pod" "$reason" "${msg:+ ($msg)}"
        else
          printf '%s\tpod %s: %s%s: the cluster cannot pull %s. Fix: push it to a registry the cluster pulls from (--push with IMAGE_NAME=REGISTRY/tokentrace:TAG, or --image REGISTRY/tokentrace:TAG), or on kind load it into the nodes (--kind CLUSTER; docs/kubernetes.md)\n' \
            "$pod image" "$pod" "$reason" "${msg:+ ($msg)}" "$image"
        fi
        return ;;
      CreateContainerConfigError)
        printf '%s\tpod %s: %s%s. Fix: create the Secret or ConfigMap it names (docs/kubernetes.md)\n' "$pod config" "$pod" "$reason" "${msg:+ ($msg)}"
        return ;;
      Unschedulable)
        if [[ $msg == *olume* ]]; then
          printf '%s\tpod %s: %s%s: the volume claim tokentrace-data does not bind. %s\n' "$pod schedule" "$pod" "$reason" "${msg:+ ($msg)}" "$claim_fix"
        else
          printf '%s\tpod %s: %s%s: no node can run it. Fix: free or add nodes with the CPU and memory it requests (the resources in deploy/k8s/*.yaml), or lower them; on a cluster that adds nodes on demand, a longer --stuck-after\n' \
            "$pod schedule" "$pod" "$reason" "${msg:+ ($msg)}"
        fi
        return ;;
    esac
  done < <(k get pods -l "app.kubernetes.io/name=$1" -o go-template-file="$here/waiting.gotmpl" 2>/dev/null || true)
}

# stop_if_stuck NAME: stops the run when the same thing (pod or claim, and how) has been stuck
# for --stuck-after seconds; a pull that fails, backs off and fails again is one thing.
stuck_since="" stuck_key=""
stop_if_stuck() {
  local line key
  line=$(stuck_reason "$1")
  key=${line%%$'\t'*}
  if [ -z "$line" ] || [ "$key" != "$stuck_key" ]; then
    stuck_since=$SECONDS stuck_key=$key
    return 0
  fi
  [ $((SECONDS - stuck_since)) -lt "$stuck_after" ] || die "${line#*$'\t'} (stuck for ${stuck_after}s or more: stopped instead of waiting up to ${timeout}s)"
}

jobs=(tokentrace-capture tokentrace-compose tokentrace-replay tokentrace-analyze)
say "removing the Jobs and the loader of an earlier run (the volume stays)"
k delete job "${jobs[@]}" --ignore-not-found --wait=true
k delete pod tokentrace-loader --ignore-not-found --wait=true
say "creating the volume, the settings, the loader and the four Jobs (suspended)"
k apply -k "$tree"
end=$((SECONDS + timeout))
until k wait --for=condition=Ready pod/tokentrace-loader --timeout=5s >/dev/null 2>&1; do
  stop_if_stuck tokentrace-loader
  [ "$SECONDS" -lt "$end" ] || die "the loader pod was not ready within ${timeout}s; ${kubectl_ns}describe pod tokentrace-loader says why"
done

# An earlier run's results (and, with logs, its logs and capture parts) must not be pooled
# with this run's.
if [ -n "$trace" ]; then
  k exec tokentrace-loader -- sh -c 'rm -f /data/results-*.parquet /data/report.html'
else
  k exec tokentrace-loader -- sh -c 'rm -rf /data/results-*.parquet /data/report.html /data/logs /data/trace-part-*.parquet && mkdir -p /data/logs'
fi
if [ -n "$trace" ]; then
  say "copying $trace to /data/trace.parquet"
  k cp "$trace" tokentrace-loader:/data/trace.parquet
else
  i=0
  for f in "$@"; do
    say "copying $f to /data/logs/$i.jsonl.gz"
    k cp "$f" "tokentrace-loader:/data/logs/$i.jsonl.gz"
    i=$((i + 1))
  done
fi

# step JOB: start it, then wait until it has completed; a failed Job, or a pod of it that
# cannot start, ends the run.
step() {
  local job=$1 end=$((SECONDS + timeout))
  say "starting $job"
  k patch job "$job" --type=merge -p '{"spec":{"suspend":false}}'
  stuck_since="" stuck_key=""
  while :; do
    if k wait --for=condition=complete --timeout=5s "job/$job" >/dev/null 2>&1; then
      say "$job complete"
      return 0
    fi
    if k wait --for=condition=failed --timeout=1s "job/$job" >/dev/null 2>&1; then
      local hint=""
      if [ "$job" = tokentrace-replay ]; then
        hint=" (exit code 3: a shard's lateness p99 passed --max-lateness, or too many requests failed; add shards or lower the load)"
      fi
      die "$job failed$hint; its logs: ${kubectl_ns}logs job/$job --all-containers"
    fi
    stop_if_stuck "$job"
    [ "$SECONDS" -lt "$end" ] || die "$job did not complete within ${timeout}s"
  done
}

if [ -z "$trace" ]; then
  step tokentrace-capture
  step tokentrace-compose
fi
start_at=$(date -u -d "@$(($(date +%s) + start_in))" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null ||
  date -u -r "$(($(date +%s) + start_in))" +%Y-%m-%dT%H:%M:%SZ)
say "replay shards start together at $start_at"
k patch configmap tokentrace-settings --type=merge -p "{\"data\":{\"START_AT\":\"$start_at\"}}"
step tokentrace-replay
step tokentrace-analyze

# Everything the run made that is worth keeping: the report, every shard's results (and
# their scraped metrics), and the trace when this run captured it.
mkdir -p "$out"
k cp tokentrace-loader:/data/report.html "$out/report.html"
k logs job/tokentrace-analyze >"$out/report.json"
files=$(k exec tokentrace-loader -- sh -c 'cd /data && ls results-*.parquet' || true)
[ -n "$trace" ] || files="$files trace.parquet"
for f in $files; do
  say "copying /data/$f to $out/$f"
  k cp "tokentrace-loader:/data/$f" "$out/$f"
done
k delete pod tokentrace-loader --ignore-not-found --wait=false
say "done: in $out: report.html, report.json," $files "(also on the volume tokentrace-data)"
