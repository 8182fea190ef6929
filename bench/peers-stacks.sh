#!/usr/bin/env bash
# Whole stacks without frame pointers, viprof beside its peers: the same workloads under
# `viprof record -g`, async-profiler and perf, one table of correctness figures.
#   InterpSplit  tests/java/InterpSplit.java, three interpreted callers of one compiled
#                method (Hot.spin) for 50/30/20 % of its CPU time (the thread's own CPU clock is
#                the "expected" column): each caller's share of the Hot.spin samples that
#                name a caller, and (in brackets) how many Hot.spin samples name one.
#                Launched by the profiler, on OpenJDK 17 and Temurin 25.
#   Workers      tests/java/Workers.java started without -XX:+PreserveFramePointer, then
#                attached for 5 s (viprof record -g -p PID -d 5; asprof -d 5 PID): the share
#                of worker-thread samples in Java code (innermost user frame a Java method)
#                whose stack holds Workers$Worker.run and java.lang.Thread.run; in brackets
#                the same share of all worker-thread samples.
#   zcaller      tests/fixtures/unwind/zcaller squeeze 4 (C, no frame pointers, calls libz's
#                compress2 from squeeze()): the share of samples inside libz (innermost user
#                frame in libz) whose stack reaches squeeze().
# Every profiler samples at 999 Hz / 1001001 ns on CPU time. Java columns compare
# viprof with async-profiler (its default stack walk, vm structs); zcaller compares it
# with async-profiler preloaded (cstack=dwarf; its cstack=fp figure is printed below the
# table), perf record --call-graph dwarf and perf record -g (frame pointers).
# perf 6.1 aborts while any BPF program is loaded on this kernel, so perf runs only after
# viprof is done and no other BPF program is loaded (waits up to 2 minutes, then tries).
#
# Usage: bench/peers-stacks.sh [--asprof DIR] [BUILD_DIR]   (root)
#   --asprof DIR  an async-profiler build (DIR/lib/libasyncProfiler.so, DIR/bin/asprof),
#                 default $ASPROF_HOME; without it that column says why it is empty.
#   JDK17=DIR, JDK25=DIR override the two JDKs.
set -euo pipefail
AP=${ASPROF_HOME:-}
while [ $# -gt 0 ]; do
	case $1 in
	--asprof) AP=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "peers-stacks.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
B=$(cd "${1:-build}" && pwd)
VP=$B/cli/viprof; CLS=$B/tests/java/classes; Z=$B/tests/fixtures/unwind/zcaller
JDK17=${JDK17:-/usr/lib/jvm/java-17-openjdk-amd64}; JDK25=${JDK25:-/usr/lib/jvm/temurin-25-jdk-amd64}
[ -x "$VP" ] && [ -f "$CLS/InterpSplit.class" ] && [ -f "$CLS/Workers.class" ] ||
	{ echo "peers-stacks.sh: build first (need $VP and the classes in $CLS): cmake --build $B" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "peers-stacks.sh: needs root (BPF, perf); run it with sudo" >&2; exit 2; }
if [ -n "$AP" ] && [ ! -f "$AP/lib/libasyncProfiler.so" ]; then
	echo "peers-stacks.sh: no $AP/lib/libasyncProfiler.so (--asprof/ASPROF_HOME names an async-profiler build directory)" >&2
	exit 2
