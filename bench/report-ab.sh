#!/usr/bin/env bash
# Two viprof builds side by side on the same sessions: `viprof report` CPU time of A
# (the baseline, e.g. main's build) against B (a change), per session and format.
# Rounds are interleaved (each round runs every command once, the order rotating) so
# that slow phases of this shared machine fall on both alike; each line gives the
# median CPU (user+sys) and wall of A and B with their spread, and the ratio A/B of the
# medians (above 1: B is faster). The outputs of A and B are compared too: a report
# that differs is printed as DIFFERS (a speed-up must not change what is shown).
# Usage: bench/report-ab.sh A_VIPROF B_VIPROF ROUNDS SESSION...
#   FORMATS="text folded pprof"   formats to time (default text folded pprof)
#   MEASURE=instructions          count each report's instructions under valgrind
#                                 (callgrind's I refs) instead of timing it: the same
#                                 count every run, for a machine too loaded for
#                                 times to tell a few percent apart (ROUNDS 1 is enough)
# Sessions: any recordings; bench/gen-session makes a large one out of a real one
# (bench/report-scale.sh shows how).
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 A_VIPROF B_VIPROF ROUNDS SESSION..." >&2; exit 2; }
A=$(realpath "$1"); B=$(realpath "$2"); ROUNDS=$3; shift 3
FORMATS=(${FORMATS:-text folded pprof})
TIME=/usr/bin/time
MEASURE=${MEASURE:-time}
[ -x "$TIME" ] || { echo "report-ab: $TIME not found; apt-get install time" >&2; exit 1; }
[ "$MEASURE" = time ] || command -v valgrind >/dev/null ||
	{ echo "report-ab: MEASURE=instructions needs valgrind" >&2; exit 1; }
T=$(mktemp -d /tmp/vp-rab.XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM HUP PIPE

# run NAME VIPROF SESSION FORMAT: appends "wall cpu" of one report to $T/NAME (with
# MEASURE=instructions: "0 instructions").
run() {
	if [ "$MEASURE" = instructions ]; then
		valgrind --tool=callgrind --callgrind-out-file=/dev/null "$2" report "$3" -F "$4" -o "$T/$1.out" \
			2>"$T/$1.vg" || { echo "report-ab: $2 report $3 -F $4 failed under valgrind" >&2; exit 1; }
		grep -v '^==' "$T/$1.vg" >"$T/$1.err" || true
		awk '/I *refs:/ {gsub(",", "", $NF); print "0 " $NF}' "$T/$1.vg" >>"$T/$1"
		return
	fi
	"$TIME" -f "%e %U %S" -o "$T/time" "$2" report "$3" -F "$4" -o "$T/$1.out" 2>"$T/$1.err" ||
		{ echo "report-ab: $2 report $3 -F $4 failed: $(tail -1 "$T/$1.err")" >&2; exit 1; }
	awk '{printf "%s %.2f\n", $1, $2 + $3}' "$T/time" >>"$T/$1"
}
med() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
spread() { sort -n | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f-%.2f", lo, hi}'; }

s=0
for S in "$@"; do
	s=$((s + 1))
	for f in "${FORMATS[@]}"; do
		k="s$s-$f"
		for r in $(seq 1 "$ROUNDS"); do
			if [ $((r % 2)) = 1 ]; then
				run "$k-a" "$A" "$S" "$f"; run "$k-b" "$B" "$S" "$f"
			else
				run "$k-b" "$B" "$S" "$f"; run "$k-a" "$A" "$S" "$f"
			fi
		done
		same=same; cmp -s "$T/$k-a.out" "$T/$k-b.out" && cmp -s "$T/$k-a.err" "$T/$k-b.err" || same=DIFFERS
		ca=$(cut -d' ' -f2 "$T/$k-a" | med); cb=$(cut -d' ' -f2 "$T/$k-b" | med)
		wa=$(cut -d' ' -f1 "$T/$k-a" | med); wb=$(cut -d' ' -f1 "$T/$k-b" | med)
		if [ "$MEASURE" = instructions ]; then
			printf "%-40s %-7s A %.0f instructions  B %.0f  A/B %.3f  output %s\n" "$(basename "$S")" "$f" \
				"$ca" "$cb" "$(echo "$ca / $cb" | bc -l)" "$same"
			continue
		fi
		printf "%-40s %-7s A cpu %6.2f s (%s) wall %6.2f  B cpu %6.2f s (%s) wall %6.2f  A/B cpu %.3f wall %.3f  output %s\n" \
			"$(basename "$S")" "$f" "$ca" "$(cut -d' ' -f2 "$T/$k-a" | spread)" "$wa" \
			"$cb" "$(cut -d' ' -f2 "$T/$k-b" | spread)" "$wb" \
			"$(echo "$ca / ($cb + 0.0001)" | bc -l)" "$(echo "$wa / ($wb + 0.0001)" | bc -l)" "$same"
	done
done
