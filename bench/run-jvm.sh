#!/usr/bin/env bash
# JVM benchmarks with the viprof agent, as ratios measured side by side in one run:
#   1. start-up and warm-up: javac compiling a generated, class-heavy source tree, alone
#      vs with -agentpath:libviprof-jvmti.so (javac is itself a large Java program whose
#      compiler threads JIT thousands of methods, so the agent's load events are
#      exercised), in interleaved rounds whose order alternates, medians of wall time and
#      of CPU time (user+sys of the whole JVM: steadier than wall on a shared machine).
#   2. one more run alone and one with the agent, every JVM thread's CPU watched
#      (scheduler runtime from /proc/PID/task/TID/schedstat, polled until the JVM
#      exits) and summed by thread group (compiler, gc, service, agent = the thread
#      named viprof-jvmti, ...), to show where the agent's cost lands; then the code
#      map of that run: bytes per compiled method (the whole codemap.vpm, stubs and
#      inlining records included, over the METHOD_LOAD count `viprof maps list`
#      reports), what its records are (codemap-breakdown.py, if python3 is there),
#      methods written per second of JVM run, and the agent thread's CPU per method.
# Usage: bench/run-jvm.sh [BUILD_DIR] [ROUNDS] [JAVA_HOME]
#   CLASSES=N  generated classes (default 300)
set -euo pipefail
B=$(realpath "${1:-build}")
ROUNDS=${2:-5}
JH=${3:-/usr/lib/jvm/java-17-openjdk-amd64}
CLASSES=${CLASSES:-300}
AGENT=$B/jvm-agent/libviprof-jvmti.so
VP=$B/cli/viprof
TIME=/usr/bin/time
[ -r "$AGENT" ] && [ -x "$VP" ] || { echo "bench: $AGENT or $VP missing; build first (cmake --build $B)" >&2; exit 1; }
[ -x "$JH/bin/javac" ] || { echo "bench: no javac in $JH; pass a JDK's home as the third argument" >&2; exit 1; }
[ -x "$TIME" ] || { echo "bench: $TIME not found; apt-get install time" >&2; exit 1; }
command -v bc >/dev/null || { echo "bench: bc not found; apt-get install bc" >&2; exit 1; }
T=$(mktemp -d /tmp/vp-jbench.XXXXXX)
JPID=
trap '[ -n "$JPID" ] && kill "$JPID" 2>/dev/null; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM HUP PIPE

# Classes with a few methods that call each other, so javac has real work.
mkdir -p "$T/src/gen"
for i in $(seq "$CLASSES"); do
	{
		echo "package gen; public class C$i {"
		for m in $(seq 8); do
			echo "  public static int m$m(int x) { int s = 0; for (int k = 0; k < x; k++) { s += k * $m ^ (s >>> 3); } return s + C$(( (i % CLASSES) + 1 )).m$m(x - 1); }"
		done
		echo "  public java.util.List<String> names() { java.util.List<String> l = new java.util.ArrayList<>(); for (int k = 0; k < 10; k++) l.add(\"c$i\" + k); return l; }"
		echo "}"
	} >"$T/src/gen/C$i.java"
done