fi
T=$(mktemp -d /tmp/vp-peers.XXXXXX)
JP=
cleanup() { [ -z "$JP" ] || kill "$JP" 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

declare -A CELL
NOTES=()
# note TEXT: sets MARK to the footnote mark of TEXT (numbered in order of first use); not
# called in a $(...) subshell, where the list would be lost.
note() {
	local i
	for i in "${!NOTES[@]}"; do [ "${NOTES[$i]}" = "$1" ] && { MARK="($((i + 1)))"; return; }; done
	NOTES+=("$1"); MARK="(${#NOTES[@]})"
}
[ -n "$AP" ] || { note "async-profiler: skipped (set ASPROF_HOME or --asprof DIR to an async-profiler build)"; AP_WHY=$MARK; }
note "perf: names no JIT-compiled or interpreted Java frame without a perf map agent, which this machine does not have"; PERF_JAVA=$MARK
AP_NATIVE_WHY=

# async-profiler's collapsed stacks in viprof's folded spelling: the thread name first
# (-t gives "[NAME tid=N]") and dots in class names.
ap_norm() { sed -e 's/^\[\([^]]*\) tid=[0-9]*\];/\1;/' -e '/Interp\|Worker/ s#/#.#g' "$1"; }

interp_shares() { # FOLDED
	awk '/InterpSplit\$Hot\.spin/ {n=$NF; t+=n; if (/InterpSplit\.callerA/) a+=n; else if (/InterpSplit\.callerB/) b+=n; else if (/InterpSplit\.callerC/) c+=n}
	     END {s=a+b+c; if (s) printf "%.1f/%.1f/%.1f [%.0f%% of %d]", 100*a/s, 100*b/s, 100*c/s, 100*s/t, t; else printf "no caller [of %d]", t}' "$1"
}

worker_reach() { # FOLDED (thread name first)
	awk '$0 ~ /^worker-/ {n=$NF; $NF=""; c=split($0, f, ";"); leaf=""
	         for (i=c; i>1; i--) { g=f[i]; sub(/ +$/, "", g); if (g !~ /_\[k\]$/) { leaf=g; break } }
	         ok=(/Workers\$Worker\.run/ && /java\.lang\.Thread\.run/)
	         all+=n; if (ok) ra+=n
	         if (leaf ~ /_\[[ji0-9]\]$/) { j+=n; if (ok) rj+=n } }
	     END {if (j) printf "%.1f%% of %d [all %.1f%%]", 100*rj/j, j, 100*ra/all; else printf "no Java samples [of %d]", all}' "$1"
}

LIBZ=$(ldd "$Z" 2>/dev/null | awk '/libz\.so/ {print $3}')
nm -D --defined-only "$LIBZ" 2>/dev/null | awk '{print $3}' >"$T/libz.syms"
libz_reach() { # FOLDED: samples whose innermost user frame is in libz, reaching squeeze()
	awk 'FNR==NR {z[$1]=1; next}
	     {n=$NF; $NF=""; c=split($0, f, ";"); leaf=""
	      for (i=c; i>1; i--) { g=f[i]; sub(/ +$/, "", g); if (g !~ /_\[k\]$/) { leaf=g; break } }
	      sub(/@.*/, "", leaf)
	      if (leaf ~ /libz\.so/ || (leaf in z)) { t+=n; if (/;squeeze(;|$| )/) r+=n } }
	     END {if (t) printf "%.1f%% of %d", 100*r/t, t; else printf "no libz samples"}' "$T/libz.syms" "$1"
}

# perf script -> folded: frames outermost first; kernel frames _[k]; a frame without a
# symbol named by its object file; one line per sample.
perf2folded() {
	perf script -F comm,ip,sym,dso -i "$1" 2>/dev/null | awk '
	function flush() { if (n) { s=comm; for (i=n; i>=1; i--) s=s ";" fr[i]; print s, 1 } n=0 }
	/^[^ \t]/ { flush(); comm=$1; next }
	/^[ \t]+[0-9a-f]+ / { sym=$2; dso=$NF; gsub(/[()]/, "", dso)
	    if (sym == "[unknown]") sym=dso; else sub(/\+0x[0-9a-f]+$/, "", sym)
	    if (dso ~ /kernel\.kallsyms/) sym=sym "_[k]"
	    fr[++n]=sym; next }
	/^$/ { flush() }
	END { flush() }'
}

wait_no_bpf() {
	local i
	for i in $(seq 240); do
		[ "$(bpftool prog show 2>/dev/null | grep -c '^[0-9]')" = 0 ] && return 0
		sleep 0.5
	done
	return 1
}

