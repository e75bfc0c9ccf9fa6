#!/usr/bin/env bash
# The README's replay example (sample gateway logs at --rate 3, captured,
# replayed against the default built-in simulator) RUNS times, each beside
# HOGS busy neighbours (bench/neighbours.sh's bounded busy loops). A
# fault-free simulator must fail no request, however loaded the machine:
# each run prints its failures, the client's lateness, the simulator's
# own lateness and replay's exit code (3 when the lateness gate failed),
# with the load average; the last line sums the failures.
#
#   bench/readme-replays.sh                  # 50 runs, 2 hogs
#   RUNS=10 HOGS=4 bench/readme-replays.sh
#
# Environment: RUNS (default 50), HOGS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-50}
HOGS=${HOGS:-2}
. bench/lib.sh
bench_work readme-replays

go build -o "$WORK/tokentrace" ./cmd/tokentrace
TT="$WORK/tokentrace"
go run ./testdata/samplelogs/gen --rate 3 --out "$WORK/gateway.jsonl" >/dev/null 2>&1
"$TT" capture --new-key-file "$WORK/capture.key" --out "$WORK/trace.parquet" "$WORK/gateway.jsonl" >/dev/null 2>&1

printf 'host: %s CPUs; %d runs of the README replay beside %d busy loops\n' "$(nproc)" "$RUNS" "$HOGS"
runs=0 requests=0 failed=0
for r in $(seq "$RUNS"); do
	hogs=()
	for _ in $(seq "$HOGS"); do
		# bounded: a hog never outlives its run by more than a minute
		timeout 180 sh -c 'while :; do :; done' &
		hogs+=($!)
		PIDS+=($!)
	done
	sleep 1
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	rc=0
	"$TT" replay --quiet --out "$WORK/results.parquet" "$WORK/trace.parquet" >"$WORK/out" 2>"$WORK/err" || rc=$?
	for h in "${hogs[@]}"; do kill "$h" 2>/dev/null || true; done
	line=$(grep '^requests ' "$WORK/out" || true)
	sent=$(sed -n 's/^requests *\([0-9]*\) sent.*/\1/p' <<<"$line")
	fail=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
	runs=$((runs + 1))
	requests=$((requests + ${sent:-0}))
	failed=$((failed + ${fail:-0}))
	printf 'run %2d  load %s  exit %d  %s  %s  simulator: %s\n' "$r" "$load" "$rc" "${line:-no summary}" \
		"$(grep '^lateness' "$WORK/out" | tr -s ' ')" "$(sed -n 's/^simulator  //p' "$WORK/out" | cut -c1-60)"
	grep -hE '^ +[0-9]+ × ' "$WORK/out" || true
done
printf 'total: %d runs, %d requests sent, %d failed\n' "$runs" "$requests" "$failed"
