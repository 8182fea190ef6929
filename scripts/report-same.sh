#!/usr/bin/env bash
# Whether two viprof builds write the same reports of the same sessions, byte for byte:
# the check for a change that must not change what is shown (a refactor of the loader,
# say). Every session is reported by A and by B in each format and with each view that
# reads a different part of the loader (text, folded, json, html, jfr, pprof decompressed,
# --layers, --wall, -e off-cpu/steal/alloc/lock, --vthreads, --map-mode flat, --time,
# --comm, -p), and all sessions merged into one; standard output, standard error and the
# exit code are compared. Prints one line per report that differs and exits 1 then, else
# prints how many were the same and exits 0.
# Usage: scripts/report-same.sh A_VIPROF B_VIPROF SESSION...
#   KEEP=DIR   keep the reports under DIR (a/ and b/) to look at the differences
# Make A from the commit before the change (git worktree add, build) or copy its
# bin/viprof aside before building the change.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 A_VIPROF B_VIPROF SESSION..." >&2; exit 2; }
A=$(realpath "$1"); B=$(realpath "$2"); shift 2
T=${KEEP:-$(mktemp -d /tmp/vp-same.XXXXXX)}
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
mkdir -p "$T/a" "$T/b"

# The views (VIEWS, MERGED_VIEWS, first_pid): one list for this and the golden test.
# shellcheck source=scripts/report-views.sh
. "$(dirname "$0")/report-views.sh"

# run SIDE VIPROF NAME ARGS...: one report into $T/SIDE/NAME.{out,err,rc}.
run() {
	local side=$1 v=$2 name=$3 rc=0
	shift 3
	"$v" report "$@" -o "$T/$side/$name.out" >"$T/$side/$name.stdout" 2>"$T/$side/$name.err" || rc=$?
	echo "$rc" >"$T/$side/$name.rc"
	# pprof is gzipped: compare what it holds, not the compressor's header.
	if [ -s "$T/$side/$name.out" ] && gzip -t "$T/$side/$name.out" 2>/dev/null; then
		gzip -dc "$T/$side/$name.out" >"$T/$side/$name.raw" && mv "$T/$side/$name.raw" "$T/$side/$name.out"
	fi
}

n=0 bad=0
compare() {
	local name=$1
	shift
	run a "$A" "$name" "$@"
	run b "$B" "$name" "$@"
	n=$((n + 1))
	for x in out stdout err rc; do
		if ! cmp -s "$T/a/$name.$x" "$T/b/$name.$x" 2>/dev/null &&
			! { [ ! -e "$T/a/$name.$x" ] && [ ! -e "$T/b/$name.$x" ]; }; then
			echo "DIFFERS: report $* ($x)"
			bad=$((bad + 1))
			break
		fi
	done
}

s=0
for S in "$@"; do
	s=$((s + 1))
	v=0
	for args in "${VIEWS[@]}"; do
		v=$((v + 1))
		# shellcheck disable=SC2086
		compare "s$s-v$v" "$S" $args
	done
	# One process of it: the pid of its first stack.
	first=$(first_pid "$A" "$S")
	[ -z "$first" ] || compare "s$s-pid" "$S" -F folded -p "$first"
done
if [ $# -gt 1 ]; then
	m=0
	for args in "${MERGED_VIEWS[@]}"; do
		m=$((m + 1))
		# shellcheck disable=SC2086
		compare "merged-$m" "$@" $args
	done
fi
if [ "$bad" -gt 0 ]; then
	echo "report-same: $bad of $n reports differ (outputs under $T${KEEP:+, kept})" >&2
	exit 1
fi
echo "report-same: all $n reports the same"
