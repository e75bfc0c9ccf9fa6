# Shared by the bench scripts that start processes; source it from the
# repository root.

# bench_work NAME: makes WORK, a scratch directory, and PIDS, the processes
# the script starts (append with PIDS+=($!)); on exit, interrupt or
# termination those are stopped and WORK removed.
bench_work() {
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/tokentrace-$1.XXXXXX")
	PIDS=()
	trap bench_cleanup EXIT INT TERM
}

bench_cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}

# bench_need_prometheus NAME: exits 2, saying how to install it, where
# prometheus is not installed (NAME begins the message).
bench_need_prometheus() {
	if ! command -v prometheus >/dev/null; then
		echo "$1: prometheus is not installed (Debian/Ubuntu: apt-get install prometheus)" >&2
		exit 2
	fi
}

# bench_wait_port NAME HOST:PORT...: until something listens at each, in
# turn (10 s at most each; NAME begins the message when nothing does).
bench_wait_port() {
	local name=$1 addr
	shift
	for addr in "$@"; do
		bench_wait_one "$name" "$addr" || return 1
	done
}

bench_wait_one() {
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/${2%:*}/${2##*:}") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "$1: nothing listens on $2" >&2
	return 1
}

# bench_prometheus LISTEN TARGET...: starts Prometheus listening on LISTEN,
# scraping the TARGETs (HOST:PORT) every second as job vllm, with its
# configuration, data and log in WORK; it joins PIDS.
bench_prometheus() {
	local listen=$1 targets
	shift
	targets=$(printf '"%s", ' "$@")
	cat >"$WORK/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: vllm
    static_configs:
      - targets: [${targets%, }]
YAML
	prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/data" \
		--web.listen-address="$listen" --log.level=warn 2>>"$WORK/prometheus.log" &
	PIDS+=($!)
}

# bench_slow_core HOG CPU SECONDS: with SLOWCORE=1 in the environment,
# starts HOG (a build of bench/corehog) on CPU (empty: anywhere) at nice
# SLOW_NICE (default 5), spinning SLOW_SHARE (default 0.5) of every
# SLOW_PERIOD (default 10ms) for SECONDS at most, and prints its process
# id; without SLOWCORE it prints nothing. The replayer's core is then as a
# slower or shared virtual CPU's: what it runs besides the dispatcher
# (goroutines at nice 0) gets a share of it.
bench_slow_core() {
	[ "${SLOWCORE:-}" = 1 ] || return 0
	local pin=""
	[ -n "$2" ] && pin="taskset -c $2"
	$pin nice -n "${SLOW_NICE:-5}" "$1" -share "${SLOW_SHARE:-0.5}" -period "${SLOW_PERIOD:-10ms}" -duration "$3s" >/dev/null 2>&1 &
	echo $!
}

# bench_slow_core_desc: one line saying whether and how the replayer's core
# is slowed (bench_slow_core).
bench_slow_core_desc() {
	if [ "${SLOWCORE:-}" = 1 ]; then
		echo "slower core: bench/corehog spins ${SLOW_SHARE:-0.5} of every ${SLOW_PERIOD:-10ms} at nice ${SLOW_NICE:-5} on the client's core"
	else
		echo "slower core: no (SLOWCORE=1 to reproduce a slower or shared core)"
	fi
}

# bench_steal_ms CPU: the time the hypervisor has taken CPU (a number; empty:
# the whole machine) from this guest since boot, in ms (/proc/stat's steal,
# counted in clock ticks: 10 ms steps at the usual 100 per second). Its
# growth over a run is time in which no thread of the guest ran on that CPU,
# however urgent: a virtual machine's floor that no client goes below.
bench_steal_ms() {
	awk -v cpu="cpu$1" -v hz="$(getconf CLK_TCK)" '$1 == cpu { print $9 * 1000 / hz }' /proc/stat
}
