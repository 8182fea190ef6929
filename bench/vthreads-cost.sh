#!/usr/bin/env bash
# The agent's cost of recording virtual threads (vthreads=1: VirtualThreadMount/Unmount
# and Start/End, a record per mount and per unmount, a stack per wait of 50 us or more) on a
# workload that does little but mount and unmount: bench/workloads/VThreadYield.java, 16
# virtual threads looping over a little work and Thread.yield(). Three variants,
# interleaved round by round: no agent, the agent with vthreads=0 (its default; what
# record without --off-cpu asks for), the agent with vthreads=1 (record --off-cpu). The
# figure is the JVM's CPU per yield over the loop (start-up left out), median of the
# rounds, and its ratio to no agent; yields per wall second are printed too but depend
# on how loaded the machine is.
# Usage: bench/vthreads-cost.sh [BUILD_DIR]   ROUNDS=N (default 5), SECS=S (default 3),
#   JDK=<a JDK 21+> (default Temurin 25)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$ROOT/build}
JDK=${JDK:-/usr/lib/jvm/temurin-25-jdk-amd64}
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-3}
AGENT=$B/jvm-agent/libviprof-jvmti.so
[ -f "$AGENT" ] || { echo "vthreads-cost: $AGENT missing; build first (cmake --build $B --target viprof-jvmti)" >&2; exit 1; }
[ -x "$JDK/bin/javac" ] || { echo "vthreads-cost: no javac at $JDK; set JDK=<a JDK 21 or later>" >&2; exit 1; }
W=$(mktemp -d /tmp/vp-vtcost-XXXXXX)
trap 'rm -rf "$W"' EXIT
"$JDK/bin/javac" -nowarn -d "$W/classes" "$ROOT/bench/workloads/VThreadYield.java"

run() {   # variant -> "yields cpu_ns"
	local opts=()
	case $1 in
	agent) opts=("-agentpath:$AGENT=dir=$W/maps,vthreads=0") ;;
	vthreads) opts=("-agentpath:$AGENT=dir=$W/maps,vthreads=1") ;;
	esac
	rm -rf "$W/maps"
	"$JDK/bin/java" "${opts[@]}" -cp "$W/classes" VThreadYield "$SECS" 16 | sed -n 's/^yields=\([0-9]*\) cpu_ns=\([0-9]*\)$/\1 \2/p'
}

declare -A NS Y
for r in $(seq "$ROUNDS"); do
	for v in none agent vthreads; do
		read -r y c < <(run $v)
		NS[$v]+="$(awk -v y="$y" -v c="$c" 'BEGIN {printf "%.1f", c / y}') "
		Y[$v]+="$(awk -v y="$y" -v s="$SECS" 'BEGIN {printf "%.0f", y / s}') "
		echo "round $r $v: $y yields, $c ns CPU" >&2
	done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
base=$(median <<<"${NS[none]}")
printf "%-22s %16s %12s %14s\n" variant "CPU ns/yield" "vs none" "yields/s wall"
for v in none agent vthreads; do
	ns=$(median <<<"${NS[$v]}")
	y=$(median <<<"${Y[$v]}")
	case $v in none) name="no agent" ;; agent) name="agent, vthreads=0" ;; *) name="agent, vthreads=1" ;; esac
	awk -v n="$name" -v ns="$ns" -v b="$base" -v y="$y" 'BEGIN {printf "%-22s %16.0f %11.2fx %14.0f\n", n, ns, ns / b, y}'
done
