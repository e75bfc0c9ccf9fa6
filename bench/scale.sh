#!/usr/bin/env bash
# Scale benchmark: N requests of made-up gateway logs (bench/scalelogs,
# piped: no disk for the logs) through capture -> export/import (Mooncake)
# -> synth fit -> replay (against bench/fastsse) -> analyze, printing wall
# time, CPU time and max RSS of each stage's process, so that anyone can
# rerun the scale table in docs/figures.md.
#
#   N=1000000 bench/scale.sh            # one size
#   SIZES="1000000 10000000" bench/scale.sh
#
# Environment: SIZES (default "1000000"), WORK (scratch directory, default a
# new one under $TMPDIR; about 100 B of disk per request), STAGES (default
# "capture import fit replay analyze"), CAPTURE_FLAGS (default
# "--block-size 0": usage numbers, no tokenizing), REPLAY_RATE (req/s,
# default 5000), REPLAY_DURATION (default 60s), KEEP=1 keeps WORK.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-${N:-1000000}}
STAGES=${STAGES:-"capture import fit replay analyze"}
CAPTURE_FLAGS=${CAPTURE_FLAGS:---block-size 0}
REPLAY_RATE=${REPLAY_RATE:-5000}
REPLAY_DURATION=${REPLAY_DURATION:-60s}
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/tokentrace-scale.XXXXXX")}
mkdir -p "$WORK"
cleanup() {
	[[ -n ${SSE_PID:-} ]] && kill "$SSE_PID" 2>/dev/null || true
	[[ ${KEEP:-0} == 1 ]] || rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

go build -o "$WORK/tokentrace" ./cmd/tokentrace
go build -o "$WORK/scalelogs" ./bench/scalelogs
go build -o "$WORK/fastsse" ./bench/fastsse
TT="$WORK/tokentrace"

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %-10s %-34s %9s %9s %9s %s\n' stage requests input wall_s cpu_s maxrss_MB note

# run STAGE N INPUT NOTE -- command...: time one stage (its stdin is the
# script's).
run() {
	local stage=$1 n=$2 input=$3 note=$4
	shift 5
	local tf="$WORK/time.txt"
	if ! /usr/bin/time -f '%e %U %S %M' -o "$tf" "$@" >"$WORK/$stage.out" 2>"$WORK/$stage.err"; then
		echo "$stage failed:" >&2
		tail -5 "$WORK/$stage.err" >&2
		exit 1
	fi
	read -r wall user sys rss <"$tf"
	printf '%-8s %-10s %-34s %9.1f %9.1f %9.0f %s\n' "$stage" "$n" "$input" "$wall" "$(echo "$user + $sys" | bc)" "$((rss / 1024))" "$note"
}

for n in $SIZES; do
	for stage in $STAGES; do
		case $stage in
		capture)
			# shellcheck disable=SC2086
			"$WORK/scalelogs" -n "$n" | run capture "$n" "gateway logs, piped" "$CAPTURE_FLAGS" -- \
				"$TT" capture $CAPTURE_FLAGS --temp-dir "$WORK" --out "$WORK/trace-$n.parquet" -
			read -r wall user sys rss <"$WORK/time.txt"
			mb=$(sed -n 's/.*inputs, \([0-9.]*\) MB).*/\1/p' "$WORK/capture.err")
			echo "         capture read $mb MB: $(echo "scale=0; $mb / ($user + $sys)" | bc) MB per CPU-second" ;;
		import)
			"$TT" export --format mooncake --out "$WORK/mooncake-$n.jsonl" "$WORK/trace-$n.parquet" >/dev/null 2>&1
			run import "$n" "Mooncake JSONL" "" -- \
				"$TT" import --format mooncake --out "$WORK/imported-$n.parquet" "$WORK/mooncake-$n.jsonl"
			rm -f "$WORK/mooncake-$n.jsonl" "$WORK/imported-$n.parquet" ;;
		fit)
			run fit "$n" "trace-$n.parquet" "" -- \
				"$TT" synth fit --out "$WORK/model-$n.json" "$WORK/trace-$n.parquet" ;;
		replay)
			[[ -n ${SSE_PID:-} ]] || {
				"$WORK/fastsse" -addr 127.0.0.1:18093 -tokens 4 >/dev/null 2>&1 &
				SSE_PID=$!
				sleep 0.5
			}
			# The trace's own rate is scaled to REPLAY_RATE.
			rate=$("$TT" inspect --json "$WORK/trace-$n.parquet" | sed -n 's/.*"rate_rps": *\([0-9.]*\).*/\1/p' | head -1)
			speed=$(echo "scale=3; $REPLAY_RATE / $rate" | bc)
			run replay "$n" "trace-$n.parquet at ${REPLAY_RATE}/s" "speed $speed, $REPLAY_DURATION" -- \
				"$TT" replay --url http://127.0.0.1:18093 --api completions --force-api --speed "$speed" --duration "$REPLAY_DURATION" --drain 5s \
				--out "$WORK/results-$n.parquet" "$WORK/trace-$n.parquet" ;;
		analyze)
			[[ -f $WORK/results-$n.parquet ]] || continue
			run analyze "$n" "results-$n.parquet" "" -- \
				"$TT" analyze "$WORK/results-$n.parquet" ;;
		esac
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
