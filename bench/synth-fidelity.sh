#!/usr/bin/env bash
# synth fidelity on the public traces: fit, generate 5 seeds, check each
# against the real trace; prints every check's value beside its noise
# floor (docs/figures.md, "synth: fidelity on conversations").
#
#   bench/synth-fidelity.sh [TRACES_DIR [WEKA_DIR]]
#
# TRACES_DIR holds mooncake/ and azure_llm_2023/ (default: $TOKENTRACE_TRACES,
# else ../shared/traces); WEKA_DIR a folder of WEKA kv-cache-tester
# conversations (trace_NNNN.json; skipped when absent). The demo's trace is
# made here. Needs go and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
traces=${1:-${TOKENTRACE_TRACES:-../shared/traces}}
weka=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/tt" ./cmd/tokentrace
tt=$work/tt
echo "load before: $(uptime)"
go run ./testdata/samplelogs/gen --seed 1 --rate 3 --duration 60s --out "$work/logs.jsonl.gz" >/dev/null
$tt capture --out "$work/demo.parquet" "$work/logs.jsonl.gz" 2>/dev/null
runs=("demo:$work/demo.parquet")
if [ -f "$traces/mooncake/conversation_trace.jsonl" ]; then
	$tt import --format mooncake --out "$work/mc.jsonl" "$traces/mooncake/conversation_trace.jsonl" >/dev/null
	python3 -c "
import json,sys
out=open(sys.argv[2],'w')
for l in open(sys.argv[1]):
    d=json.loads(l)
    if 'tokentrace_meta' in d or d['arrival_ns']<600e9: out.write(l)
" "$work/mc.jsonl" "$work/mc10.jsonl"
	runs+=("mooncake-10min:$work/mc10.jsonl")
fi
for f in code conv; do
	if [ -f "$traces/azure_llm_2023/AzureLLMInferenceTrace_$f.csv" ]; then
		$tt import --format azure --out "$work/az$f.parquet" "$traces/azure_llm_2023/AzureLLMInferenceTrace_$f.csv" >/dev/null
		runs+=("azure-$f:$work/az$f.parquet")
	fi
done
if [ -n "$weka" ] && [ -d "$weka" ]; then
	cat "$weka"/*.json | $tt import --format weka --out "$work/weka.parquet" - >/dev/null
	runs+=("weka:$work/weka.parquet")
fi
for run in "${runs[@]}"; do
	name=${run%%:*} real=${run#*:}
	$tt synth fit --out "$work/$name.model.json" "$real" >/dev/null 2>&1
	for s in 1 2 3 4 5; do
		$tt synth gen --seed $s --out "$work/$name.$s.parquet" "$work/$name.model.json" >/dev/null 2>&1
		$tt synth check --json "$real" "$work/$name.$s.parquet" >"$work/$name.$s.json" 2>/dev/null || true
	done
	python3 - "$name" "$work/$name" <<'PY'
import json, sys
name, base = sys.argv[1], sys.argv[2]
reps = [json.load(open(f"{base}.{s}.json")) for s in range(1, 6)]
names = [c["name"] for c in reps[0]["checks"]]
r0 = reps[0]
print(f"\n### {name}: {r0['real']['records']} requests, {r0['real']['sessions']} sessions; confidence {100*r0['confidence']:.0f} % (each check {100*r0['check_confidence']:.2f} %)")
print("| check | " + " | ".join(f"seed {s} value / floor" for s in range(1, 6)) + " | within floor |")
print("|---|" + "---|" * 6)
for n in names:
    cells, within = [], 0
    for rep in reps:
        c = next((c for c in rep["checks"] if c["name"] == n), None)
        if c is None or c.get("skipped"):
            cells.append("skipped"); within += 1; continue
        ok = c["value"] <= c["noise_floor"]
        within += ok
        cells.append(f"{c['value']:.4f} / {c['noise_floor']:.4f}" + ("" if c["pass"] else " **FAIL**"))
    print(f"| {n} | " + " | ".join(cells) + f" | {within}/5 |")
ru = [abs(r["real"]["prefix_reuse"] - r["synth"]["prefix_reuse"]) for r in reps]
print(f"| prefix reuse real {r0['real']['prefix_reuse']:.3f}, synthetic | " + " | ".join(f"{r['synth']['prefix_reuse']:.3f}" for r in reps) + f" | {sum(d <= 0.03 for d in ru)}/5 within 3 points |")
print(f"passes: {sum(r['pass'] for r in reps)}/5; every check within its floor: {sum(all(c.get('skipped') or c['value'] <= c['noise_floor'] for c in r['checks']) for r in reps)}/5")
PY
done
echo
echo "load after: $(uptime)"
