#!/usr/bin/env bash
# The cost of `record -e alloc` and `record -e lock` in the JVM (issue 25): the agent alone,
# the agent sampling allocations (alloc=524288, async-profiler's default interval) and the
# agent recording contended locks (locks=10000: waits of 10 us or more), on the service-like
# workload bench/workloads/Service.java (queue hand-off, allocation, GC), interleaved rounds;
# CPU seconds (user + sys of the JVM) per variant, median and range, and the ratio to the
# agent alone. Usage: bench/java-profiles-cost.sh [BUILD_DIR]   ROUNDS=N (default 5),
# REQUESTS=N (default 300000), JDK=<a JDK> (default OpenJDK 17)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$ROOT/build}
JDK=${JDK:-/usr/lib/jvm/java-17-openjdk-amd64}
AGENT=$B/jvm-agent/libviprof-jvmti.so
[ -f "$AGENT" ] || { echo "java-profiles-cost: $AGENT missing; build first (cmake --build $B --target viprof-jvmti)" >&2; exit 1; }
[ -x "$JDK/bin/javac" ] || { echo "java-profiles-cost: no javac in $JDK; set JDK=<a JDK home>" >&2; exit 1; }
exec python3 - "$ROOT" "$AGENT" "$JDK" "${ROUNDS:-5}" "${REQUESTS:-300000}" <<'PY'
import os, resource, shutil, statistics, subprocess, sys, tempfile
root, agent, jdk, rounds, requests = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
tmp = tempfile.mkdtemp(prefix="vp-java-cost-")
subprocess.run([f"{jdk}/bin/javac", "-d", tmp, f"{root}/bench/workloads/Service.java"], check=True)
variants = [("agent alone", ""), ("agent + alloc=524288", ",alloc=524288"), ("agent + locks=10000", ",locks=10000")]
cpu = {v: [] for v, _ in variants}
for r in range(rounds):
    for name, opt in variants:
        maps = tempfile.mkdtemp(dir=tmp)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([f"{jdk}/bin/java", f"-agentpath:{agent}=dir={maps}{opt}", "-cp", tmp, "Service", requests],
                       check=True, stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        shutil.rmtree(maps, ignore_errors=True)
base = statistics.median(cpu["agent alone"])
print(f"== Service {requests} requests, {rounds} interleaved rounds, {jdk}: CPU seconds (median, range)")
for name, _ in variants:
    m = statistics.median(cpu[name])
    print(f"  {name:24s} {m:7.3f} ({min(cpu[name]):.3f}-{max(cpu[name]):.3f})  x{m / base:.3f} of the agent alone")
shutil.rmtree(tmp, ignore_errors=True)
PY