now() { date +%s.%N; }
calc() { echo "$*" | bc -l; }
median() { sort -g | awk '{a[NR]=$1} END {if (!NR) {print "nan"; exit} printf "%.15g\n", (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# javac [extra JVM option]: appends wall seconds to $T/wall.$2 and user+sys to $T/cpu.$2.
run() {
	local opt=$1 tag=$2 s rc=0
	rm -rf "$T/out"; mkdir -p "$T/out"
	s=$(now)
	"$TIME" -f '%U %S' -o "$T/time" "$JH/bin/javac" ${opt:+"-J$opt"} -d "$T/out" "$T"/src/gen/*.java \
		>"$T/err" 2>&1 || rc=$?
	if [ "$rc" != 0 ] || [ "$(ls "$T/out/gen" | wc -l)" -lt "$CLASSES" ]; then
		echo "bench: javac ${opt:+-J$opt }failed (status $rc):" >&2
		tail -5 "$T/err" >&2
		exit 1
	fi
	calc "$(now) - $s" >>"$T/wall.$tag"
	awk 'END {print $1 + $2}' "$T/time" >>"$T/cpu.$tag"
}

echo "== 1. javac of $CLASSES generated classes, $ROUNDS interleaved rounds, medians; $JH"
"$JH/bin/java" -version 2>&1 | head -1
: >"$T/wall.a"; : >"$T/cpu.a"; : >"$T/wall.g"; : >"$T/cpu.g"
run "" warm; rm -f "$T/wall.warm" "$T/cpu.warm"   # page cache and CDS archive warm for both
for r in $(seq "$ROUNDS"); do
	rm -rf "$T/maps"; mkdir -p "$T/maps"
	# Alternate which one goes first, so neither always follows the other.
	if [ $((r % 2)) = 1 ]; then
		run "" a; run "-agentpath:$AGENT=dir=$T/maps" g
	else
		run "-agentpath:$AGENT=dir=$T/maps" g; run "" a
	fi
done
a=$(median <"$T/wall.a"); g=$(median <"$T/wall.g")
ac=$(median <"$T/cpu.a"); gc=$(median <"$T/cpu.g")
printf 'median wall: alone %.3fs  with agent %.3fs  ratio %.4f (%+.2f%%)\n' "$a" "$g" "$(calc "$g/$a")" "$(calc "($g/$a-1)*100")"
printf 'median CPU:  alone %.3fs  with agent %.3fs  ratio %.4f (%+.2f%%)\n' "$ac" "$gc" "$(calc "$gc/$ac")" "$(calc "($gc/$ac-1)*100")"
echo "  per round alone: wall [$(tr '\n' ' ' <"$T/wall.a")] cpu [$(tr '\n' ' ' <"$T/cpu.a")]"
echo "  per round agent: wall [$(tr '\n' ' ' <"$T/wall.g")] cpu [$(tr '\n' ' ' <"$T/cpu.g")]"

echo "== 2. code maps and where the CPU goes: javac alone, then with the agent, threads watched"
# javac [option] -> $T/threads: "group ns" per JVM thread, from its scheduler runtime in
# /proc/PID/task/TID/schedstat, polled every 20 ms with shell builtins only (no fork per
# poll) until the JVM exits; the last value seen is at most one poll older than the end.
watched() {
	local opt=$1 t c ns tid
	declare -A tns=() tcomm=()
	rm -rf "$T/out"; mkdir -p "$T/out"
	s=$(now)
	"$JH/bin/javac" ${opt:+"-J$opt"} -d "$T/out" "$T"/src/gen/*.java >"$T/err" 2>&1 &
	JPID=$!
	while kill -0 "$JPID" 2>/dev/null; do
		for t in /proc/"$JPID"/task/*; do
			tid=${t##*/}
			# Read the name each time: HotSpot names a thread only after it started.
			c=; read -r c 2>/dev/null <"$t/comm" || true
			[ -n "$c" ] && tcomm[$tid]=$c
			read -r ns _ 2>/dev/null <"$t/schedstat" && tns[$tid]=$ns || true
		done
		sleep 0.02
	done
	local rc=0
	wait "$JPID" || rc=$?
	JPID=
	[ "$rc" = 0 ] || { echo "bench: javac ${opt:+-J$opt }failed:" >&2; tail -5 "$T/err" >&2; exit 1; }
	jw=$(calc "$(now) - $s")
	for tid in "${!tns[@]}"; do
		case ${tcomm[$tid]:-?} in
		C1\ Compiler*|C2\ Compiler*) c=compiler ;;
		GC\ Thread*|G1\ *|VM\ Periodic*) c=gc ;;
		VM\ Thread) c=vm-thread ;;
		Service\ Thread) c=service ;;
		viprof-jvmti) c=agent ;;
		java|javac) c=main ;;
		*) c=other ;;
		esac
		echo "$c ${tns[$tid]}"
	done | awk '{n[$1] += $2} END {for (g in n) printf "%s %.0f\n", g, n[g]}' | sort >"$T/threads"
}
# Three rounds each, alternating; per group the median over the rounds.
: >"$T/tg.alone"; : >"$T/tg.agent"; : >"$T/jw.alone"; : >"$T/jw.agent"
for r in 1 2 3; do
	for k in alone agent; do
		if [ "$k" = agent ]; then
			rm -rf "$T/maps"; mkdir -p "$T/maps"
			watched "-agentpath:$AGENT=dir=$T/maps"
		else
			watched ""
		fi
		# Every group in every round, 0 where it had no thread, so medians line up.
		for g in agent compiler gc main other service vm-thread; do
			echo "$r $g $(awk -v g="$g" '$1 == g {n = $2} END {printf "%.0f", n}' "$T/threads")"
		done >>"$T/tg.$k"
		echo "$jw" >>"$T/jw.$k"
	done
