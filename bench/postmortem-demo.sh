#!/usr/bin/env bash
# A worked postmortem in one command: Prometheus (if installed) scrapes two
# built-in simulators every second; a burst overflows the batch of one of
# them (bench/pmdemo replays both servers' parts at once and pools the
# results as a gateway would have logged them, without server timings);
# then `tokentrace postmortem` reads Prometheus and writes the report.
# Everything it starts is stopped on exit.
#
#   bench/postmortem-demo.sh                  # writes postmortem-demo/incident.{parquet,txt,html,json}
#   OUT=/tmp/pm bench/postmortem-demo.sh
#
# Environment: OUT (default postmortem-demo), SIM_A, SIM_B, PROM (loopback
# addresses, defaults 127.0.0.1:18431, :18432, :19431).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-postmortem-demo}
SIM_A=${SIM_A:-127.0.0.1:18431}
SIM_B=${SIM_B:-127.0.0.1:18432}
PROM=${PROM:-127.0.0.1:19431}
. bench/lib.sh
bench_need_prometheus postmortem-demo
bench_work pmdemo

go build -o "$WORK/tokentrace" ./cmd/tokentrace
go build -o "$WORK/pmdemo" ./bench/pmdemo
mkdir -p "$OUT"
for addr in "$SIM_A" "$SIM_B"; do
	"$WORK/tokentrace" sim --listen "$addr" --max-num-seqs 16 --max-num-batched-tokens 512 >>"$WORK/sim.log" 2>&1 &
	PIDS+=($!)
done
bench_prometheus "$PROM" "$SIM_A" "$SIM_B"
bench_wait_port postmortem-demo "$SIM_A" "$SIM_B" "$PROM"
# pmdemo waits for three scrapes of both servers, so the incident starts
# inside Prometheus' history.
"$WORK/pmdemo" --prometheus "http://$PROM" --a "http://$SIM_A" --b "http://$SIM_B" --out "$OUT/incident.parquet"
"$WORK/tokentrace" postmortem --prometheus "http://$PROM" --step 1s --tail p90 --tail-metric e2e \
	--html "$OUT/incident.html" --json "$OUT/incident.json" "$OUT/incident.parquet" | tee "$OUT/incident.txt"
echo "postmortem-demo: wrote $OUT/incident.txt, $OUT/incident.html, $OUT/incident.json (series in $OUT/incident.metrics.parquet)" >&2
