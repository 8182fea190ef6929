#!/usr/bin/env bash
# Rewrites the stored reports of the golden fixtures (tests/fixtures/golden/expected/) with
# what VIPROF writes now, and prints what changed. Run it on purpose, after a change that
# is meant to change what a report shows; read the printed differences, then commit them
# with the change. test-report-golden fails on any difference it did not see stored.
# Also rewrites host-files.sha256: the files outside the sessions that the reports read
# (symbols of libc, libjvm, ...: found by strace), which the test checks before comparing.
# Usage: scripts/golden-update.sh [VIPROF]   (default build/cli/viprof)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
# shellcheck source=scripts/report-views.sh
. "$here/report-views.sh"
V=$(realpath "${1:-$src/build/cli/viprof}")
G=$src/tests/fixtures/golden
command -v strace >/dev/null || { echo "golden-update: strace not found: it lists the host files the reports read; apt-get install strace" >&2; exit 2; }
T=$(mktemp -d /tmp/vp-golden-update.XXXXXX)
trap 'rm -rf "$T"' EXIT

golden_generate "$V" "$G/sessions" "$T/new"

# The files the loader opens for symbols (O_PATH opens: common/safefs), outside the sessions.
(
	cd "$G/sessions"
	for s in */; do
		s=${s%/}
		for args in "-F text" "-F text --wall" "-F text -e alloc" "-F text -e lock"; do
			# shellcheck disable=SC2086
			strace -f -qq -e trace=openat -o "$T/trace" "$V" report "$s" $args -o /dev/null >/dev/null 2>&1 || true
			sed -n 's/.*openat(AT_FDCWD, "\([^"]*\)", [^)]*O_PATH[^)]*) = [0-9].*/\1/p' "$T/trace"
		done
	done
) | grep -v '^[^/]' | sort -u >"$T/files"
(cd / && xargs -r sha256sum <"$T/files") >"$T/new.sha256"

changed=0
if [ -d "$G/expected" ]; then
	diff -ru "$G/expected" "$T/new" >"$T/diff" || changed=1
	if [ "$changed" = 1 ]; then
		echo "golden-update: these stored reports change:"
		# Binary formats (jfr, pprof) show as "Binary files ... differ".
		cat "$T/diff"
	fi
else
	changed=1
	echo "golden-update: no stored reports yet: writing them"
fi
if ! cmp -s "$T/new.sha256" "$G/host-files.sha256" 2>/dev/null; then
	echo "golden-update: the host files the reports read change:"
	diff -u "$G/host-files.sha256" "$T/new.sha256" 2>/dev/null || cat "$T/new.sha256"
	changed=1
fi
rm -rf "$G/expected"
cp -r "$T/new" "$G/expected"
cp "$T/new.sha256" "$G/host-files.sha256"
if [ "$changed" = 0 ]; then
	echo "golden-update: nothing changed ($(find "$G/expected" -type f | wc -l) files)"
else
	echo "golden-update: wrote $G/expected and host-files.sha256; review with git diff, commit with the change"
fi
