#!/usr/bin/env bash
# The stack walker's cost per sample, side by side with the frame-pointer walk, on one
# workload whose user stacks are DEPTH frames deep (bench/workloads/deepstack, built with
# frame pointers so that both walks reach the bottom):
#   viprof record -g -F 999 -p PID --stack-walk tables   vs   --stack-walk fp
# in interleaved rounds. For each recording, the BPF program's run time per run comes
# from the recorder's program fds (/proc/PID/fdinfo: run_time_ns, run_cnt; needs
# kernel.bpf_stats_enabled, switched on for the measurement only), between 1.5 s and
# (SEC - 0.5) s into it; the mean user frames per sample come from the session.
# Usage: bench/walker.sh [BUILD_DIR] [ROUNDS] [DEPTH]   (root)
set -euo pipefail
B=${1:-build}; R=${2:-5}; DEPTH=${3:-30}; SEC=${SEC:-5}
VP=$B/cli/viprof; DS=$B/bench/deepstack
[ -x "$VP" ] && [ -x "$DS" ] || { echo "walker.sh: build first (need $VP and $DS)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "walker.sh: needs root (BPF)" >&2; exit 2; }
T=$(mktemp -d /tmp/vp-walker.XXXXXX)
OLD=$(sysctl -n kernel.bpf_stats_enabled)
WPID=
cleanup() { sysctl -q -w kernel.bpf_stats_enabled="$OLD" || true; [ -n "$WPID" ] && kill "$WPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

# "runs ns" summed over the perf_event programs (on_sample) the recorder holds.
bpf_runs() {
	local f id runs ns tot_r=0 tot_n=0
	for f in /proc/"$1"/fdinfo/*; do
		id=$(awk '$1=="prog_id:"{print $2}' "$f" 2>/dev/null) || continue
		[ -n "$id" ] || continue
		bpftool prog show id "$id" 2>/dev/null | grep -q "perf_event.*name on_sample" || continue
		runs=$(awk '$1=="run_cnt:"{print $2}' "$f"); ns=$(awk '$1=="run_time_ns:"{print $2}' "$f")
		tot_r=$((tot_r + ${runs:-0})); tot_n=$((tot_n + ${ns:-0}))
	done
	echo "$tot_r $tot_n"
}

one() { # MODE ROUND -> "ns_per_sample frames_per_sample"
	local mode=$1 s=$T/$1.$2 vpid a b
	"$DS" "$DEPTH" $((SEC + 3)) & WPID=$!
	sleep 0.3
	"$VP" record -q -g -F 999 --stack-walk "$mode" -p "$WPID" -d "$SEC" -o "$s" 2>"$T/err" & vpid=$!
	sleep 1.5; a=$(bpf_runs "$vpid")
	sleep "$(echo "$SEC - 2" | bc)"; b=$(bpf_runs "$vpid")
	wait "$vpid" || { cat "$T/err" >&2; exit 1; }
	kill "$WPID" 2>/dev/null; wait "$WPID" 2>/dev/null || true; WPID=
	set -- $a $b
	local fr
	fr=$("$VP" report "$s" --format folded --comm deepstack 2>/dev/null |
		awk '{n=$NF; $NF=""; c=split($0, f, ";"); k=0; for (i=1;i<=c;i++) if (f[i] !~ /_\[k\]/) k++; t+=n; s+=n*(k-1)} END {printf "%.1f", t ? s/t : 0}')
	echo "$(( ($4 - $2) / ( ($3 - $1) > 0 ? ($3 - $1) : 1) )) $fr"
}

sysctl -q -w kernel.bpf_stats_enabled=1
: >"$T/fp"; : >"$T/tables"
for r in $(seq 1 "$R"); do
	for m in fp tables; do one "$m" "$r" >>"$T/$m"; done
done
sysctl -q -w kernel.bpf_stats_enabled="$OLD"
med() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
fpns=$(cut -d' ' -f1 "$T/fp" | med); tns=$(cut -d' ' -f1 "$T/tables" | med)
fpfr=$(cut -d' ' -f2 "$T/fp" | med); tfr=$(cut -d' ' -f2 "$T/tables" | med)
echo "stack walker cost, deepstack depth $DEPTH, -F 999, $R interleaved rounds (median; all rounds below)"
printf "  %-28s %8s ns/sample  %5s user frames/sample   rounds: %s\n" "--stack-walk fp (bpf_get_stack)" "$fpns" "$fpfr" "$(cut -d' ' -f1 "$T/fp" | tr '\n' ' ')"
printf "  %-28s %8s ns/sample  %5s user frames/sample   rounds: %s\n" "--stack-walk tables (default)" "$tns" "$tfr" "$(cut -d' ' -f1 "$T/tables" | tr '\n' ' ')"
echo "  ratio tables/fp: $(echo "scale=2; $tns / $fpns" | bc)x; target: tables <= 2000 ns/sample at depth 30: $([ "$tns" -le 2000 ] && echo met || echo missed)"
