#!/usr/bin/env bash
# The two cost targets of the frame-pointer-free stack walker, each measured side by side
# in one run as ratios (the VM is shared and noisy: rounds interleave, the order of the
# variants rotates from round to round, medians and the spread are printed, no absolute
# time is compared with another run's):
#
# (a) BPF time per sample, `--stack-walk tables` (the default) vs `--stack-walk fp`
#     (bpf_get_stack), on bench/workloads/deepstack: two threads DEPTH calls deep, built
#     with frame pointers so that both walks reach the bottom. Each recording is
#     `viprof record -g -F 999 -p PID`, stopped with SIGINT; once the recorder holds its
#     on_sample program and 1 s later, run_time_ns and run_cnt are read from its
#     /proc/PID/fdinfo, and again SEC s later, with kernel.bpf_stats_enabled=1 between the
#     two reads only (restored after, also on Ctrl-C). Printed: run_time_ns/run_cnt, and
#     run_time_ns per deepstack sample recorded between the reads (on_sample also runs, and
#     returns early, for other processes' samples on the CPUs), and the mean user frames
#     per sample of that window (report --format folded --time), so that the comparison
#     is at equal depth.
# (c) The cost of depth: BPF time per sample of `--stack-walk tables` on deepstack at DEPTH
#     (today's typical depth, default 30) and at DEEP (default 1000, past perf's 127), side
#     by side in interleaved rounds, measured as in (a); printed with the frames each walk
#     reached and the ratios deep / typical per run, per sample and per frame.
#     With the tests' Java fixtures built, the same for tests/java/DeepStack.java (the
#     JDK of --jdk): compiled recursion DEPTH and DEEP deep, and -Xint recursion 300 deep.
# (b) `viprof record -g -F 999 -- java ...` on a JVM without -XX:+PreserveFramePointer
#     against async-profiler at the same rate (agent at start: event=cpu, interval
#     1001001 ns, Java and native stacks as its defaults walk them, collapsed output to a
#     file) and against no profiler, on bench/workloads/FixedWork.java (two threads, fixed
#     work, allocation; about 5 s): wall and CPU (user+sys of the whole process tree, from
#     /usr/bin/time). Each profiler's overhead is its round's time minus the same round's
#     no-profiler time, median over rounds; printed in % and as viprof / async-profiler.
#
# Usage: bench/walker.sh [--asprof DIR] [--jdk DIR] [--only a|b|c] [BUILD_DIR [ROUNDS [DEPTH [DEEP]]]]
#   (root; BUILD_DIR default build, ROUNDS default 5, DEPTH default 30, DEEP default 1000)
#   --asprof DIR  an async-profiler build (DIR/lib/libasyncProfiler.so), default
#                 $ASPROF_HOME; without it (b) prints "async-profiler: skipped".
#   --jdk DIR     the JDK of (b) (default OpenJDK 17). SEC=N: seconds measured per (a) recording (3).
set -euo pipefail
AP=${ASPROF_HOME:-}; JDK=/usr/lib/jvm/java-17-openjdk-amd64; ONLY=
while [ $# -gt 0 ]; do
	case $1 in
	--asprof) AP=$2; shift 2 ;;
	--jdk) JDK=$2; shift 2 ;;
	--only) ONLY=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "walker.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
