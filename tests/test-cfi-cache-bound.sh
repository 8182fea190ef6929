#!/bin/bash
# The unwind-rule cache stays within its bound (issue 31 item 8: a touch of a binary
# plus one 'record -g' added an entry that was never removed, ~1.4 MB a round for
# libjvm.so, 2.5 GB an hour from one user in root's /var/cache). 20 rounds of touch +
# 'record -g' of a copy of zcaller, each a new file identity and so a new entry, with
# VIPROF_UNWIND_CACHE_MAX set to what the first round stored plus two of the fixture's
# entries: after every round the cache holds at most that many bytes, and the round's
# own entry (the most recently used) is among them.
#   usage: test-cfi-cache-bound.sh VIPROF ZCALLER        exit 77: cannot run here
set -u
viprof=$1 zcaller=$2
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (the BPF sampler of record -g)"; exit 77; }
work=$(mktemp -d /tmp/vp-cfi-bound.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "$zcaller" "$work/fx"
export VIPROF_UNWIND_CACHE=$work/cache
unset VIPROF_UNWIND_CACHE_MAX VIPROF_UNWIND_CACHE_AGE
fail() { echo "FAIL: $*"; ls -l "$work/cache"; exit 1; }

# The bytes of the cache's entries (what the bound counts).
cache_bytes() { find "$work/cache" -maxdepth 1 -type f -name '*.v[0-9]*' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }
# The entry named after fx's identity now: <dev>-<ino>-<size>-<mtime_ns>.v1 in hex.
fx_entry() {
	local dev ino size ns
	read -r dev ino size ns < <(stat -c '%d %i %s %.9Y' "$work/fx")
	printf '%s/%x-%x-%x-%x.v1' "$work/cache" "$dev" "$ino" "$size" "${ns/./}"
}
record() {
	"$viprof" record -g -F 999 -q --backend bpf -o "$work/s$1" -- "$work/fx" squeeze 0.3 >"$work/r.log" 2>&1 ||
		{ cat "$work/r.log"; fail "round $1: viprof record exited $?"; }
	rm -rf "$work/s$1"
}

record 0
entry=$(fx_entry)
[ -f "$entry" ] || fail "round 0 stored no table for the fixture (the test would pass on nothing)"
one=$(stat -c %s "$entry")
bound=$(( $(cache_bytes) + 2 * one ))
export VIPROF_UNWIND_CACHE_MAX=$bound
echo "round 0: $(cache_bytes) bytes in $(ls "$work/cache" | wc -l) entries, the fixture's $one; bound $bound"
for i in $(seq 1 19); do
	# A new identity: the mtime moves on (by at least a nanosecond).
	touch -d "@$(( $(date +%s) + i ))" "$work/fx"
	record "$i"
	b=$(cache_bytes)
	[ "$b" -le "$bound" ] || fail "after round $i the cache holds $b bytes, over its bound of $bound"
	[ -f "$(fx_entry)" ] || fail "after round $i the round's own entry is gone (the most recently used)"
done
echo "after 20 rounds: $(cache_bytes) bytes in $(ls "$work/cache" | wc -l) entries (bound $bound)"
echo PASS
