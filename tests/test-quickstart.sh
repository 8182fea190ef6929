#!/bin/bash
# The README's quick start, run verbatim on a fresh clone of this checkout's HEAD (issue
# 26): the block between the quickstart markers, with HOME in a scratch directory so that
# the install goes there. Exit 77: cannot run here (not root, no git checkout).
#   usage: test-quickstart.sh SOURCE_DIR
set -u
src=$1
[ "$(id -u)" = 0 ] || { echo "SKIP: the quick start records as root"; exit 77; }
git -C "$src" rev-parse HEAD >/dev/null 2>&1 || { echo "SKIP: $src is not a git checkout"; exit 77; }
work=$(mktemp -d /tmp/vp-quickstart.XXXXXX)
trap 'rm -rf "$work"' EXIT
git clone -q "$src" "$work/viprof" || { echo "FAIL: git clone"; exit 1; }
cd "$work/viprof" || exit 1
sed -n '/<!-- quickstart/,/<!-- \/quickstart -->/p' README.md | sed '1,2d;$d' | sed '$d' >"$work/quickstart.sh"
echo "--- the quick start:"; cat "$work/quickstart.sh"
[ "$(wc -l <"$work/quickstart.sh")" -ge 5 ] || { echo "FAIL: no quick start block in README.md"; exit 1; }
mkdir "$work/home"
HOME="$work/home" PATH="/usr/lib/jvm/java-17-openjdk-amd64/bin:$PATH" bash -euo pipefail "$work/quickstart.sh" \
	>"$work/out" 2>&1 || { tail -40 "$work/out"; echo "FAIL: the quick start failed"; exit 1; }
tail -25 "$work/out"
[ -x "$work/home/.local/bin/viprof" ] || { echo "FAIL: nothing installed"; exit 1; }
[ -f "$work/home/.local/lib/viprof/libviprof-jvmti.so" ] || { echo "FAIL: the agent is not installed"; exit 1; }
grep -q "JitSplit.hot" "$work/out" || { echo "FAIL: the report names no Java method"; exit 1; }
grep -q "<svg\|<canvas\|flame" run1.html || { echo "FAIL: no flame graph"; exit 1; }
echo "PASS: the README's quick start"