# perf_run COL CMD...: perf record, retried when it aborts because of a BPF program.
perf_run() {
	local col=$1 try; shift
	for try in 1 2 3; do
		wait_no_bpf || true
		rm -f "$T/perf.data"
		if perf record -q -e cpu-clock -F 999 "$@" -o "$T/perf.data" -- "$Z" squeeze 4 >/dev/null 2>"$T/perf.err"; then
			perf2folded "$T/perf.data" >"$T/$col.folded"
			CELL[zcaller,$col]=$(libz_reach "$T/$col.folded")
			return
		fi
	done
	note "perf aborted 3 times: another tool's BPF programs stayed loaded (perf 6.1 on this kernel); last error: $(tail -1 "$T/perf.err")"
	CELL[zcaller,$col]="aborted $MARK"
}

for jdk in 17 25; do
	J=JDK$jdk; J=${!J}
	row=interp$jdk
	if [ ! -x "$J/bin/java" ]; then
		note "no JDK at $J"; CELL[$row,expected]="no JDK $MARK"; continue
	fi
	rm -rf "$T/s"
	"$VP" record -q -g -F 999 -o "$T/s" -- "$J/bin/java" -cp "$CLS" InterpSplit 6 >"$T/out" 2>"$T/err" ||
		{ echo "peers-stacks.sh: viprof record of InterpSplit failed:" >&2; tail -5 "$T/err" >&2; exit 1; }
	CELL[$row,expected]=$(awk '{s=$1+$2+$3; printf "%.1f/%.1f/%.1f", 100*$1/s, 100*$2/s, 100*$3/s}' "$T/out")
	"$VP" report "$T/s" --format folded -o "$T/v.folded" 2>>"$T/report.err"
	CELL[$row,viprof]=$(interp_shares "$T/v.folded")
	if [ -n "$AP" ]; then
		"$J/bin/java" "-agentpath:$AP/lib/libasyncProfiler.so=start,event=cpu,interval=1001001,ann,file=$T/a.collapsed,collapsed" \
			-cp "$CLS" InterpSplit 6 >/dev/null 2>"$T/err" || { note "async-profiler on JDK $jdk: $(tail -1 "$T/err")"; CELL[$row,asprof]="failed $MARK"; }
		[ -n "${CELL[$row,asprof]:-}" ] || { ap_norm "$T/a.collapsed" >"$T/a.folded"; CELL[$row,asprof]=$(interp_shares "$T/a.folded"); }
	fi

	row=workers$jdk
	CELL[$row,expected]="100%"
	"$J/bin/java" -cp "$CLS" Workers 60 >"$T/wout" 2>&1 & JP=$!
	for i in $(seq 100); do grep -q ready "$T/wout" && break; sleep 0.1; done
	sleep 2   # past the first compilations, as a running service would be
	rm -rf "$T/s"
	"$VP" record -q -g -F 999 -p "$JP" -d 5 -o "$T/s" 2>"$T/err" ||
		{ echo "peers-stacks.sh: viprof record -p of Workers failed:" >&2; tail -5 "$T/err" >&2; exit 1; }
	"$VP" report "$T/s" --format folded -o "$T/v.folded" 2>>"$T/report.err"
	CELL[$row,viprof]=$(worker_reach "$T/v.folded")
	if [ -n "$AP" ]; then
		if "$AP/bin/asprof" -e cpu -i 1001001 -t -a -d 5 -o collapsed -f "$T/a.collapsed" "$JP" >/dev/null 2>"$T/err"; then
			ap_norm "$T/a.collapsed" >"$T/a.folded"; CELL[$row,asprof]=$(worker_reach "$T/a.folded")
		else
			note "asprof attach on JDK $jdk: $(tail -1 "$T/err")"; CELL[$row,asprof]="failed $MARK"
		fi
	fi
	kill "$JP" 2>/dev/null || true; wait "$JP" 2>/dev/null || true; JP=
	for row in interp$jdk workers$jdk; do CELL[$row,perfdwarf]="- $PERF_JAVA"; CELL[$row,perffp]="- $PERF_JAVA"; done
