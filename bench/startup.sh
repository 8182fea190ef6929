#!/usr/bin/env bash
# Start+stop cost of `viprof record -- /bin/true` vs `perf record -- /bin/true`, with and
# without -g, in interleaved rounds (twice the suite's rounds, plus one), medians and the
# range of wall and CPU; ends with TARGET lines (issue 13: viprof within 50 ms of perf).
# perf runs with --no-bpf-event: its default side-band thread adds a 1 s poll timeout at
# exit, shown as an extra, untargeted row. VIPROF_DEBUG_TIMING=1 on a viprof record run
# prints where its own time goes, phase by phase.
# Usage: bench/startup.sh [BUILD_DIR] [ROUNDS]   (root; QUICK=1 for fewer rounds)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$ROOT/build}
exec python3 "$ROOT/bench/suite.py" --build "$B" ${2:+--rounds "$2"} ${QUICK:+--quick} startup
