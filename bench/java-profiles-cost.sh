#!/usr/bin/env bash
# The cost of `record -e alloc` and `record -e lock` in the JVM (issue 25), side by side
# with async-profiler's `event=alloc` and `event=lock`: on the service-like workload
# bench/workloads/Service.java (queue hand-off, allocation, GC), interleaved rounds (every
# variant once per round, in the same order), CPU seconds (user + sys of the JVM) per
# variant, median and range, and the ratio to the JVM without any agent. The variants:
#   no agent                 plain java
#   viprof agent alone       the code maps only (what every viprof recording of a JVM has)
#   viprof alloc=BYTES       + allocation sampling (ALLOC, default 524288: async-profiler's
#                            default interval)
#   viprof locks=10000       + contended-lock recording, waits of 10 us or more
#   async-profiler alloc     event=alloc,alloc=BYTES (its JVMTI ObjectSampler), collapsed output
#   async-profiler lock      event=lock (10 us threshold, its default), collapsed output
# async-profiler comes from ASPROF_HOME (a build directory with lib/ or build/lib/
# libasyncProfiler.so, built elsewhere from its source; this script never builds it);
# without it its rows say skipped and the rest runs. The agents run as -agentpath on a
# plain JVM (no sampler: the JVM's own cost of each profile).
# Usage: bench/java-profiles-cost.sh [BUILD_DIR]   ROUNDS=N (default 5),
# REQUESTS=N (default 300000), JDK=<a JDK> (default OpenJDK 17), ASPROF_HOME=DIR,
# ALLOC=BYTES (default 524288: both profilers' sampling interval; a small one, e.g. 16384,
# makes the per-sample cost visible above the rounds' noise)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$ROOT/build}
JDK=${JDK:-/usr/lib/jvm/java-17-openjdk-amd64}
AGENT=$B/jvm-agent/libviprof-jvmti.so
[ -f "$AGENT" ] || { echo "java-profiles-cost: $AGENT missing; build first (cmake --build $B --target viprof-jvmti)" >&2; exit 1; }
[ -x "$JDK/bin/javac" ] || { echo "java-profiles-cost: no javac in $JDK; set JDK=<a JDK home>" >&2; exit 1; }
APLIB=
if [ -n "${ASPROF_HOME:-}" ]; then
	for f in "$ASPROF_HOME/lib/libasyncProfiler.so" "$ASPROF_HOME/build/lib/libasyncProfiler.so"; do
		[ -f "$f" ] && { APLIB=$f; break; }
	done
	[ -n "$APLIB" ] || echo "java-profiles-cost: no libasyncProfiler.so under $ASPROF_HOME/lib or $ASPROF_HOME/build/lib" >&2
fi
exec python3 - "$ROOT" "$AGENT" "$JDK" "${ROUNDS:-5}" "${REQUESTS:-300000}" "$APLIB" "${ALLOC:-524288}" <<'PY'
import os, resource, shutil, statistics, subprocess, sys, tempfile
root, agent, jdk, rounds, requests, aplib, al = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6], int(sys.argv[7])
tmp = tempfile.mkdtemp(prefix="vp-java-cost-")
subprocess.run([f"{jdk}/bin/javac", "-d", tmp, f"{root}/bench/workloads/Service.java"], check=True)
# (name, JVM option with {d} for a fresh directory, or None: skipped)
variants = [("no agent", ""),
            ("viprof agent alone", f"-agentpath:{agent}=dir={{d}}"),
            (f"viprof alloc={al}", f"-agentpath:{agent}=dir={{d}},alloc={al}"),
            ("viprof locks=10000", f"-agentpath:{agent}=dir={{d}},locks=10000"),
            (f"async-profiler alloc={al}", f"-agentpath:{aplib}=start,event=alloc,alloc={al},collapsed,file={{d}}/a.txt" if aplib else None),
            ("async-profiler lock", f"-agentpath:{aplib}=start,event=lock,collapsed,file={{d}}/a.txt" if aplib else None)]
cpu = {v: [] for v, _ in variants}
for r in range(rounds):
    for name, opt in variants:
        if opt is None:
            continue
        d = tempfile.mkdtemp(dir=tmp)
        cmd = [f"{jdk}/bin/java"] + ([opt.format(d=d)] if opt else []) + ["-cp", tmp, "Service", requests]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        shutil.rmtree(d, ignore_errors=True)
base = statistics.median(cpu["no agent"])
alone = statistics.median(cpu["viprof agent alone"])
print(f"== Service {requests} requests, {rounds} interleaved rounds, {jdk}: CPU seconds (median, range)")
for name, opt in variants:
    if opt is None:
        print(f"  {name:24s} skipped (set ASPROF_HOME to an async-profiler build)")
        continue
    m = statistics.median(cpu[name])
    extra = f"  x{m / alone:.3f} of viprof's agent alone" if name.startswith("viprof ") and name != "viprof agent alone" else ""
    print(f"  {name:24s} {m:7.3f} ({min(cpu[name]):.3f}-{max(cpu[name]):.3f})  x{m / base:.3f} of no agent{extra}")
shutil.rmtree(tmp, ignore_errors=True)
PY
