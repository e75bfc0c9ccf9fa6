#!/usr/bin/env bash
# Client memory of a closed-session replay: a synthetic agentic trace
# (bench/agentic: SESSIONS sessions of ~10 calls, subagents and joins)
# replayed with --sessions closed at SPEED against bench/fastsse (server on
# core 0, client on core 1 where there are 2 cores), the client's RSS
# sampled every second. Memory that follows the sessions under way stays
# flat once the first sessions end; memory that follows the trace grows
# with every call read.
#
#   bench/closed-memory.sh                         # 20,000 sessions, speed 10
#   SESSIONS=1000000 RATE=200 SPEED=50 bench/closed-memory.sh
#
# Environment: SESSIONS (default 20000), RATE (session starts per second
# of the trace, default 2000), SPEED (default 10), EVERY (seconds between
# samples, default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-20000}
RATE=${RATE:-2000}
SPEED=${SPEED:-10}
EVERY=${EVERY:-1}
PORT=${PORT:-18097}
. bench/lib.sh
bench_work closed-memory

go build -o "$WORK/tokentrace" ./cmd/tokentrace
go build -o "$WORK/fastsse" ./bench/fastsse
go build -o "$WORK/agentic" ./bench/agentic
PIN_S="" PIN_C=""
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then PIN_S="taskset -c 0"; PIN_C="taskset -c 1"; fi
"$WORK/agentic" -sessions "$SESSIONS" -rate "$RATE" >"$WORK/trace.jsonl"
$PIN_S "$WORK/fastsse" -addr "127.0.0.1:$PORT" -tokens 4 2>"$WORK/server.log" &
PIDS+=($!)
bench_wait_port closed-memory "127.0.0.1:$PORT"

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
$PIN_C "$WORK/tokentrace" replay --url "http://127.0.0.1:$PORT" --model m --quiet --max-lateness 1h \
	--sessions closed --speed "$SPEED" --out "$WORK/res.parquet" "$WORK/trace.jsonl" >"$WORK/replay.out" 2>"$WORK/replay.err" &
RP=$!
PIDS+=($RP)
printf '%8s %10s\n' seconds rss_mb
t=0
max=0
while kill -0 "$RP" 2>/dev/null; do
	rss=$(ps -o rss= -p "$RP" 2>/dev/null || echo 0)
	rss=${rss// /}
	if [ -n "$rss" ] && [ "$rss" -gt 0 ]; then
		printf '%8d %10.1f\n' "$t" "$(echo "$rss / 1024" | bc -l)"
		[ "$rss" -gt "$max" ] && max=$rss
	fi
	sleep "$EVERY"
	t=$((t + EVERY))
done
wait "$RP" || true
grep -E '^(requests|sessions|lateness)' "$WORK/replay.out" || tail -3 "$WORK/replay.err"
printf 'max sampled RSS %.1f MB for %s calls\n' "$(echo "$max / 1024" | bc -l)" "$(wc -l <"$WORK/trace.jsonl")"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
