#!/usr/bin/env bash
# The walker's shortcuts against the slow paths they stand for, with VIPROF_DEBUG_RCACHE
# (sampler-kernel/walker.bpf.h): the per-CPU cache of native caller rules (WALK_RCACHE)
# then serves no walk, and every caller pc walked through the mapping and rule searches is
# compared with what the cache holds for it; every compiled frame's blob found with the
# segment-map window (WALK_SEG_FN) is compared with the byte-per-hop search. The recorder
# prints the counts at the end.
#   check: zcaller (no frame pointers, libz and libc) under record -g -F 999 in its
#          squeeze and read modes, and a JVM (JitSplit, JDK 17): at least 500 cached
#          entries compared in each, none different; in the JVM at least 200 blobs, none
#          different.
#   plant: zcaller with every cache entry stored with a wrong rule: every comparison must
#          see it (the check is not blind to a stale entry).
# Usage: test-walk-rcache.sh check|plant VIPROF ZCALLER JDK_HOME JAVA_CLASSES
# (root; exits 77 to skip).
set -u
mode=$1 vp=$2 zc=$3 jdk=$4 classes=$5
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for the BPF sampler"; exit 77; }
tmp=$(mktemp -d /tmp/vp-test-walk-rcache-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
runs="squeeze read"
[ "$mode" = check ] && runs="$runs jvm"
for w in $runs; do
	if [ "$w" = jvm ]; then
		[ -x "$jdk/bin/java" ] && [ -f "$classes/JitSplit.class" ] ||
			{ echo "FAIL: no $jdk/bin/java or $classes/JitSplit.class (build java-fixtures)"; exit 1; }
		cmd=("$jdk/bin/java" -cp "$classes" JitSplit 3)
	else
		cmd=("$zc" "$w" 3)
	fi
	VIPROF_DEBUG_RCACHE=$mode "$vp" record -g -F 999 -q --backend bpf -o "$tmp/s-$w" -- "${cmd[@]}" \
		>"$tmp/out" 2>"$tmp/err"
	rc=$?
	line=$(grep 'walker rule cache:' "$tmp/err")
	echo "$w: $line"
	if [ $rc != 0 ] || [ -z "$line" ]; then
		echo "FAIL: viprof record exited $rc without the walker's counts:"; cat "$tmp/err"; exit 1
	fi
	num() { sed -E "s/.*$1.*/\\1/" <<<"$line"; }
	hits=$(num 'rule cache: ([0-9]+) hits compared') wrong=$(num 'hits compared, ([0-9]+) wrong')
	segs=$(num 'window: ([0-9]+) blobs compared') segwrong=$(num 'blobs compared, ([0-9]+) wrong')
	if [ "$hits" -lt 500 ]; then
		echo "FAIL: $w: only $hits cached entries compared (want 500 or more: the cache was not exercised)"; fail=1
	elif [ "$mode" = check ] && [ "$wrong" != 0 ]; then
		echo "FAIL: $w: $wrong of $hits cached rules differ from the searches' rule"; fail=1
	elif [ "$mode" = plant ] && [ "$wrong" != "$hits" ]; then
		echo "FAIL: $w: only $wrong of $hits planted wrong rules were seen as wrong"; fail=1
	fi
	if [ "$w" = jvm ] && [ "$segs" -lt 200 ]; then
		echo "FAIL: jvm: only $segs compiled frames' blobs compared (want 200 or more)"; fail=1
	elif [ "$segwrong" != 0 ]; then
		echo "FAIL: $w: $segwrong of $segs blobs found by the segment-map window differ from the byte-per-hop search"; fail=1
	fi
	rm -rf "$tmp/s-$w"
done
[ $fail = 0 ] && echo "PASS: $mode"
exit $fail
