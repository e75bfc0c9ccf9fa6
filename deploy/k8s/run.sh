#!/usr/bin/env bash
# Runs the whole pipeline on Kubernetes, in order: capture → compose → replay → analyze.
#
#   deploy/k8s/run.sh [flags] LOG...      capture the logs (one file per capture pod), then the rest
#   deploy/k8s/run.sh [flags] TRACE.parquet  replay and analyze a finished trace
#
# Flags (each also as an environment variable):
#   --image IMAGE          the image to run (IMAGE); default: build it with deploy/image/build.sh
#                          (BUILD_IMAGE overrides that command) and use the name it prints
#   --push                 push the image it built (PUSH=1) with podman: for a registry the
#                          cluster pulls from (build it as one: --image is then not given, so
#                          give its name with IMAGE_NAME=registry.example.com/tokentrace:v1)
#   --namespace NS         namespace of every object (NAMESPACE; default: kubectl's current one)
#   --target-url URL       the server to replay against (TARGET_URL)
#   --model NAME           model name of every request (MODEL)
#   --run NAME             run label, request ids RUN-SEQ (RUN)
#   --start-in SECONDS     START_AT = this far after the replay Job is started (START_IN; 120)
#   --timeout SECONDS      longest wait for one step (TIMEOUT; 21600)
#   --out DIR              where report.html and report.json land (OUT; .)
#
# What it does: copies deploy/k8s to a temporary directory and sets the image and the settings
# there (kustomize `images:` and the settings ConfigMap); deletes the Jobs and the loader Pod of
# an earlier run; `kubectl apply -k` (the volume, the settings, the loader Pod and the four Jobs,
# created suspended); copies the inputs onto the volume through the loader Pod (`kubectl cp`);
# then starts each Job (unsuspends it) and waits for it to complete (`kubectl wait
# --for=condition=complete`) before the next; sets START_AT just before the replay Job starts;
# copies report.html back; deletes the loader Pod. A Job that fails stops the run with its
# name and the command that shows its logs. The secrets tokentrace-capture-key (logs only) and
# tokentrace-api-key must exist (docs/kubernetes.md says how to create them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

image=${IMAGE:-} push=${PUSH:-} ns=${NAMESPACE:-} target=${TARGET_URL:-} model=${MODEL:-} run=${RUN:-}
start_in=${START_IN:-120} timeout=${TIMEOUT:-21600} out=${OUT:-.}
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
die() { echo "run.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case $1 in
    --image) image=$2; shift 2 ;;
    --push) push=1; shift ;;
    --namespace) ns=$2; shift 2 ;;
    --target-url) target=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --run) run=$2; shift 2 ;;
    --start-in) start_in=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
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

k() { kubectl ${ns:+--namespace "$ns"} "$@"; }
say() { echo "run.sh: $*" >&2; }

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

# The image: built here unless given, then written into a copy of the tree.
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
case $image in
  *@*) name=${image%@*} ref="digest: ${image#*@}" ;;
  *) last=${image##*/}
     if [[ $last == *:* ]]; then name=${image%:*} ref="newTag: ${image##*:}"; else name=$image ref="newTag: latest"; fi ;;
esac
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
cp "$here"/*.yaml "$tree/"
kz=$tree/kustomization.yaml
edits=(-e "s|^    newName: .*|    newName: $name|" -e "s|^    newTag: .*|    $ref|")
for kv in "TARGET_URL=$target" "MODEL=$model" "RUN=$run"; do
  if [ -n "${kv#*=}" ]; then edits+=(-e "s|^      - ${kv%%=*}=.*|      - $kv|"); fi
done
sed "${edits[@]}" "$here/kustomization.yaml" >"$kz"
grep -q "^    newName: $name\$" "$kz" || die "could not set the image in kustomization.yaml"
say "image $image"

# Secrets the Jobs mount.
secrets=(tokentrace-api-key)
[ -z "$trace" ] && secrets+=(tokentrace-capture-key)
for s in "${secrets[@]}"; do
  k get secret "$s" >/dev/null || die "secret $s is missing (docs/kubernetes.md: kubectl create secret generic $s --from-file=key=FILE)"
done

jobs=(tokentrace-capture tokentrace-compose tokentrace-replay tokentrace-analyze)
say "removing the Jobs and the loader of an earlier run (the volume stays)"
k delete job "${jobs[@]}" --ignore-not-found --wait=true
k delete pod tokentrace-loader --ignore-not-found --wait=true
say "creating the volume, the settings, the loader and the four Jobs (suspended)"
k apply -k "$tree"
k wait --for=condition=Ready pod/tokentrace-loader --timeout="${timeout}s"

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

# step JOB: start it, then wait until it has completed; a failed Job ends the run.
step() {
  local job=$1 end=$((SECONDS + timeout))
  say "starting $job"
  k patch job "$job" --type=merge -p '{"spec":{"suspend":false}}'
  while :; do
    if k wait --for=condition=complete --timeout=30s "job/$job" >/dev/null 2>&1; then
      say "$job complete"
      return 0
    fi
    if k wait --for=condition=failed --timeout=1s "job/$job" >/dev/null 2>&1; then
      local hint=""
      if [ "$job" = tokentrace-replay ]; then
        hint=" (exit code 3: a shard's lateness p99 passed --max-lateness, or too many requests failed; add shards or lower the load)"
      fi
      die "$job failed$hint; its logs: kubectl ${ns:+--namespace $ns }logs job/$job --all-containers"
    fi
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

mkdir -p "$out"
k cp tokentrace-loader:/data/report.html "$out/report.html"
k logs job/tokentrace-analyze >"$out/report.json"
k delete pod tokentrace-loader --ignore-not-found --wait=false
say "done: $out/report.html, $out/report.json (results-*.parquet stay on the volume tokentrace-data)"
