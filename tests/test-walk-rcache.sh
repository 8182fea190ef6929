#!/usr/bin/env bash
# The walker's per-CPU cache of native caller rules (sampler-kernel/walker.bpf.h,
# WALK_RCACHE) against the slow path it stands for, with VIPROF_DEBUG_RCACHE: the cache
# then serves no walk; every caller pc walked through the mapping and rule searches is
# compared with what the cache holds for it, and the recorder prints the counts.
#   check: zcaller (no frame pointers, libz and libc) under record -g -F 999 in its
#          squeeze and read modes: at least 500 cached entries compared, none different.
#   plant: the same with every entry stored with a wrong rule: every comparison must see
#          it (the check is not blind to a stale entry).
# Usage: test-walk-rcache.sh check|plant VIPROF ZCALLER (root; exits 77 to skip).
set -u
mode=$1 vp=$2 zc=$3
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for the BPF sampler"; exit 77; }
tmp=$(mktemp -d /tmp/vp-test-walk-rcache-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
for w in squeeze read; do
	VIPROF_DEBUG_RCACHE=$mode "$vp" record -g -F 999 -q --backend bpf -o "$tmp/s-$w" -- "$zc" "$w" 3 \
		>"$tmp/out" 2>"$tmp/err"
	rc=$?
	line=$(grep 'walker rule cache:' "$tmp/err")
	echo "$w: $line"
	if [ $rc != 0 ] || [ -z "$line" ]; then
		echo "FAIL: viprof record exited $rc without the rule cache's counts:"; cat "$tmp/err"; exit 1
	fi
	read -r hits wrong fills <<<"$(sed -E 's/.*: ([0-9]+) hits compared, ([0-9]+) wrong, ([0-9]+) fills.*/\1 \2 \3/' <<<"$line")"
	if [ "$hits" -lt 500 ]; then
		echo "FAIL: $w: only $hits cached entries compared (want 500 or more: the cache was not exercised)"; fail=1
	elif [ "$mode" = check ] && [ "$wrong" != 0 ]; then
		echo "FAIL: $w: $wrong of $hits cached rules differ from the searches' rule"; fail=1
	elif [ "$mode" = plant ] && [ "$wrong" != "$hits" ]; then
		echo "FAIL: $w: only $wrong of $hits planted wrong rules were seen as wrong"; fail=1
	fi
	rm -rf "$tmp/s-$w"
done
[ $fail = 0 ] && echo "PASS: $mode"
exit $fail