done
med_group() { # FILE GROUP -> median ns
	awk -v g="$2" '$2 == g {print $3}' "$1" | median
}
printf '%-10s %10s %10s %10s   (ms of CPU per thread group, median of 3 runs each)\n' group alone agent diff
ta=0 tg=0
for g in agent compiler gc main other service vm-thread; do
	a=$(med_group "$T/tg.alone" "$g"); b=$(med_group "$T/tg.agent" "$g")
	printf '%-10s %10.1f %10.1f %+10.1f\n' "$g" "$(calc "$a/1000000")" "$(calc "$b/1000000")" "$(calc "($b-$a)/1000000")"
done
for k in alone agent; do
	awk '{n[$1] += $3} END {for (r in n) printf "%.0f\n", n[r]}' "$T/tg.$k" | median >"$T/total.$k"
done
ta=$(cat "$T/total.alone"); tg=$(cat "$T/total.agent")
printf '%-10s %10.1f %10.1f %+10.1f (%+.2f%%; median of the runs'"'"' totals)\n' total "$(calc "$ta/1000000")" \
	"$(calc "$tg/1000000")" "$(calc "($tg-$ta)/1000000")" "$(calc "($tg/$ta-1)*100")"
printf 'wall (median): alone %.2f s, with agent %.2f s\n' "$(median <"$T/jw.alone")" "$(median <"$T/jw.agent")"
jw=$(median <"$T/jw.agent")
echo "code map of the last run with the agent:"
agent_ns=$(med_group "$T/tg.agent" agent)
pid=$(ls "$T/maps")
[ -n "$pid" ] && [ -r "$T/maps/$pid/codemap.vpm" ] || { echo "bench: the agent wrote no code map under $T/maps" >&2; exit 1; }
"$VP" maps "$T/maps" --pid "$pid" list >"$T/list" 2>"$T/list.err" || { cat "$T/list.err" >&2; exit 1; }
bytes=$(stat -c %s "$T/maps/$pid/codemap.vpm")
methods=$(awk '/compiled methods,/ {print $1}' "$T/list")
stubs=$(awk '/compiled methods,/ {print $4}' "$T/list")
epochs=$(awk '$1 ~ /^[0-9]+$/ && NF >= 6' "$T/list" | wc -l)
[ "${methods:-0}" -gt 0 ] || { echo "bench: the code map names no compiled method:" >&2; cat "$T/list" >&2; exit 1; }
tail -1 "$T/list"
printf 'code map: %d B for %d compiled methods (+%d stubs, %d epochs) = %.1f B/method\n' "$bytes" "$methods" "$stubs" \
	"$epochs" "$(calc "$bytes/$methods")"
printf 'write rate: %d methods in %.2f s of JVM run = %.0f methods/s (%.0f KiB/s)\n' "$methods" "$jw" \
	"$(calc "$methods/$jw")" "$(calc "$bytes/1024/$jw")"
if command -v python3 >/dev/null; then
	echo "what the code map holds (bench/codemap-breakdown.py):"
	python3 "$(dirname "$0")/codemap-breakdown.py" "$T/maps/$pid/codemap.vpm" || true
fi
if [ "${agent_ns%.*}" -gt 0 ] 2>/dev/null; then
	printf 'agent thread viprof-jvmti: %.2f ms CPU = %.2f us/method = %.3f%% of the JVM run\n' \
		"$(calc "$agent_ns/1000000")" "$(calc "$agent_ns/1000/$methods")" "$(calc "$agent_ns/10000000/$jw")"
else
	echo "agent thread viprof-jvmti: not seen among the JVM's threads"
fi
