#!/usr/bin/env bash
# Native benchmarks, each printed as ratios measured side by side in one run (the
# machine is shared and noisy: absolute times are not comparable between runs).
#   1. overhead: fixedwork alone vs under `viprof record -F 999 -g` vs `perf record -F 999 -g`
#   2. recorder CPU per sample (viprof's own user+sys / samples, -p mode)
#   3. report speed: `viprof report` vs `perf report --stdio` on recordings of the same run
#   4. bytes per sample: session directory vs perf.data
# perf 6.1 (Debian 12) aborts reading its own data on kernel 6.18 when BPF events were
# recorded (assertion in util/build-id.c), hence --no-bpf-event for every perf record.
# Usage: bench/run-native.sh [BUILD_DIR] [ROUNDS]   (root; needs perf)
set -euo pipefail
B=$(realpath "${1:-build}")
ROUNDS=${2:-5}
VP=$B/cli/viprof
FW=$B/bench/fixedwork
WORK=${FW_ITERS:-300}
command -v perf >/dev/null || { echo "bench: perf not found; apt-get install linux-perf" >&2; exit 1; }
[ -x "$VP" ] && [ -x "$FW" ] || { echo "bench: build first (cmake --build $B)" >&2; exit 1; }
T=$(mktemp -d /tmp/vp-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT

now() { date +%s.%N; }
elapsed() { local s; s=$(now); "$@" >/dev/null 2>&1; echo "$(now) - $s" | bc -l; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "== overhead: fixedwork $WORK 2 (fixed work on 2 threads), $ROUNDS interleaved rounds"
: >"$T/alone"; : >"$T/vp"; : >"$T/perf"
for r in $(seq "$ROUNDS"); do
	elapsed "$FW" "$WORK" 2 >>"$T/alone"
	rm -rf "$T/s"; elapsed "$VP" record -q -F 999 -g -o "$T/s" -- "$FW" "$WORK" 2 >>"$T/vp"
	rm -f "$T/p.data"; elapsed perf record -q --no-bpf-event -F 999 -g -o "$T/p.data" -- "$FW" "$WORK" 2 >>"$T/perf"
done
a=$(median <"$T/alone"); v=$(median <"$T/vp"); p=$(median <"$T/perf")
printf 'median wall: alone %.3fs  viprof %.3fs  perf %.3fs\n' "$a" "$v" "$p"
printf 'overhead: viprof %+.2f%%  perf %+.2f%%  (viprof/perf time ratio %.4f)\n' \
	"$(echo "($v/$a - 1)*100" | bc -l)" "$(echo "($p/$a - 1)*100" | bc -l)" "$(echo "$v/$p" | bc -l)"

echo "== one run recorded by both at once (-p, 8 s): recorder CPU, report speed, size"
"$FW" 100000 2 >/dev/null &
FWPID=$!
sleep 0.5
rm -rf "$T/s" "$T/p.data"
bash -c "'$VP' record -q -F 999 -g -p $FWPID -d 8 -o '$T/s' 2>'$T/vp.err'; times" >"$T/vp.times" &
VPJOB=$!
perf record -q --no-bpf-event -F 999 -g -p "$FWPID" -o "$T/p.data" -- sleep 8 >/dev/null 2>&1 || true
wait "$VPJOB" || true
kill "$FWPID" 2>/dev/null || true
wait "$FWPID" 2>/dev/null || true
# `times` prints the shell's children (viprof) user and system time on its second line.
cpu=$(sed -n 2p "$T/vp.times" | awk '{ split($1,u,"m"); split($2,s,"m"); sub("s","",u[2]); sub("s","",s[2]); print u[1]*60+u[2]+s[1]*60+s[2] }')
vs=$(grep -o '[0-9]* samples' "$T/vp.err" | head -1 | awk '{print $1}')
ps=$(perf script -F time -i "$T/p.data" 2>/dev/null | wc -l)
printf 'recorder CPU: %.3fs for %d samples = %.3f us/sample\n' "$cpu" "$vs" "$(echo "$cpu*1000000/$vs" | bc -l)"
vb=$(du -sb "$T/s" | cut -f1); pb=$(stat -c %s "$T/p.data")
printf 'size: viprof %d B (%.1f B/sample, %d samples)  perf.data %d B (%.1f B/sample, %d samples)  ratio %.3f per sample\n' \
	"$vb" "$(echo "$vb/$vs" | bc -l)" "$vs" "$pb" "$(echo "$pb/$ps" | bc -l)" "$ps" "$(echo "($vb/$vs)/($pb/$ps)" | bc -l)"
: >"$T/rv"; : >"$T/rp"
for r in $(seq "$ROUNDS"); do
	elapsed "$VP" report "$T/s" >>"$T/rv"
	elapsed perf report --stdio -i "$T/p.data" >>"$T/rp"
done
rv=$(median <"$T/rv"); rp=$(median <"$T/rp")
printf 'report: viprof %.3fs  perf report --stdio %.3fs  speedup %.1fx (per sample: %.1fx)\n' "$rv" "$rp" \
	"$(echo "$rp/$rv" | bc -l)" "$(echo "($rp/$ps)/($rv/$vs)" | bc -l)"
