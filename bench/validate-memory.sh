#!/usr/bin/env bash
# Memory of validate on a long real trace: N requests (default 1 M) drawn
# from a model fitted on the made-up gateway logs (sessions, shared prefix
# blocks, the sample's burst, about 8 req/s: 1 M requests are 35 hours of
# traffic), validated against a benchmark matrix (or, with SYN=model, a
# synthetic workload of the same size) on two simulator targets that
# differ in prefix caching. Prints wall time, CPU time and max RSS of the
# validate process, for the figure in docs/figures.md.
#
#   bench/validate-memory.sh                 # N=1000000, the matrix, the ablation on
#   N=100000 EXPLAIN=none bench/validate-memory.sh
#
# Environment: N (requests, default 1000000), SYN (matrix or model),
# EXPLAIN (auto, none or ablation; default auto), WORK (scratch directory,
# default a new one under $TMPDIR), KEEP=1 keeps WORK.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000000}
SYN=${SYN:-matrix}
EXPLAIN=${EXPLAIN:-auto}
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/tokentrace-validate.XXXXXX")}
mkdir -p "$WORK"
cleanup() { [[ ${KEEP:-0} == 1 ]] || rm -rf "$WORK"; }
trap cleanup EXIT INT TERM

go build -o "$WORK/tokentrace" ./cmd/tokentrace
go build -o "$WORK/samplelogs" ./testdata/samplelogs/gen
TT="$WORK/tokentrace"
cd "$WORK"
./samplelogs --rate 3 --out gateway.jsonl # the demo's traffic: about 8 req/s
rm -f capture.key
"$TT" capture --new-key-file capture.key --out sample.parquet gateway.jsonl >/dev/null
"$TT" synth fit --out model.json sample.parquet 2>/dev/null
# The sample's rate (requests over its span) gives the duration of N requests.
rate=$("$TT" inspect sample.parquet | awk '$1 == "rate" {print $2}')
secs=$(awk -v n="$N" -v r="$rate" 'BEGIN {printf "%d", n / r + 1}')
"$TT" synth gen --seed 2 --duration "${secs}s" --out real.parquet model.json
"$TT" synth matrix --rows '1024/128@4rps,2048/256@2rps' --row-duration 30s --out matrix.parquet 2>/dev/null
syn=matrix.parquet
[[ $SYN == model ]] && syn=model.json

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "real: $("$TT" inspect real.parquet | awk '$1 == "rows" {print $2}') requests over ${secs} s; synthetic: $syn; --explain $EXPLAIN"
/usr/bin/time -f 'validate: wall %e s, cpu %U+%S s, max RSS %M KB' \
	"$TT" validate -q --explain "$EXPLAIN" --target a=sim --target b=sim:prefix-caching=false real.parquet "$syn" >validate.txt
sed -n 2p validate.txt | cut -c1-300
grep -E '^Why|extra runs' validate.txt || true
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
