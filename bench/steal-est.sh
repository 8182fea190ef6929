#!/usr/bin/env bash
# The steal estimate (event hypervisor-estimated, common/steal_est.h): its cost and its
# error here, in one run.
#
# Cost, side by side in interleaved rounds (medians, spread in brackets):
#   - per sample: the sampler's BPF program (on_sample) with the estimate (it reads the
#     hrtimer's expiry: two bpf_probe_read_kernel) and without (--no-steal-estimate),
#     from the kernel's own run-time statistics (kernel.bpf_stats_enabled, switched on
#     for the run and restored), without -g: the program's cheapest path, where the
#     estimate's share is largest;
#   - end to end: wall and CPU of `record -F HZ -g -- fixedwork` (fixed work on 2
#     threads) with and without the estimate, and their ratio.
# Error, ROUNDS times: gap-spinner (tests/fixtures/steal) under `record -F HZ` logs
#   every gap of at least THRESHOLD ns in which it was not switched out; the estimate
#   for its thread is printed beside their total (the ground truth of test-steal-est-live),
#   with the count of gaps. IO_LOAD=1 adds direct-I/O writers (their interrupts and the
#   host's I/O work make gaps); THRESHOLD moves the estimate's threshold
#   (VIPROF_STEAL_EST_THRESHOLD_NS) and the spinner's together, to study the rule;
#   SECONDS_PER_ROUND (default 5) lengthens each round where the host takes little;
#   ERROR_ONLY=1 skips the cost part.
# Usage: bench/steal-est.sh [BUILD_DIR] [ROUNDS] [HZ]   (root)
set -euo pipefail
B=$(cd "${1:-build}" && pwd); R=${2:-3}; HZ=${3:-4000}
VP=$B/cli/viprof
FW=$B/bench/fixedwork
GS=$B/tests/gap-spinner
TH=${THRESHOLD:-100000}
SEC=${SECONDS_PER_ROUND:-5}
[ "$(id -u)" = 0 ] || { echo "bench/steal-est.sh: needs root (BPF)" >&2; exit 1; }
for x in "$FW" "$GS"; do
	[ -x "$x" ] || { echo "bench/steal-est.sh: $x missing; build it (cmake --build $B)" >&2; exit 1; }
done
command -v bpftool >/dev/null || { echo "bench/steal-est.sh: bpftool missing (apt-get install bpftool)" >&2; exit 1; }
T=$(mktemp -d /tmp/vp-steal-est-bench.XXXXXX)
STATS0=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() { sysctl -qw kernel.bpf_stats_enabled="$STATS0"; rm -rf "$T"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE
med() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
spread() { sort -n | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f-%.2f", lo, hi}'; }

# ns per run of the sampler's program while `record -a -F HZ` runs 4 s (ARGS extra).
per_sample() {
	rm -rf "$T/s.bpf"
	"$VP" record -q -a -F "$HZ" -d 4 -o "$T/s.bpf" "$@" >/dev/null 2>&1 &
	local pid=$!
	sleep 3.5
	bpftool prog show -j 2>/dev/null | python3 -c 'import json,sys
t=n=0
for p in json.load(sys.stdin):
    if p.get("name") == "on_sample":
        t += p.get("run_time_ns", 0); n += p.get("run_cnt", 0)
print("%.0f" % (t / n) if n else "nan")'
	wait "$pid"
}
# run NAME CMD...: appends "wall cpu" of the whole command (children included).
run() {
	local name=$1; shift
	local s e
	s=$(date +%s.%N)
	/usr/bin/time -f "%U %S" -o "$T/time" "$@" >/dev/null 2>"$T/$name.err" || { cat "$T/$name.err" >&2; exit 1; }
	e=$(date +%s.%N)
	echo "$(echo "$e - $s" | bc) $(awk '{print $1 + $2}' "$T/time")" >>"$T/$name"
}

if [ -z "${ERROR_ONLY:-}" ]; then
echo "== cost of the steal estimate at -F $HZ, $R interleaved rounds"
sysctl -qw kernel.bpf_stats_enabled=1
for r in $(seq 1 "$R"); do
	per_sample >>"$T/ns.est"
	per_sample --no-steal-estimate >>"$T/ns.off"
	rm -rf "$T/s.est" "$T/s.off"
	run est "$VP" record -q -F "$HZ" -g -o "$T/s.est" -- "$FW" 200 2
	run off "$VP" record -q -F "$HZ" -g --no-steal-estimate -o "$T/s.off" -- "$FW" 200 2
done
e=$(med <"$T/ns.est"); o=$(med <"$T/ns.off")
printf "  BPF on_sample per sample: with the estimate %s ns (%s), without %s ns (%s): +%.0f ns, x%.3f\n" \
	"$e" "$(spread <"$T/ns.est")" "$o" "$(spread <"$T/ns.off")" "$(echo "$e - $o" | bc -l)" "$(echo "$e / $o" | bc -l)"
for k in 1 2; do
	ew=$(cut -d' ' -f$k "$T/est" | med); ow=$(cut -d' ' -f$k "$T/off" | med)
	printf "  record -g -- fixedwork, %s: with %.2f s (%s), without %.2f s (%s): x%.3f\n" "$([ $k = 1 ] && echo wall || echo cpu)" \
		"$ew" "$(cut -d' ' -f$k "$T/est" | spread)" "$ow" "$(cut -d' ' -f$k "$T/off" | spread)" "$(echo "$ew / $ow" | bc -l)"
done
fi

echo "== error against gap-spinner's own gaps (>= $TH ns, no switch), -F $HZ, $R rounds of $SEC s${IO_LOAD:+, with I/O load}"
for r in $(seq 1 "$R"); do
	rm -rf "$T/s.gap"
	if [ -n "${IO_LOAD:-}" ]; then
		for i in 1 2 3; do dd if=/dev/zero of="$T/dd$i" bs=4M count=400 oflag=direct 2>/dev/null & done
	fi
	VIPROF_STEAL_EST_THRESHOLD_NS=$TH "$VP" record -q -F "$HZ" -o "$T/s.gap" -- "$GS" "$SEC" "$TH" >"$T/gaps" 2>/dev/null
	wait
	rm -f "$T"/dd*
	tid=$(awk '/^tid/{print $2}' "$T/gaps")
	est=$("$VP" report "$T/s.gap" --tid "$tid" -F json 2>/dev/null | python3 -c 'import json,sys
print(json.load(sys.stdin)["totals"].get("hypervisor-estimated", {}).get("weight", 0))')
	awk -v est="$est" '/^host_gaps/{n=$2; t=$3} /^both_jumped/{b=$3} /^mono_only/{m=$3}
		END {printf "  round: %d gaps, %.2f ms (charged as running %.2f, left out by a steal clock %.2f); estimate %.2f ms; error %+.2f ms\n",
		     n, t/1e6, b/1e6, m/1e6, est/1e6, (est-t)/1e6}' "$T/gaps"
done
