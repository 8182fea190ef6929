#!/usr/bin/env bash
# Runs the libFuzzer targets of fuzz/ (one, or "all") for SECONDS each, from their seed
# corpora, in a clang build with ASan and UBSan (build-fuzz/, made on first use).
#   bash scripts/fuzz.sh all 3600        an hour each, as the README says
#   bash scripts/fuzz.sh fuzz-codemap 10 what each ctest fuzz entry runs
#   bash scripts/fuzz.sh --build         only (re)build the targets
#   bash scripts/fuzz.sh --built fuzz-codemap 10   run what --build made, without
#                                        checking the build again (the ctest entries,
#                                        after the fuzz-build entry: that check took
#                                        5-6 s of each 10 s entry)
# Exit status 77 (ctest: skipped) when clang or its libFuzzer runtime is missing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${VIPROF_FUZZ_BUILD:-$ROOT/build-fuzz}
ALL="fuzz-chunkfile fuzz-session fuzz-codemap fuzz-codemap-roundtrip fuzz-jitdump fuzz-perfmap fuzz-procmaps fuzz-events fuzz-sock fuzz-cfi"
BUILT=0
if [ "${1:-}" = "--built" ]; then
	BUILT=1
	shift
fi
run() {
	for t in $1; do
		work=$(mktemp -d /tmp/vp-fuzz-corpus.XXXXXX)
		echo "fuzz: $t for $2 s"
		# fuzz-cfi: a single allocation over 256 MB is a finding (libdw sized by a crafted
		# file's numbers): under the RSS limit alone, the seed that made the old builder
		# ask for 1.5 GB (corpus/fuzz-cfi/crafted-regs) replayed without a failure.
		lim=""
		[ "$t" = fuzz-cfi ] && lim="-malloc_limit_mb=256"
		"$B/fuzz/$t" -max_total_time="$2" -timeout=10 -rss_limit_mb=2048 $lim -print_final_stats=1 \
			-artifact_prefix="$work/" "$work" "$ROOT/fuzz/corpus/$t" 2>&1 | tail -8 ||
			{ echo "fuzz: $t found a crash; the input is in $work"; exit 1; }
		rm -rf "$work"
	done
}
if [ "$BUILT" = 1 ]; then
	T=${1:?usage: fuzz.sh --built TARGET SECONDS}
	# Without clang or libFuzzer the fuzz-build entry was skipped and made nothing.
	[ -x "$B/fuzz/$T" ] || { echo "fuzz: $B/fuzz/$T was not built (see the fuzz-build entry)"; exit 77; }
	run "$T" "${2:-10}"
	exit 0
fi
command -v clang >/dev/null || { echo "fuzz: clang is not installed (apt-get install clang)"; exit 77; }
probe=$(mktemp -d)
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' >"$probe/p.c"
if ! clang -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null; then
	rm -rf "$probe"
	echo "fuzz: clang has no libFuzzer runtime (apt-get install libclang-rt-14-dev)"
	exit 77
fi
rm -rf "$probe"
build() {
	mkdir -p "$B"
	if [ ! -f "$B/CMakeCache.txt" ]; then
		CC=clang cmake -S "$ROOT" -B "$B" -DVIPROF_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$B/fuzz-build.log" 2>&1 ||
			{ cat "$B/fuzz-build.log"; exit 1; }
	fi
	# The BPF objects and their skeletons depend on neither the C compiler nor the
	# sanitizers: a fresh fuzz tree takes them (and vmlinux.h) from the main build (16 s
	# less here). cp -p keeps their times, so make still rebuilds any older than a source.
	M=${VIPROF_MAIN_BUILD:-$ROOT/build}
	if [ -f "$M/vmlinux/vmlinux.h" ] && [ ! -f "$B/vmlinux/vmlinux.h" ]; then
		mkdir -p "$B/vmlinux" "$B/sampler-kernel"
		cp -p "$M/vmlinux/vmlinux.h" "$B/vmlinux/"
		cp -p "$M"/sampler-kernel/*.bpf.o "$M"/sampler-kernel/*.skel.h "$B/sampler-kernel/" 2>/dev/null || true
	fi
	# shellcheck disable=SC2086
	cmake --build "$B" -j2 --target $ALL >>"$B/fuzz-build.log" 2>&1 || { tail -40 "$B/fuzz-build.log"; exit 1; }
}
if [ "${1:-}" = "--build" ]; then
	build
	exit 0
fi
T=${1:?usage: fuzz.sh TARGET|all SECONDS}; S=${2:-10}
[ "$T" = all ] && T=$ALL
build
run "$T" "$S"
