#!/usr/bin/env bash
# Stacks of JVMs without -XX:+PreserveFramePointer, viprof against async-profiler, in one
# run. Prints, side by side:
#   1. overhead of `viprof record -g -F 999` vs async-profiler (cpu event, 999 Hz, call
#      stacks) on bench/workloads/FixedWork.java (two threads, fixed work, allocation):
#      wall and CPU (user+sys of the whole process tree) against no profiler, ROUNDS
#      interleaved rounds, medians and the spread;
#   2. correctness: the 50/30/20 split of tests/java/InterpSplit between its three
#      interpreted callers, and the share of worker samples of tests/java/Workers
#      (attached while running) that reach Workers$Worker.run and Thread.run;
#   3. native code without frame pointers: the share of libz samples of zcaller (tests/
#      fixtures/unwind) that reach squeeze(), viprof vs perf --call-graph dwarf and fp.
# Usage: bench/jvm-stacks.sh [BUILD_DIR] [ROUNDS]   (root)
#   ASPROF_HOME=DIR  an async-profiler build (DIR/lib/libasyncProfiler.so, DIR/bin/asprof),
#                    built from its source; without it the async-profiler columns say so.
#   JDK=DIR          the JDK (default OpenJDK 17)
set -euo pipefail
B=$(cd "${1:-build}" && pwd); R=${2:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VP=$B/cli/viprof
JDK=${JDK:-/usr/lib/jvm/java-17-openjdk-amd64}
JAVA=$JDK/bin/java
AP=${ASPROF_HOME:-}
[ -n "$AP" ] && [ -f "$AP/lib/libasyncProfiler.so" ] || AP=
T=$(mktemp -d /tmp/vp-jvmstacks.XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM HUP PIPE
"$JDK/bin/javac" -d "$T/cls" "$ROOT/bench/workloads/FixedWork.java"
CLS=$B/tests/java/classes

# run NAME CMD...: appends "wall cpu" of the whole command (children included).
run() {
	local name=$1; shift
	local s e
	s=$(date +%s.%N)
	/usr/bin/time -f "%U %S" -o "$T/time" "$@" >/dev/null 2>"$T/$name.err" || { cat "$T/$name.err" >&2; exit 1; }
	e=$(date +%s.%N)
	echo "$(echo "$e - $s" | bc) $(awk '{print $1 + $2}' "$T/time")" >>"$T/$name"
}
med() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
spread() { sort -n | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f-%.2f", lo, hi}'; }

echo "== 1. overhead on FixedWork, no -XX:+PreserveFramePointer, $R interleaved rounds"
for r in $(seq 1 "$R"); do
	run base "$JAVA" -cp "$T/cls" FixedWork
	rm -rf "$T/s"
	run viprof "$VP" record -q -g -F 999 -o "$T/s" -- "$JAVA" -cp "$T/cls" FixedWork
	if [ -n "$AP" ]; then
		run asprof "$JAVA" "-agentpath:$AP/lib/libasyncProfiler.so=start,event=cpu,interval=1001001,cstack=vm,file=$T/ap.collapsed,collapsed" -cp "$T/cls" FixedWork
	fi
done
bw=$(cut -d' ' -f1 "$T/base" | med); bc_=$(cut -d' ' -f2 "$T/base" | med)
printf "  %-16s wall %6.2f s (%s)  cpu %6.2f s (%s)\n" "no profiler" "$bw" "$(cut -d' ' -f1 "$T/base" | spread)" "$bc_" "$(cut -d' ' -f2 "$T/base" | spread)"
for n in viprof asprof; do
	[ -f "$T/$n" ] || { echo "  async-profiler: skipped (set ASPROF_HOME to an async-profiler build)"; continue; }
	w=$(cut -d' ' -f1 "$T/$n" | med); c=$(cut -d' ' -f2 "$T/$n" | med)
	printf "  %-16s wall %6.2f s (%s) %+6.1f%%  cpu %6.2f s (%s) %+6.1f%%\n" "$n" "$w" "$(cut -d' ' -f1 "$T/$n" | spread)" \
		"$(echo "($w / $bw - 1) * 100" | bc -l)" "$c" "$(cut -d' ' -f2 "$T/$n" | spread)" "$(echo "($c / $bc_ - 1) * 100" | bc -l)"
	eval "${n}_cpu=$c"
done
if [ -n "$AP" ]; then
	vo=$(echo "$viprof_cpu - $bc_" | bc -l); ao=$(echo "$asprof_cpu - $bc_" | bc -l)
	echo "  CPU overhead viprof / async-profiler: $(echo "$vo" | awk '{printf "%.2f", $1}') s / $(echo "$ao" | awk '{printf "%.2f", $1}') s"
fi

echo "== 2. correctness on JVMs without frame pointers ($(basename "$JDK"))"
shares() { # FOLDED-FILE: callerA/B/C shares of the samples in Hot.spin
	awk '/InterpSplit\$Hot.spin/ {n=$NF; t+=n; if (/callerA/) a+=n; else if (/callerB/) b+=n; else if (/callerC/) c+=n}
	     END {s=a+b+c; if (s) printf "A %.1f%% B %.1f%% C %.1f%% (%d of %d spin samples name a caller)", 100*a/s, 100*b/s, 100*c/s, s, t; else printf "no caller named (%d spin samples)", t}' "$1"
}
rm -rf "$T/s"
"$VP" record -q -g -o "$T/s" -- "$JAVA" -cp "$CLS" InterpSplit 6 >/dev/null 2>&1
"$VP" report "$T/s" --format folded -o "$T/vp.folded"
echo "  InterpSplit 50/30/20, viprof:         $(shares "$T/vp.folded")"
if [ -n "$AP" ]; then
	"$JAVA" "-agentpath:$AP/lib/libasyncProfiler.so=start,event=cpu,interval=1001001,file=$T/ap1.collapsed,collapsed" -cp "$CLS" InterpSplit 6 >/dev/null 2>&1
	echo "  InterpSplit 50/30/20, async-profiler: $(shares "$T/ap1.collapsed")"
fi
reach() { # FOLDED-FILE: worker samples in Java code that reach Worker.run and Thread.run
	awk '/^worker-/ && /Workers\$Worker/ {n=$NF; t+=n; if (/Workers\$Worker.run/ && /java.lang.Thread.run/) r+=n}
	     END {if (t) printf "%.2f%% of %d worker samples", 100*r/t, t; else printf "no worker samples"}' "$1"
}
"$JAVA" -cp "$CLS" Workers 60 >/dev/null 2>&1 & JP=$!
sleep 4
rm -rf "$T/s"
"$VP" record -q -g -p "$JP" -d 5 -o "$T/s" >/dev/null 2>&1
"$VP" report "$T/s" --format folded -o "$T/vpw.folded"
echo "  Workers attached, reach run(), viprof:         $(reach "$T/vpw.folded")"
if [ -n "$AP" ]; then
	"$AP/bin/asprof" -e cpu -i 1001001 -d 5 -o collapsed -f "$T/apw.collapsed" "$JP" >/dev/null 2>&1 || true
	# async-profiler names threads with -t only; without it, count every stack with a worker frame.
	awk '/Workers\$Worker/ {n=$NF; t+=n; if (/Workers\$Worker.run/ && /java.lang.Thread.run/) r+=n}
	     END {if (t) printf "  Workers attached, reach run(), async-profiler: %.2f%% of %d worker samples\n", 100*r/t, t}' "$T/apw.collapsed"
fi
kill "$JP" 2>/dev/null; wait "$JP" 2>/dev/null || true

echo "== 3. native code without frame pointers: zcaller squeeze (libz), samples reaching squeeze()"
Z=$B/tests/fixtures/unwind/zcaller
rm -rf "$T/s"
"$VP" record -q -g -o "$T/s" -- "$Z" squeeze 4 >/dev/null 2>&1
"$VP" report "$T/s" --format folded -o "$T/z.folded"
zreach() { awk '/libz|deflate|compress2|longest_match/ {n=$NF; t+=n; if (/squeeze/) r+=n} END {if (t) printf "%.2f%% of %d libz samples", 100*r/t, t; else print "no libz samples"}' "$1"; }
echo "  viprof -g:                    $(zreach "$T/z.folded")"
if command -v perf >/dev/null; then
	# perf 6.1 aborts while any BPF program is loaded on this kernel: viprof is done here.
	for mode in dwarf fp; do
		perf record -q --no-bpf-event -F 999 --call-graph "$mode" -o "$T/perf.data" -- "$Z" squeeze 4 >/dev/null 2>&1 || true
		perf script -i "$T/perf.data" 2>/dev/null | awk 'BEGIN{RS=""} {t=0} /libz/ {n++; if (/squeeze/) r++} END {if (n) printf "%.2f%% of %d libz samples", 100*r/n, n}' >"$T/p.$mode"
		echo "  perf --call-graph $mode: $(cat "$T/p.$mode")"
	done
fi