B=${1:-build}; R=${2:-5}; DEPTH=${3:-30}; DEEP=${4:-1000}; SEC=${SEC:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VP=$B/cli/viprof; DS=$B/bench/deepstack; JCLS=$B/tests/java/classes
[ -x "$VP" ] && [ -x "$DS" ] || { echo "walker.sh: build first (need $VP and $DS): cmake --build $B" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "walker.sh: needs root (BPF programs, bpf_stats); run it with sudo" >&2; exit 2; }
[ "$SEC" -ge 1 ] || { echo "walker.sh: SEC (seconds of each measurement) must be 1 or more" >&2; exit 2; }
if [ -n "$AP" ] && [ ! -f "$AP/lib/libasyncProfiler.so" ]; then
	echo "walker.sh: no $AP/lib/libasyncProfiler.so (--asprof/ASPROF_HOME names an async-profiler build directory)" >&2
	exit 2
fi
T=$(mktemp -d /tmp/vp-walker.XXXXXX)
OLD=$(sysctl -n kernel.bpf_stats_enabled)
WPID=
cleanup() {
	sysctl -q -w kernel.bpf_stats_enabled="$OLD" || true
	[ -z "$WPID" ] || kill "$WPID" 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

med() { sort -g | awk -v f="${1:-%.0f}" '{v[NR]=$1} END {if (!NR) print "nan"; else printf f "\n", (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
spread() { sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%s-%s", lo, hi}'; }
col() { cut -d' ' -f"$1" "$2"; }
# The variants of round R in rotated order, so that none always runs first or last.
rotate() { local r=$1; shift; local a=("$@") n=$# i; for i in $(seq 0 $((n - 1))); do echo "${a[$(((i + r) % n))]}"; done; }

# "run_cnt run_time_ns" of the on_sample program whose fdinfo file is $1 (one awk, so that
# the two reads bracket the measured seconds closely).
bpf_runs() { awk '$1=="run_cnt:" {r=$2} $1=="run_time_ns:" {n=$2} END {print r+0, n+0}' "$1"; }

# The fdinfo file of PID's on_sample (perf_event) program; waits up to 20 s for it, as
# the recorder builds unwind tables before it attaches, longer on a busy machine.
prog_fdinfo() {
	local i f id
	for i in $(seq 200); do
		for f in /proc/"$1"/fdinfo/*; do
			# A program's own fd (a link's fdinfo names the program too, without run_cnt).
			grep -q '^run_cnt:' "$f" 2>/dev/null || continue
			id=$(awk '$1=="prog_id:"{print $2}' "$f" 2>/dev/null) || continue
			[ -n "$id" ] && bpftool prog show id "$id" 2>/dev/null | grep -q "perf_event.*name on_sample" && { echo "$f"; return 0; }
		done
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# Mean user frames per sample of a folded report: frames other than the leading thread
# name and the kernel's (_[k]) frames, weighted by the sample counts.
user_frames() {
	awk '{n=$NF; $NF=""; c=split($0, f, ";"); k=0; for (i=2;i<=c;i++) if (f[i] !~ /_\[k\] *$/) k++; t+=n; s+=n*k}
	     END {printf "%.1f", t ? s/t : 0}' "$1"
}

# Starts the workload KIND (native: deepstack; java: DeepStack compiled; xint: DeepStack
# with -Xint) DEPTH deep; sets WPID and COMM (the thread name its samples are counted by).
wl_start() {
	local i
	case $1 in
	native) "$DS" "$2" 600 & WPID=$!; COMM=deepstack; sleep 0.3 ;;
	java|xint)
		"$JDK/bin/java" $([ "$1" = xint ] && echo -Xint) -cp "$JCLS" DeepStack "$2" 600 >"$T/jout" 2>&1 & WPID=$!
		COMM=java
		for i in $(seq 600); do grep -q ready "$T/jout" && return 0; sleep 0.05; done
		echo "walker.sh: DeepStack printed no \"ready\" in 30 s:" >&2; cat "$T/jout" >&2; exit 1 ;;
	esac
}

walk_one() { # MODE ROUND [DEPTH TAG [KIND]]: appends "ns/run frames/sample runs ns/recorded-sample samples" to $T/a.TAG
	local mode=$1 s=$T/$1.$2 vpid a b ta tb t0 win n fdi d=${3:-$DEPTH} tag=${4:-$1} COMM
	wl_start "${5:-native}" "$d"
	"$VP" record -q -g -F 999 --stack-walk "$mode" -p "$WPID" -o "$s" 2>"$T/err" & vpid=$!
	fdi=$(prog_fdinfo "$vpid") || { echo "walker.sh: viprof record --stack-walk $mode loaded no on_sample program in 20 s:" >&2; cat "$T/err" >&2; exit 1; }
	sleep 1   # past the start (first samples of each thread, table lookups warming up)
	sysctl -q -w kernel.bpf_stats_enabled=1
	ta=$(date +%s%N); a=$(bpf_runs "$fdi")
	sleep "$SEC"
	b=$(bpf_runs "$fdi"); tb=$(date +%s%N)
	sysctl -q -w kernel.bpf_stats_enabled="$OLD"
	kill -INT "$vpid"
	wait "$vpid" || { echo "walker.sh: viprof record --stack-walk $mode failed:" >&2; cat "$T/err" >&2; exit 1; }
	kill "$WPID" 2>/dev/null || true; wait "$WPID" 2>/dev/null || true; WPID=
	set -- $a $b
	[ $(($3 - $1)) -gt 0 ] || { echo "walker.sh: on_sample ran 0 times with bpf_stats on (runs $1 -> $3; did another tool set kernel.bpf_stats_enabled=0?)" >&2; exit 1; }
	# The samples recorded between the two reads: on_sample also runs (and returns
	# early) for every other process on the CPUs, so runs outnumber recorded samples.
	t0=$(sed -n 's/.*"start_realtime_ns": "\([0-9]*\)".*/\1/p' "$s/meta.json")
	win=$(awk -v a="$ta" -v b="$tb" -v z="$t0" 'BEGIN {printf "%.3f,%.3f", (a - z) / 1e9, (b - z) / 1e9}')
	"$VP" report "$s" --format folded --comm "$COMM" --time "$win" -o "$T/f" 2>/dev/null
	n=$(awk '{n+=$NF} END {print n+0}' "$T/f")
	[ "$n" -gt 0 ] || { echo "walker.sh: no $COMM samples between $win s of the $mode session" >&2; exit 1; }
	echo "$(( ($4 - $2) / ($3 - $1) )) $(user_frames "$T/f") $(($3 - $1)) $(( ($4 - $2) / n )) $n" >>"$T/a.$tag"
	rm -rf "$s"
}

part_c() {
	local r v vs=(typical deep)
	: >"$T/a.typical"; : >"$T/a.deep"; : >"$T/c.ratio"
	if [ -f "$JCLS/DeepStack.class" ]; then
		vs+=(jtypical jdeep jxint)
		: >"$T/a.jtypical"; : >"$T/a.jdeep"; : >"$T/a.jxint"
	fi
	for r in $(seq 1 "$R"); do
		for v in $(rotate "$r" "${vs[@]}"); do
			case $v in
			typical) walk_one tables "c$r" "$DEPTH" typical ;;
			deep) walk_one tables "c$r" "$DEEP" deep ;;
			jtypical) walk_one tables "c$r" "$DEPTH" jtypical java ;;
			jdeep) walk_one tables "c$r" "$DEEP" jdeep java ;;
			jxint) walk_one tables "c$r" 300 jxint xint ;;
			esac
		done
		# This round's ratios deep / typical: per run, per recorded sample, per frame.
		paste -d' ' <(tail -1 "$T/a.deep") <(tail -1 "$T/a.typical") |
			awk '{printf "%.2f %.2f %.2f\n", $1 / $6, $4 / $9, ($4 / $2) / ($9 / $7)}' >>"$T/c.ratio"
	done
	echo "(c) BPF time per sample of the table walk by depth: deepstack $DEPTH vs $DEEP deep (2 threads), -F 999, $SEC s per recording, $R interleaved rounds"
	echo "    medians (min-max) of run_time_ns/run_cnt of on_sample, of run_time_ns per recorded deepstack sample, and of user frames per sample"
	for v in typical deep; do
		printf "  depth %-5s %7s ns/run (%s)  %7s ns/sample (%s)  %6s frames  %5.0f ns/frame  runs/samples per round: %s\n" \
			"$([ $v = deep ] && echo "$DEEP" || echo "$DEPTH")" \
			"$(col 1 "$T/a.$v" | med)" "$(col 1 "$T/a.$v" | spread)" "$(col 4 "$T/a.$v" | med)" "$(col 4 "$T/a.$v" | spread)" \
			"$(col 2 "$T/a.$v" | med %.1f)" "$(awk '{print $4 / ($2 > 0 ? $2 : 1)}' "$T/a.$v" | med %.1f)" \
			"$(awk '{printf "%s/%s ", $3, $5}' "$T/a.$v")"
	done
	echo "  deep / typical, median of the per-round ratios: $(col 1 "$T/c.ratio" | med %.2f)x per run, $(col 2 "$T/c.ratio" | med %.2f)x per sample, $(col 3 "$T/c.ratio" | med %.2f)x per frame (rounds: $(awk '{printf "%s/%s/%s ", $1, $2, $3}' "$T/c.ratio"))"
	if [ ! -f "$JCLS/DeepStack.class" ]; then
		echo "  Java: skipped (no $JCLS/DeepStack.class: build the tests' Java fixtures)"
		return
	fi
	echo "  Java (tests/java/DeepStack.java on $("$JDK/bin/java" -version 2>&1 | head -1), main thread; JVM frames below main included):"
	for v in jtypical jdeep jxint; do
		printf "  %-20s %7s ns/sample (%s)  %6s frames  %5.0f ns/frame\n" \
			"$(case $v in jtypical) echo "compiled, $DEPTH deep" ;; jdeep) echo "compiled, $DEEP deep" ;; jxint) echo "-Xint, 300 deep" ;; esac)" \
			"$(col 4 "$T/a.$v" | med)" "$(col 4 "$T/a.$v" | spread)" "$(col 2 "$T/a.$v" | med %.1f)" \
			"$(awk '{print $4 / ($2 > 0 ? $2 : 1)}' "$T/a.$v" | med %.1f)"
	done
	paste -d' ' "$T/a.jdeep" "$T/a.jtypical" | awk '{print $4 / $9}' >"$T/c.jratio"
	echo "  Java compiled $DEEP / $DEPTH deep, median of the per-round ratios: $(med %.2f <"$T/c.jratio")x per sample"
}

