#!/usr/bin/env bash
# The JVM agent alone on javac of 300 generated classes, with and without the agent,
# interleaved rounds; prints TARGET agent-alone-cpu-javac (bench/agent_cost.py says more).
# Usage: bench/agent-cost.sh [BUILD_DIR]     QUICK=1: 3 rounds instead of 9
#   JDK=<a JDK> to measure another JVM (default OpenJDK 17); STUDY=1 adds the variants
#   that say where the cost is (noop callbacks, inline=no, -XX:-DebugNonSafepoints) and
#   one run with the agent's per-callback stats. VIPROF_BEFORE=<another build's directory,
#   its cli/viprof or its agent .so> runs that agent in the same rounds. THREADS=N adds N
#   interleaved runs of each variant with the CPU of each thread group.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$ROOT/build}
[ -f "$B/jvm-agent/libviprof-jvmti.so" ] || { echo "agent-cost: $B/jvm-agent/libviprof-jvmti.so missing; build first (cmake --build $B --target viprof-jvmti)" >&2; exit 1; }
exec python3 "$ROOT/bench/agent_cost.py" --build "$B" ${QUICK:+--quick} ${STUDY:+--study} ${VIPROF_BEFORE:+--before "$VIPROF_BEFORE"} ${THREADS:+--threads "$THREADS"}
