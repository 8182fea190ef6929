#!/usr/bin/env bash
# Installs what is missing, builds viprof, and runs every test with ctest.
#   bash scripts/test.sh              everything (what CI runs)
#   bash scripts/test.sh --sanitize   the unit tests in an ASan + UBSan build (build-asan/)
#   bash scripts/test.sh --sanitize -L live    other ctest arguments instead of -L unit
#                                     (not -L jvm: a sanitized agent cannot load into java)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
if [ "${1:-}" = "--sanitize" ]; then
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVIPROF_SANITIZE=ON
	cmake --build build-asan -j"$(nproc)"
	cd build-asan
	shift
	[ $# -gt 0 ] || set -- -L unit
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure --timeout 900 "$@"
	exit
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
cd build
ctest --output-on-failure --timeout 900 -j2