part_a() {
	local r m tns fpfr tfr
	: >"$T/a.fp"; : >"$T/a.tables"; : >"$T/a.ratio"
	for r in $(seq 1 "$R"); do
		for m in $(rotate "$r" fp tables); do walk_one "$m" "$r"; done
		# The ratios of this round's pair (ns/run, ns/recorded sample): both ran within
		# seconds of each other.
		paste -d' ' <(tail -1 "$T/a.tables") <(tail -1 "$T/a.fp") | awk '{printf "%.2f %.2f\n", $1 / $6, $4 / $9}' >>"$T/a.ratio"
	done
	tns=$(col 1 "$T/a.tables" | med)
	fpfr=$(col 2 "$T/a.fp" | med %.1f); tfr=$(col 2 "$T/a.tables" | med %.1f)
	echo "(a) BPF time per sample, deepstack depth $DEPTH (2 threads), -F 999, $SEC s measured per recording, $R interleaved rounds"
	echo "    medians (min-max) of run_time_ns/run_cnt of on_sample, of run_time_ns per recorded deepstack sample"
	echo "    (on_sample also runs, and returns early, for other processes), and of user frames per sample"
	for m in fp tables; do
		printf "  --stack-walk %-6s %5s ns/run (%s)  %5s ns/sample (%s)  %4s frames  runs/samples per round: %s\n" "$m" \
			"$(col 1 "$T/a.$m" | med)" "$(col 1 "$T/a.$m" | spread)" "$(col 4 "$T/a.$m" | med)" "$(col 4 "$T/a.$m" | spread)" \
			"$(col 2 "$T/a.$m" | med %.1f)" "$(awk '{printf "%s/%s ", $3, $5}' "$T/a.$m")"
	done
	echo "  tables / fp, median of the per-round ratios: $(col 1 "$T/a.ratio" | med %.2f)x per run, $(col 2 "$T/a.ratio" | med %.2f)x per sample (rounds: $(awk '{printf "%s/%s ", $1, $2}' "$T/a.ratio"))"
	if awk -v a="$tfr" -v b="$fpfr" 'BEGIN {exit !(a - b > 1.5 || b - a > 1.5)}'; then
		echo "  NOTE: the walks reached different depths ($tfr vs $fpfr frames): the ratio compares unequal work"
	fi
	echo "  target: tables <= 2000 ns per run at depth 30: $([ "$tns" -le 2000 ] && echo "met ($tns ns)" || echo "missed ($tns ns)")"
}

