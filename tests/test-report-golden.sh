#!/usr/bin/env bash
# Issue 35: every report format stays byte-identical on stored sessions. Reports each
# golden fixture session (tests/fixtures/golden/sessions: native -g, JVM --off-cpu,
# JVM -e alloc,lock, whole-VM -a, a CRC-damaged and a cut one) in every view of
# scripts/report-views.sh, and all of them merged, and compares with the outputs stored
# in tests/fixtures/golden/expected; fails naming the first differing view and line.
# A deliberate change of output: scripts/golden-update.sh, which prints what changed.
# Usage: test-report-golden.sh VIPROF SOURCE_DIR
set -uo pipefail
V=$(realpath "$1")
src=$(realpath "$2")
G=$src/tests/fixtures/golden
# shellcheck source=scripts/report-views.sh
. "$src/scripts/report-views.sh"

# The sessions' own symbols are in them; native ones of system files (libc, libjvm) are
# read from this machine at their recorded paths, as for any session read elsewhere. On a
# machine whose files differ the reports differ by right: skip, naming the file.
if ! bad=$(cd / && sha256sum --quiet -c "$G/host-files.sha256" 2>/dev/null); then
	echo "SKIP: this machine's $(echo "$bad" | head -1 | sed 's/: .*//') is not the file the golden reports were made with (tests/fixtures/golden/host-files.sha256): its symbols would differ"
	exit 77
fi

T=$(mktemp -d /tmp/vp-golden.XXXXXX)
trap 'rm -rf "$T"' EXIT
golden_generate "$V" "$G/sessions" "$T/got" || { echo "FAIL: reporting the golden sessions failed"; exit 1; }

# Expected files in report order: each session's views, then merged.
fail=0 n=0
while IFS= read -r f; do
	n=$((n + 1))
	if [ ! -e "$T/got/$f" ]; then
		echo "FAIL: $f: this build wrote no such report"
		fail=1
		break
	fi
	if ! c=$(cmp "$G/expected/$f" "$T/got/$f" 2>&1); then
		line=$(echo "$c" | sed -n 's/.*line \([0-9]*\).*/\1/p')
		echo "FAIL: report of $f differs from the stored one ($c)"
		if [ -n "$line" ]; then
			echo "  stored line $line: $(sed -n "${line}p" "$G/expected/$f" | cut -c1-300 | cat -v)"
			echo "  now    line $line: $(sed -n "${line}p" "$T/got/$f" | cut -c1-300 | cat -v)"
		fi
		echo "  (a deliberate change: scripts/golden-update.sh, then commit what it prints)"
		fail=1
		break
	fi
done < <(cd "$G/expected" && find . -type f | sed 's|^\./||' | sort)
if [ "$fail" = 0 ]; then
	extra=$(cd "$T/got" && find . -type f | sed 's|^\./||' | sort | comm -13 <(cd "$G/expected" && find . -type f | sed 's|^\./||' | sort) -)
	if [ -n "$extra" ]; then
		echo "FAIL: reports not stored: $(echo "$extra" | head -3 | tr '\n' ' ')(scripts/golden-update.sh)"
		fail=1
	fi
fi
[ "$n" -gt 0 ] || { echo "FAIL: no stored reports under $G/expected"; exit 1; }
[ "$fail" = 0 ] || exit 1
echo "PASS: $n stored reports of $(ls "$G/sessions" | wc -l) sessions byte-identical"
