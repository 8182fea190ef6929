#!/usr/bin/env bash
# Report speed and memory at scale: `viprof report` (text, folded, pprof, HTML) against
# `perf report --stdio`, on recordings of one workload with deep Java stacks.
#
# Workload: bench/workloads/DeepJava.java, four threads recursing 30-60 Java frames deep
# (JIT, inlined, interpreted, libjvm, libc and kernel frames), -XX:+PreserveFramePointer
# so that perf's frame-pointer walk sees the same stacks; perf also gets the JVM's
# /tmp/perf-PID.map (-XX:+DumpPerfMapAtExit) so that it names the JIT frames too.
#
# Recordings: viprof and perf each record DeepJava for REC_SEC seconds at -F FREQ -g
# (real recordings of the same run length and rate; ~100k samples each by default).
# The viprof session is then scaled to at least 1M samples by bench/gen-session, which
# writes each sample COPIES times (same time: same mappings, same code-map epoch); a
# 60 s `record -a -F 10000` would cost this shared VM a minute of both CPUs. perf.data
# cannot be scaled like that, so perf's cost is measured on its real recording and
# compared per sample and per frame:
#   ratio = (perf seconds / perf samples / perf mean depth)
#         / (viprof seconds / viprof samples / viprof mean depth)
# perf's cost per sample does not fall as its input grows (it keeps every sample's
# callchain in its hist entries), so this does not favour viprof; the same ratio is
# also printed for the real (unscaled) session, where both sides read a recording of
# the same run length.
#
# Rounds are interleaved (each round runs every command once, order rotating); times
# are medians with the spread (min-max); CPU = user+sys of the report process; peak
# RSS from /usr/bin/time (max RSS of the process), printed per million samples.
# Ends with "TARGET name measured=X target=Y met=yes|no" lines.
# Usage: bench/report-scale.sh [BUILD_DIR] [ROUNDS]   (root; needs perf, bpftool, jq, java)
#   REC_SEC=N    length of each recording (default 10)
#   FREQ=N       sampling frequency (default 4999)
#   MIN_SAMPLES  samples of the scaled session (default 1000000)
set -euo pipefail
B=$(realpath "${1:-build}")
ROUNDS=${2:-3}
REC_SEC=${REC_SEC:-10}
FREQ=${FREQ:-4999}
MIN_SAMPLES=${MIN_SAMPLES:-1000000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VP=$B/cli/viprof
GEN=$B/bench/gen-session
JDK=${JDK:-/usr/lib/jvm/java-17-openjdk-amd64}
TIME=/usr/bin/time
for tool in perf bpftool jq bc "$JDK/bin/java"; do
	command -v "$tool" >/dev/null || { echo "report-scale: $tool not found" >&2; exit 1; }
done
[ -x "$TIME" ] || { echo "report-scale: $TIME not found; apt-get install time" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "report-scale: run as root (viprof's BPF sampler)" >&2; exit 1; }
[ -x "$VP" ] && [ -x "$GEN" ] || { echo "report-scale: $VP or $GEN missing; build first" >&2; exit 1; }
T=$(mktemp -d /tmp/vp-rscale.XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM HUP PIPE

# perf 6.1 aborts while any BPF program is loaded (other users' viprof recordings):
# every perf command waits for none (at most 120 s) and is retried when it aborts.
wait_no_bpf() {
	local i n
	for i in $(seq 240); do
		n=$(bpftool prog show -j 2>/dev/null | jq 'length' 2>/dev/null || echo 0)
		[ "${n:-0}" = 0 ] && return 0
		sleep 0.5
	done
}
# timed NAME CMD...: appends "wall cpu maxrss_kb" of one run of CMD to $T/NAME.
timed() {
	local name=$1 try; shift
	for try in 1 2 3 4 5; do
		[ "$1" = perf ] && wait_no_bpf
		if "$TIME" -f "%e %U %S %M" -o "$T/time" "$@" >/dev/null 2>"$T/last.err"; then
			awk '{printf "%s %.2f %s\n", $1, $2 + $3, $4}' "$T/time" >>"$T/$name"
			return 0
		fi
		echo "report-scale: $name failed (try $try): $(tail -1 "$T/last.err")" >&2
	done
	exit 1
}
med() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
spread() { sort -n | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f-%.2f", lo, hi}'; }
col() { cut -d' ' -f"$2" "$T/$1"; }

"$JDK/bin/javac" -d "$T/cls" "$ROOT/bench/workloads/DeepJava.java"
JAVA=("$JDK/bin/java" -XX:+PreserveFramePointer -cp "$T/cls")

echo "== recordings: DeepJava ${REC_SEC} s at -F $FREQ -g, viprof then perf"
"$VP" record -q -g -F "$FREQ" -o "$T/vp" -- "${JAVA[@]}" DeepJava "$REC_SEC" >/dev/null 2>"$T/rec.err" ||
	{ cat "$T/rec.err" >&2; exit 1; }
for try in 1 2 3 4 5; do
	wait_no_bpf
	rm -f "$T/perf.data"
	if perf record -q -g -F "$FREQ" -o "$T/perf.data" -- "${JAVA[@]}" -XX:+UnlockDiagnosticVMOptions \
		-XX:+DumpPerfMapAtExit DeepJava "$REC_SEC" >/dev/null 2>"$T/perf-rec.err"; then
		break
	fi
	echo "report-scale: perf record failed (try $try): $(tail -1 "$T/perf-rec.err")" >&2
	[ "$try" = 5 ] && exit 1
done

# Samples and mean depth of each recording, from the tools' own outputs.
"$VP" report "$T/vp" -F folded -o "$T/vp.folded" 2>/dev/null
read -r VP_N VP_D < <(awk '{c=$NF; n=split($0,a,";"); d+=n*c; s+=c} END {printf "%d %.1f\n", s, d/s}' "$T/vp.folded")
wait_no_bpf
perf script -i "$T/perf.data" -F ip 2>/dev/null |
	awk 'NF==0 {if (d) {s++; t+=d}; d=0; next} {d++} END {if (d) {s++; t+=d}; printf "%d %.1f\n", s, t/s}' >"$T/perf.depth"
read -r PF_N PF_D <"$T/perf.depth"
COPIES=$(( (MIN_SAMPLES + VP_N - 1) / VP_N ))
BIG_N=$("$GEN" "$T/vp" "$T/big" "$COPIES")
cp -r "$T/vp/jit" "$T/vp/meta.json" "$T/big/"
printf "  viprof session: %d samples, mean depth %.1f frames (%s)\n" "$VP_N" "$VP_D" "$(du -sh "$T/vp" | cut -f1)"
printf "  perf.data:      %d samples, mean depth %.1f frames (%s)\n" "$PF_N" "$PF_D" "$(du -sh "$T/perf.data" | cut -f1)"
printf "  scaled session: %d samples (%d copies of each)\n" "$BIG_N" "$COPIES"

echo "== $ROUNDS interleaved rounds"
FMTS=(text folded pprof html)
for r in $(seq 1 "$ROUNDS"); do
	cmds=(perf "${FMTS[@]/#/vp-}" "${FMTS[@]/#/big-}")
	n=${#cmds[@]}
	for k in $(seq 0 $((n - 1))); do
		c=${cmds[$(( (k + r) % n ))]}
		case $c in
		perf) timed perf perf report -i "$T/perf.data" --stdio ;;
		vp-*) timed "$c" "$VP" report "$T/vp" -F "${c#vp-}" -o /dev/null ;;
		big-*) timed "$c" "$VP" report "$T/big" -F "${c#big-}" -o /dev/null ;;
		esac
	done
done

pw=$(col perf 1 | med); pc=$(col perf 2 | med); pm=$(col perf 3 | med)
printf "  %-28s wall %7.2f s (%s)  cpu %7.2f s (%s)  peak RSS %6.0f MB  %6.0f MB per M samples\n" \
	"perf report --stdio" "$pw" "$(col perf 1 | spread)" "$pc" "$(col perf 2 | spread)" \
	"$(echo "$pm / 1024" | bc -l)" "$(echo "$pm / 1024 / $PF_N * 1000000" | bc -l)"
# ratio SECONDS SAMPLES: perf's cost per sample-frame over viprof's.
ratio() { echo "($pc / $PF_N / $PF_D) / ($1 / $2 / $VP_D)" | bc -l; }
# ratio_s SECONDS SAMPLES: per sample only (viprof's stacks are deeper: inlined frames).
ratio_s() { echo "($pc / $PF_N) / ($1 / $2)" | bc -l; }
worst=; worst_rss=0
for f in "${FMTS[@]}"; do
	for set in vp big; do
		n=$VP_N; [ $set = big ] && n=$BIG_N
		w=$(col "$set-$f" 1 | med); c=$(col "$set-$f" 2 | med); m=$(col "$set-$f" 3 | med)
		[ "$(echo "$c < 0.01" | bc)" = 1 ] && c=0.01
		rt=$(ratio "$c" "$n"); rs=$(ratio_s "$c" "$n")
		rss_m=$(echo "$m / 1024 / $n * 1000000" | bc -l)
		printf "  %-28s wall %7.2f s (%s)  cpu %7.2f s (%s)  peak RSS %6.0f MB  %6.0f MB per M samples  %5.1fx perf per sample-frame, %5.1fx per sample\n" \
			"viprof $f ($n)" "$w" "$(col "$set-$f" 1 | spread)" "$c" "$(col "$set-$f" 2 | spread)" \
			"$(echo "$m / 1024" | bc -l)" "$rss_m" "$rt" "$rs"
		if [ $set = big ]; then
			echo "$f $rt" >>"$T/ratios"
			[ "$(echo "$rss_m > $worst_rss" | bc)" = 1 ] && worst_rss=$rss_m
		fi
	done
done
while read -r f rt; do
	printf "TARGET report-scale-%s-vs-perf measured=%.1f target=20 met=%s\n" "$f" "$rt" \
		"$([ "$(echo "$rt >= 20" | bc)" = 1 ] && echo yes || echo no)"
done <"$T/ratios"
# Memory bounded: the scaled session's peak RSS per million samples, at most 100 MB
# (what interned frames, stacks and locations take; no per-sample storage).
printf "TARGET report-scale-rss-MB-per-Msamples measured=%.0f target=100 met=%s\n" "$worst_rss" \
	"$([ "$(echo "$worst_rss <= 100" | bc)" = 1 ] && echo yes || echo no)"