done

if [ -x "$Z" ] && [ -n "$LIBZ" ]; then
	CELL[zcaller,expected]="100%"
	rm -rf "$T/s"
	"$VP" record -q -g -F 999 -o "$T/s" -- "$Z" squeeze 4 >/dev/null 2>"$T/err" ||
		{ echo "peers-stacks.sh: viprof record of zcaller failed:" >&2; tail -5 "$T/err" >&2; exit 1; }
	"$VP" report "$T/s" --format folded -o "$T/v.folded" 2>>"$T/report.err"
	CELL[zcaller,viprof]=$(libz_reach "$T/v.folded")
	if [ -n "$AP" ]; then
		for cs in dwarf fp; do
			rm -f "$T/a.collapsed"
			LD_PRELOAD=$AP/lib/libasyncProfiler.so ASPROF_COMMAND=start,event=cpu,interval=1001001,cstack=$cs,threads,file=$T/a.collapsed,collapsed \
				"$Z" squeeze 4 >/dev/null 2>&1 || true
			# With threads, each stack starts with its thread, where viprof's has the comm.
			if [ -s "$T/a.collapsed" ]; then ap_norm "$T/a.collapsed" >"$T/a.folded"; r=$(libz_reach "$T/a.folded"); else r="no output"; fi
			[ "$cs" = dwarf ] && CELL[zcaller,asprof]="$r"
			if [ "$cs" = fp ]; then note "async-profiler column of zcaller: cstack=dwarf; with cstack=fp it gives $r"; AP_NATIVE_WHY=$MARK; fi
		done
		CELL[zcaller,asprof]="${CELL[zcaller,asprof]} $AP_NATIVE_WHY"
	fi
	if command -v perf >/dev/null; then
		perf_run perfdwarf --call-graph dwarf
		perf_run perffp -g
	else
		note "perf: not installed (bash scripts/deps.sh)"; CELL[zcaller,perfdwarf]="- $MARK"; CELL[zcaller,perffp]="- $MARK"
	fi
else
	note "no $Z or no libz: build the tree with the unwind fixtures"; CELL[zcaller,expected]="- $MARK"
fi

for row in interp17 interp25 workers17 workers25 zcaller; do
	[ -n "$AP" ] || CELL[$row,asprof]="- $AP_WHY"
done
fmt="%-22s %-15s %-30s %-30s %-24s %s\n"
echo "stacks without frame pointers, viprof -g beside its peers ($(date -u +%Y-%m-%d), $(nproc) vCPUs)"
printf "$fmt" "workload" "expected" "viprof record -g" "async-profiler" "perf --call-graph dwarf" "perf -g (fp)"
label() {
	case $1 in
	interp17) echo "InterpSplit A/B/C, 17" ;; interp25) echo "InterpSplit A/B/C, 25" ;;
	workers17) echo "Workers reach run, 17" ;; workers25) echo "Workers reach run, 25" ;;
	zcaller) echo "zcaller reach squeeze" ;;
	esac
}
for row in interp17 interp25 workers17 workers25 zcaller; do
	printf "$fmt" "$(label $row)" "${CELL[$row,expected]:--}" "${CELL[$row,viprof]:--}" "${CELL[$row,asprof]:--}" \
		"${CELL[$row,perfdwarf]:--}" "${CELL[$row,perffp]:--}"
done
for i in "${!NOTES[@]}"; do echo "  ($((i + 1))) ${NOTES[$i]}"; done
echo "  17 = $("$JDK17/bin/java" -version 2>&1 | head -1); 25 = $("$JDK25/bin/java" -version 2>&1 | head -1)"
echo "  [..]: InterpSplit: share of Hot.spin samples that name a caller; Workers: share among all worker samples"
