#!/usr/bin/env bash
# Every comparison of issue 13 in one command, then one table of every target with its
# measured ratio and whether it is met (docs/benchmarks.md says how to read it).
#   1. bench/suite.py: start+stop vs perf, whole-profiler CPU on javac and on a
#      service-like JVM (viprof vs async-profiler), on a native program (vs perf);
#   2. each of the other teams' scripts that is present: agent-cost.sh (agent-alone CPU
#      on javac), report-scale.sh (report speed and peak RSS vs perf report on >= 1M
#      samples), offcpu.sh. Each prints `TARGET name measured=X target=Y met=yes|no`
#      lines; a script that is missing is listed as "not present".
# Every script's full output is kept in the results directory printed at the end.
# Usage: bench/run-all.sh [--quick] [BUILD_DIR]      (root; default BUILD_DIR: build)
#   --quick      2 rounds and smaller workloads instead of 5 rounds (about 1 min instead
#                of 5-7 min for suite.py on this VM; the other scripts get QUICK=1)
#   ASPROF_HOME  async-profiler build (default /work/peers/async-profiler/build)
#   JDK          the JDK for the JVM workloads (default OpenJDK 17)
#   RESULTS      where to keep the outputs (default: a new /tmp/viprof-bench.* directory)
#   SCRIPT_TIMEOUT  seconds each of the other scripts may run (default 3600)
set -uo pipefail
QUICK=
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-$ROOT/build}" 2>/dev/null && pwd) || { echo "run-all: no build directory ${1:-$ROOT/build}; build first" >&2; exit 1; }
[ -x "$B/cli/viprof" ] || { echo "run-all: $B/cli/viprof missing; build first (cmake --build $B)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run-all: run as root (recording needs it here)" >&2; exit 1; }
export ASPROF_HOME=${ASPROF_HOME:-/work/peers/async-profiler/build}
R=${RESULTS:-$(mktemp -d /tmp/viprof-bench.XXXXXX)}
mkdir -p "$R"

echo "# viprof benchmarks: $(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$ROOT" describe --always --dirty 2>/dev/null), build $B${QUICK:+, --quick}"
echo "# load average $(cut -d' ' -f1-3 /proc/loadavg); outputs in $R"
[ -f "$ASPROF_HOME/lib/libasyncProfiler.so" ] || echo "# async-profiler not found at $ASPROF_HOME: its columns are skipped"

files=() missing=() failed=()
python3 "$ROOT/bench/suite.py" --build "$B" ${QUICK:+--quick} startup javac service native 2>"$R/suite.err" | tee "$R/suite.out"
[ "${PIPESTATUS[0]}" = 0 ] || failed+=("suite.py (see $R/suite.err)")
files+=("$R/suite.out")

for s in agent-cost report-scale offcpu; do
	if [ ! -x "$ROOT/bench/$s.sh" ] && [ ! -f "$ROOT/bench/$s.sh" ]; then
		missing+=("$s.sh")
		continue
	fi
	echo "== bench/$s.sh"
	# A script that hangs must not take the table with it.
	QUICK=$QUICK timeout "${SCRIPT_TIMEOUT:-3600}" bash "$ROOT/bench/$s.sh" "$B" 2>"$R/$s.err" | tee "$R/$s.out"
	[ "${PIPESTATUS[0]}" = 0 ] || failed+=("$s.sh (status ${PIPESTATUS[0]}, see $R/$s.err)")
	files+=("$R/$s.out")
done

echo
echo "== targets ($(date -u '+%H:%M UTC'), load average $(cut -d' ' -f1 /proc/loadavg))"
margs=()
for m in "${missing[@]}"; do margs+=(--missing "$m"); done
python3 "$ROOT/bench/suite.py" table "${files[@]}" "${margs[@]}" | tee "$R/table.txt"
for f in "${failed[@]}"; do echo "run-all: $f failed" >&2; done
[ ${#failed[@]} = 0 ]
