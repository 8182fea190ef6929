#!/usr/bin/env bash
# Cost of `viprof record --off-cpu` on a server-like workload with many short sleeps,
# side by side with plain `record` and with no profiler, in one run.
#
# Workload: tests/fixtures/offcpu/offcpu-fixture.c `server`: THREADS threads, each
# doing ITERS loops of a few microseconds of work and a 100 us sleep (fixed work, so
# that overhead shows as longer wall time and more CPU). The context-switch rate is
# measured (/proc/stat ctxt) and printed; the defaults give about 20k switches/s here.
#
# Prints, medians of ROUNDS interleaved rounds (spread in brackets):
#   wall and CPU (user+sys of the whole process tree, the recorder included), and
#   their ratios to no profiler and of --off-cpu to plain record;
#   bytes per second into user space: the sampler's ring buffer (samples x the ring
#   entry size + one switch entry per context switch, which plain record already
#   emits for steal attribution) and, with --off-cpu, the switch tracer's summed
#   records (drained from its kernel hash every 250 ms, no ring buffer: sched.bytes
#   in the session); and the session's size per second.
# Then the switch-out walk's cost per switch-out (the tracer's own counters), on this
# workload and on bench/workloads/ParkDeep.java (4 threads x PARKS parks, 50 Java
# methods deep; when JDK has a javac), medians of the rounds, next to VIPROF_BEFORE's
# (another viprof, e.g. main's build) when set: the before / after column.
# Usage: bench/offcpu.sh [BUILD_DIR] [ROUNDS] [THREADS] [ITERS]   (root; VIPROF_BEFORE=<viprof>
#        JDK=<JDK home> PARKS=5000 in the environment)
set -euo pipefail
B=$(cd "${1:-build}" && pwd); R=${2:-3}; TH=${3:-4}; IT=${4:-8000}
BEFORE=${VIPROF_BEFORE:-}; JDK=${JDK:-/usr/lib/jvm/java-17-openjdk-amd64}; PARKS=${PARKS:-5000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VP=$B/cli/viprof
FX=$B/tests/offcpu-fixture
[ "$(id -u)" = 0 ] || { echo "bench/offcpu.sh: needs root (BPF)" >&2; exit 1; }
[ -x "$FX" ] || { echo "bench/offcpu.sh: $FX missing; build the tests (cmake --build $B)" >&2; exit 1; }
T=$(mktemp -d /tmp/vp-offcpu-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM HUP PIPE

# The ring buffer's entry sizes, from the shared header.
cat >"$T/sizes.c" <<EOF
#include <linux/types.h>
#include <stdio.h>
#include "sampler-kernel/profile.h"
int main(void) { printf("%zu %zu\n", sizeof(struct vpb_sample), sizeof(struct vpb_switch)); return 0; }
EOF
gcc -I"$ROOT" -o "$T/sizes" "$T/sizes.c"
read -r SAMPLE_BYTES SWITCH_BYTES < <("$T/sizes")

ctxt() { awk '/^ctxt/{print $2}' /proc/stat; }
# run NAME CMD...: appends "wall cpu switches" of the whole command (children included).
run() {
	local name=$1; shift
	local s e c0 c1
	c0=$(ctxt); s=$(date +%s.%N)
	/usr/bin/time -f "%U %S" -o "$T/time" "$@" >/dev/null 2>"$T/$name.err" || { cat "$T/$name.err" >&2; exit 1; }
	e=$(date +%s.%N); c1=$(ctxt)
	echo "$(echo "$e - $s" | bc) $(awk '{print $1 + $2}' "$T/time") $((c1 - c0))" >>"$T/$name"
}
# meta KEY DIR: a value the session recorded (0 when absent).
meta() { "$VP" report "$2" -F json 2>/dev/null | python3 -c 'import json,sys
print(json.load(sys.stdin)["session"].get(sys.argv[1], 0))' "$1"; }
samples() { "$VP" report "$1" -F json 2>/dev/null | python3 -c 'import json,sys
t=json.load(sys.stdin)["totals"]; print(sum(v["samples"] for k, v in t.items() if k not in ("steal", "off-cpu")))'; }
med() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
spread() { sort -n | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f-%.2f", lo, hi}'; }

echo "== cost of --off-cpu: offcpu-fixture server, $TH threads x $IT loops (work + 100 us sleep), $R interleaved rounds"
for r in $(seq 1 "$R"); do
	run base "$FX" server 1 "$TH" "$IT"
	rm -rf "$T/s.plain" "$T/s.off"
	run plain "$VP" record -q -g -o "$T/s.plain" -- "$FX" server 1 "$TH" "$IT"
	run off "$VP" record -q -g --off-cpu -o "$T/s.off" -- "$FX" server 1 "$TH" "$IT"
	echo "$(meta sched.walks "$T/s.off") $(meta sched.walk_ns "$T/s.off")" >>"$T/off.walks"
	if [ -n "$BEFORE" ]; then
		rm -rf "$T/s.before"
		run before "$BEFORE" record -q -g --off-cpu -o "$T/s.before" -- "$FX" server 1 "$TH" "$IT"
		echo "$(meta sched.walks "$T/s.before") $(meta sched.walk_ns "$T/s.before")" >>"$T/before.walks"
	fi
	for n in plain off; do
		d=$(meta duration_ns "$T/s.$n"); s=$(samples "$T/s.$n"); sb=$(meta sched.bytes "$T/s.$n")
		sz=$(du -sb "$T/s.$n" | cut -f1); sw=$(tail -1 "$T/$n" | cut -d' ' -f3)
		# ring bytes/s, tracer bytes/s, session bytes/s, switches/s
		echo "$(echo "($s * $SAMPLE_BYTES + $sw * $SWITCH_BYTES) / ($d / 1000000000)" | bc -l) $(echo "$sb / ($d / 1000000000)" | bc -l) $(echo "$sz / ($d / 1000000000)" | bc -l) $(echo "$sw / ($d / 1000000000)" | bc -l)" >>"$T/$n.bytes"
	done
done
bw=$(cut -d' ' -f1 "$T/base" | med); bc_=$(cut -d' ' -f2 "$T/base" | med)
bsw=$(awk '{print $3 / $1}' "$T/base" | med)
printf "  context switches: %.0f/s without a profiler (all CPUs)\n" "$bsw"
printf "  %-22s wall %6.2f s (%s)          cpu %6.2f s (%s)\n" "no profiler" "$bw" "$(cut -d' ' -f1 "$T/base" | spread)" "$bc_" "$(cut -d' ' -f2 "$T/base" | spread)"
for n in plain off; do
	w=$(cut -d' ' -f1 "$T/$n" | med); c=$(cut -d' ' -f2 "$T/$n" | med)
	label=$([ $n = plain ] && echo "record -g" || echo "record -g --off-cpu")
	printf "  %-22s wall %6.2f s (%s) x%.3f  cpu %6.2f s (%s) x%.3f\n" "$label" "$w" "$(cut -d' ' -f1 "$T/$n" | spread)" \
		"$(echo "$w / $bw" | bc -l)" "$c" "$(cut -d' ' -f2 "$T/$n" | spread)" "$(echo "$c / $bc_" | bc -l)"
	eval "${n}_w=$w ${n}_c=$c"
done
printf "  --off-cpu vs plain record: wall x%.3f, cpu x%.3f\n" "$(echo "$off_w / $plain_w" | bc -l)" "$(echo "$off_c / $plain_c" | bc -l)"
echo "  bytes per second into user space (ring entries: sample $SAMPLE_BYTES B, switch $SWITCH_BYTES B):"
for n in plain off; do
	label=$([ $n = plain ] && echo "record -g" || echo "record -g --off-cpu")
	rb=$(cut -d' ' -f1 "$T/$n.bytes" | med); tb=$(cut -d' ' -f2 "$T/$n.bytes" | med)
	ss=$(cut -d' ' -f3 "$T/$n.bytes" | med); sw=$(cut -d' ' -f4 "$T/$n.bytes" | med)
	printf "  %-22s ring %9.0f B/s  off-cpu records %8.0f B/s  session %8.0f B/s  (%.0f switches/s)\n" "$label" "$rb" "$tb" "$ss" "$sw"
	eval "${n}_rb=$rb ${n}_tb=$tb ${n}_ss=$ss"
done
# The switch tracer's own walks (sessions since issue 21: the sampler's walker at
# switch-out; older builds walk by frame pointer and record none).
wk=$(meta sched.walks "$T/s.off"); wn=$(meta sched.walk_ns "$T/s.off")
[ "$wk" != 0 ] && printf "  walks at switch-out (last round): %s, %.2f us each (walk + interning)\n" "$wk" "$(echo "$wn / $wk / 1000" | bc -l)"
# per switch-out, medians of the rounds: after (this build), before (VIPROF_BEFORE)
us_each() { awk '$1 > 0 {print $2 / $1 / 1000}' "$1" | med; }
a=$(us_each "$T/off.walks")
if [ -n "$BEFORE" ] && [ -s "$T/before.walks" ]; then
	b=$(us_each "$T/before.walks")
	printf "  walk per switch-out (server fixture): before %.2f us, after %.2f us: after / before = %.3f\n" "$b" "$a" "$(echo "$a / $b" | bc -l)"
fi
# ParkDeep: a Java stack 50 methods deep at every switch-out (issue 37: at most 2 us).
if [ -x "$JDK/bin/javac" ]; then
	"$JDK/bin/javac" -d "$T" "$ROOT/bench/workloads/ParkDeep.java"
	pd() {   # pd VIPROF FILE: appends this run's us per switch-out
		rm -rf "$T/s.pd"
		"$1" record -g --off-cpu -o "$T/s.pd" -- "$JDK/bin/java" -XX:CompileCommand=quiet \
			-XX:CompileCommand=dontinline,ParkDeep::* -cp "$T" ParkDeep 4 "$PARKS" 2>&1 >/dev/null |
			sed -n 's/.*user stacks walked at switch-out.*, \([0-9.]*\) us each.*/\1/p' >>"$2"
	}
	for r in $(seq 1 "$R"); do
		pd "$VP" "$T/pd.after"
		[ -n "$BEFORE" ] && pd "$BEFORE" "$T/pd.before"
	done
	a=$(med <"$T/pd.after")
	if [ -n "$BEFORE" ] && [ -s "$T/pd.before" ]; then
		b=$(med <"$T/pd.before")
		printf "  walk per switch-out (ParkDeep, 50 Java methods deep, 4 x %s parks): before %.2f us (%s), after %.2f us (%s): after / before = %.3f\n" \
			"$PARKS" "$b" "$(spread <"$T/pd.before")" "$a" "$(spread <"$T/pd.after")" "$(echo "$a / $b" | bc -l)"
	else
		printf "  walk per switch-out (ParkDeep, 50 Java methods deep, 4 x %s parks): %.2f us (%s)\n" "$PARKS" "$a" "$(spread <"$T/pd.after")"
	fi
fi
printf "  --off-cpu vs plain record: bytes into user space x%.3f, session size/s x%.3f\n" \
	"$(echo "($off_rb + $off_tb) / $plain_rb" | bc -l)" "$(echo "$off_ss / $plain_ss" | bc -l)"
printf "  load average at the end: %s\n" "$(cut -d' ' -f1-3 /proc/loadavg)"