# run NAME CMD...: appends "wall cpu" of CMD and its children to $T/b.NAME.
run() {
	local name=$1; shift
	/usr/bin/time -f "%e %U %S" -o "$T/time" "$@" >/dev/null 2>"$T/b.err" ||
		{ echo "walker.sh: $name failed:" >&2; tail -5 "$T/b.err" >&2; exit 1; }
	awk '{printf "%s %.2f\n", $1, $2 + $3}' "$T/time" >>"$T/b.$name"
}

part_b() {
	local r v names=(base viprof) jv
	"$JDK/bin/javac" -d "$T/cls" "$ROOT/bench/workloads/FixedWork.java"
	[ -z "$AP" ] || names+=(asprof)
	jv=$("$JDK/bin/java" -version 2>&1 | head -1)
	for r in $(seq 1 "$R"); do
		for v in $(rotate "$r" "${names[@]}"); do
			case $v in
			base) run base "$JDK/bin/java" -cp "$T/cls" FixedWork ;;
			viprof)
				rm -rf "$T/s"
				run viprof "$VP" record -g -F 999 -o "$T/s" -- "$JDK/bin/java" -cp "$T/cls" FixedWork
				# Its samples, to show that both profilers sampled at one rate.
				sed -n 's/^viprof: \([0-9]*\) samples.*/\1/p' "$T/b.err" >>"$T/n.viprof" ;;
			asprof)
				rm -f "$T/ap.collapsed"
				run asprof "$JDK/bin/java" "-agentpath:$AP/lib/libasyncProfiler.so=start,event=cpu,interval=1001001,file=$T/ap.collapsed,collapsed" -cp "$T/cls" FixedWork
				awk '{n+=$NF} END {print n+0}' "$T/ap.collapsed" >>"$T/n.asprof" ;;
			esac
		done
	done
	# Per-round overheads against the same round's no-profiler run.
	for v in viprof asprof; do
		[ -f "$T/b.$v" ] || continue
		paste -d' ' "$T/b.$v" "$T/b.base" | awk '{print $1 - $3, $2 - $4}' >"$T/o.$v"
	done
	local bw bc
	bw=$(col 1 "$T/b.base" | med %.2f); bc=$(col 2 "$T/b.base" | med %.2f)
	echo "(b) overhead on FixedWork ($jv), no -XX:+PreserveFramePointer, $R interleaved rounds"
	echo "    median wall and CPU (user+sys of the process tree) in s (min-max); overhead = median of per-round differences"
	printf "  %-28s wall %6.2f (%s)          cpu %6.2f (%s)\n" "no profiler" "$bw" "$(col 1 "$T/b.base" | spread)" "$bc" "$(col 2 "$T/b.base" | spread)"
	for v in viprof asprof; do
		if [ ! -f "$T/b.$v" ]; then
			echo "  async-profiler: skipped (set ASPROF_HOME or --asprof DIR to an async-profiler build)"
			continue
		fi
		local ow oc label
		ow=$(col 1 "$T/o.$v" | med %.2f); oc=$(col 2 "$T/o.$v" | med %.2f)
		eval "ow_$v=$ow oc_$v=$oc"
		case $v in viprof) label="viprof record -g -F 999" ;; asprof) label="async-profiler cpu 1001001ns" ;; esac
		printf "  %-28s wall %6.2f (%s) %+6.1f%%  cpu %6.2f (%s) %+6.1f%%  samples/run %s\n" "$label" \
			"$(col 1 "$T/b.$v" | med %.2f)" "$(col 1 "$T/b.$v" | spread)" "$(echo "100 * $ow / $bw" | bc -l)" \
			"$(col 2 "$T/b.$v" | med %.2f)" "$(col 2 "$T/b.$v" | spread)" "$(echo "100 * $oc / $bc" | bc -l)" "$(med <"$T/n.$v")"
	done
	if [ -n "$AP" ]; then
		# A ratio of two overheads means nothing when the peer's is within the noise (<= 0).
		ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2fx (%.2f s / %.2f s)", a / b, a, b; else printf "n/a (async-profiler %.2f s, within the noise)", b}'; }
		echo "  overhead viprof / async-profiler: wall $(ratio "$ow_viprof" "$ow_asprof"), cpu $(ratio "$oc_viprof" "$oc_asprof")"
	fi
}

case $ONLY in
a) part_a ;;
b) part_b ;;
c) part_c ;;
'') part_a; part_c; part_b ;;
*) echo "walker.sh: --only a, b or c" >&2; exit 2 ;;
esac
