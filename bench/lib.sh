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
