#!/usr/bin/env bash
# Runs on one machine what deploy/k8s runs on a cluster, as local processes,
# and checks that sharding does not change the answer:
#   1. made-up gateway logs (stand-in for production), split by time into
#      SHARDS files → SHARDS capture processes, each writing a part (--part,
#      what the capture Job's pods do) → compose → trace.parquet (the compose
#      Job); a single capture of all the logs must give the same rows
#      (lengths, arrivals, categories, blocks, turns; sessions up to a
#      relabelling)
#   2. a simulator server (`tokentrace sim`) as the shared target, fresh for
#      each of the two runs
#   3. a single-process replay of the trace, then N replay shards started as
#      separate processes on one --start-at (what the replay Job's pods do)
#   4. analyze of the pooled shards (what the analyze Job does) beside the
#      single-process analysis: request counts must be equal; percentiles
#      should agree within run-to-run noise (printed, not asserted).
# Usage: deploy/local-run.sh [SHARDS] [OUTDIR]     (defaults: 4, a temp dir)
# LOCAL_RUN_LOGS_FOR (a duration, default 60s) sets the span of the logs;
# LOCAL_RUN_MAX_LATENESS, when set, is the replays' --max-lateness (a loaded
# machine's tests that check the files, not the timing, loosen it).
set -euo pipefail
shards=${1:-4}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${2:-$(mktemp -d)}
mkdir -p "$out"
export PATH="$PATH:/usr/local/go/bin"
bin="$out/tokentrace"
(cd "$root" && go build -o "$bin" ./cmd/tokentrace)
cd "$out"
replay_flags=()
if [ -n "${LOCAL_RUN_MAX_LATENESS:-}" ]; then replay_flags+=(--max-lateness "$LOCAL_RUN_MAX_LATENESS"); fi
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

(cd "$root" && go run ./testdata/samplelogs/gen --rate 3 --duration "${LOCAL_RUN_LOGS_FOR:-60s}" --out "$out/gateway.jsonl")
rm -f capture.key trace-part-*.parquet
"$bin" capture --new-key-file capture.key --out single-capture.jsonl gateway.jsonl 2> capture-single.log
echo "== $shards capture parts as separate processes, then compose"
python3 - "$shards" <<'PY'
import sys
n = int(sys.argv[1])
lines = open("gateway.jsonl").readlines()
# The generator writes in arrival order: equal line counts are consecutive
# time ranges, as an hour per file would be.
for i in range(n):
    open(f"logs-{i}.jsonl", "w").writelines(lines[i * len(lines) // n:(i + 1) * len(lines) // n])
PY
cpids=()
for i in $(seq 0 $((shards - 1))); do
  "$bin" capture --key-file capture.key --part "$i" --out "trace-part-$i.parquet" "logs-$i.jsonl" 2> "capture-$i.log" &
  cpids+=($!)
done
for p in "${cpids[@]}"; do wait "$p"; done
"$bin" compose --out trace.parquet 'trace-part-*.parquet'
"$bin" compose --out composed.jsonl 'trace-part-*.parquet' 2>/dev/null
python3 - <<'PY'
import json, sys
def rows(name):
    with open(name) as f:
        return [r for r in map(json.loads, f) if "tokentrace_meta" not in r]
single, composed = rows("single-capture.jsonl"), rows("composed.jsonl")
if len(single) != len(composed):
    sys.exit(f"composed parts have {len(composed)} rows, the single capture {len(single)}")
cols = ("arrival_ns", "input_tokens", "output_tokens", "category", "prefix_tokens", "prefix_blocks", "turn")
s2c, c2s = {}, {}
for i, (s, c) in enumerate(zip(single, composed)):
    for k in cols:
        if s.get(k) != c.get(k):
            sys.exit(f"row {i}: {k} is {c.get(k)!r} in the composed parts, {s.get(k)!r} in the single capture")
    a, b = s.get("session", 0), c.get("session", 0)
    if s2c.setdefault(a, b) != b or c2s.setdefault(b, a) != a:
        sys.exit(f"row {i}: session {b} of the composed parts is not one session of the single capture")
print(f"capture parts composed = single capture: {len(single)} rows, {len(s2c) - (0 in s2c)} sessions")
PY

# A fresh simulator per phase: a second run against a warm prefix cache
# would be faster for that reason alone.
# start_sim NAME: a simulator on a free loopback port (another port if the
# one drawn is taken), its log in sim-NAME.log; url is where it answers.
start_sim() {
  local try pid
  for try in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 20000))
    "$bin" sim --listen "127.0.0.1:$port" --per-request-metrics > "sim-$1.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
      if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
        pids+=("$pid")
        url="http://127.0.0.1:$port"
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break # it exited: the port was taken
      sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
  done
  echo "the simulator did not start (sim-$1.log):" >&2
  cat "sim-$1.log" >&2
  exit 1
}

start_sim single
echo "== single-process replay"
"$bin" replay --quiet "${replay_flags[@]}" --url "$url" --model sim-llama3-8b --out single.parquet trace.parquet

kill "${pids[@]}" 2>/dev/null || true
start_sim shards
echo "== $shards replay shards as separate processes"
start=$(date -u -d '+15 sec' +%Y-%m-%dT%H:%M:%SZ)  # room for 12 clock probes
spids=()
for i in $(seq 0 $((shards - 1))); do
  "$bin" replay --quiet "${replay_flags[@]}" --url "$url" --model sim-llama3-8b --shard "$i/$shards" --start-at "$start" \
    --out "results-$i.parquet" trace.parquet > "shard-$i.log" 2>&1 &
  spids+=($!)
done
for i in "${!spids[@]}"; do
  if ! wait "${spids[$i]}"; then
    echo "replay shard $i failed (shard-$i.log):" >&2
    cat "shard-$i.log" >&2
    exit 1
  fi
done
kill "${pids[@]}" 2>/dev/null || true

parts=()
for i in $(seq 0 $((shards - 1))); do parts+=("results-$i.parquet"); done
"$bin" analyze --json "${parts[@]}" > pooled.json
"$bin" analyze --json single.parquet > single.json
python3 - "$shards" <<'PY'
import json, sys
p, s = json.load(open("pooled.json")), json.load(open("single.json"))
print(f"{'':22}{'single':>12}{'pooled ' + sys.argv[1] + ' shards':>20}")
print(f"{'requests':22}{s['requests']:>12}{p['requests']:>20}")
print(f"{'ok':22}{s['completed']:>12}{p['completed']:>20}")
for m in ("ttft_ms", "tpot_ms", "e2e_ms", "lateness_ms"):
    for q in ("p50", "p99"):
        if m in s and m in p:
            print(f"{m + ' ' + q:22}{s[m][q]:>12.2f}{p[m][q]:>20.2f}")
c = p.get("shard_clocks")
if c:
    print(f"shard clocks: offsets spread {c['offset_spread_ms']:.2f} ms (each ±{c['offset_error_ms']:.2f} ms at most), start errors spread {c['start_error_spread_ms']:.2f} ms")
if s["requests"] != p["requests"] or s["completed"] != p["completed"]:
    sys.exit("pooled shards and the single replay disagree on request counts")
print("request counts agree")
PY
echo "files in $out"
