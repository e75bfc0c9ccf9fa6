#!/usr/bin/env bash
# A worked postmortem of a prefill/decode fleet in one command: Prometheus
# (if installed) scrapes a simulated disaggregated fleet (one prefill and
# three decode replicas behind one endpoint; one /metrics whose series
# carry pod and role labels) every second; a burst of long prompts queues
# on the prefill replica (bench/pmdemo --fleet replays it and keeps the
# results as a gateway would have logged them, without server timings);
# then `tokentrace postmortem` reads Prometheus per pod with the role label
# and writes the report. Everything it starts is stopped on exit.
#
#   bench/postmortem-pd-demo.sh                  # writes postmortem-pd-demo/incident.{parquet,txt,html,json}
#   OUT=/tmp/pd bench/postmortem-pd-demo.sh
#
# Environment: OUT (default postmortem-pd-demo), FLEET, PROM (loopback
# addresses, defaults 127.0.0.1:18433 and :19433).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-postmortem-pd-demo}
FLEET=${FLEET:-127.0.0.1:18433}
PROM=${PROM:-127.0.0.1:19433}
. bench/lib.sh
bench_need_prometheus postmortem-pd-demo
bench_work pdpmdemo

go build -o "$WORK/tokentrace" ./cmd/tokentrace
go build -o "$WORK/pmdemo" ./bench/pmdemo
mkdir -p "$OUT"
# The fleet of bench/pmdemo/pdincident (its Fleet configuration).
"$WORK/tokentrace" sim --listen "$FLEET" --prefill-replicas 1 --decode-replicas 3 \
	--replica-config prefill.max-num-batched-tokens=512 >>"$WORK/sim.log" 2>&1 &
PIDS+=($!)
bench_prometheus "$PROM" "$FLEET"
bench_wait_port postmortem-pd-demo "$FLEET" "$PROM"
# pmdemo waits for three scrapes of the fleet, so the incident starts
# inside Prometheus' history.
"$WORK/pmdemo" --prometheus "http://$PROM" --fleet "http://$FLEET" --out "$OUT/incident.parquet"
"$WORK/tokentrace" postmortem --prometheus "http://$PROM" --step 1s --instance-label pod --role-label role \
	--tail p90 --tail-metric ttft --html "$OUT/incident.html" --json "$OUT/incident.json" "$OUT/incident.parquet" | tee "$OUT/incident.txt"
echo "postmortem-pd-demo: wrote $OUT/incident.txt, $OUT/incident.html, $OUT/incident.json (series in $OUT/incident.metrics.parquet)" >&2
