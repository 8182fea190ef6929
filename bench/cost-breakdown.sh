#!/usr/bin/env bash
# Issue 37: what `viprof record -g --off-cpu` costs, part by part, before and after, in one
# run, next to perf (and async-profiler when ASPROF_HOME is set).
#
# Workload: bench/workloads/ParkDeep.java: THREADS threads each park PARKS times for
# 100 us, 50 distinct Java methods deep (about 67 user frames at every switch-out, with
# the JDK's park path and the thread's root), fixed work. Variants, interleaved round by
# round (the machine is shared: compare ratios from one run, not figures across runs):
#   none         the JVM alone
#   viprof       this build: a thread's last walk at a block reused when unchanged
#   viprof-walk  this build with VIPROF_DEBUG_NO_WALK_REUSE=1: every switch-out walked
#   before       VIPROF_BEFORE=<another viprof binary> (e.g. main's build), when set
#   perf         perf record -g -e sched:sched_switch -B -N (frame-pointer user stacks at every
#                switch, no Java frames without -XX:+PreserveFramePointer; no build-ids:
#                perf 6.1 here aborts in util/build-id.c when it collects them)
#   asprof       async-profiler wall clock (event=wall, interval=1ms), when ASPROF_HOME is set
# Prints medians [min-max] of ROUNDS rounds:
#   - CPU (user+sys of the whole command tree, the profiler's own included) and wall;
#   - viprof's per-switch-out walk cost from its own counters (all, walked, reused) and
#     the share reused; where the walks' time goes (builds that print the tracer's "walk
#     breakdown" line): walks at preemptions, blocks walked again by cause (a word changed,
#     other registers), frames per walk and ns per frame, words and stack bytes per check;
#   - the per-switch-out cost before / after side by side (VIPROF_BEFORE);
#   - start-up CPU from VIPROF_DEBUG_TIMING=1: BPF skeletons (load + verification), the
#     switch tracer's walking object, /proc/kallsyms.
# Usage: bench/cost-breakdown.sh [BUILD_DIR]   (root; ROUNDS=5 THREADS=4 PARKS=5000
#        JDK=<JDK home> VIPROF_BEFORE=<viprof> ASPROF_HOME=<dir> in the environment)
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
JDK=${JDK:-/usr/lib/jvm/java-17-openjdk-amd64}
[ "$(id -u)" = 0 ] || { echo "cost-breakdown: needs root (BPF)" >&2; exit 1; }
[ -x "$B/cli/viprof" ] || { echo "cost-breakdown: $B/cli/viprof missing; build first" >&2; exit 1; }
[ -x "$JDK/bin/javac" ] || { echo "cost-breakdown: no javac in $JDK; set JDK=<a JDK home>" >&2; exit 1; }
APLIB=
if [ -n "${ASPROF_HOME:-}" ]; then
	for f in "$ASPROF_HOME/lib/libasyncProfiler.so" "$ASPROF_HOME/build/lib/libasyncProfiler.so"; do
		[ -f "$f" ] && { APLIB=$f; break; }
	done
	[ -n "$APLIB" ] || echo "cost-breakdown: no libasyncProfiler.so under $ASPROF_HOME: its column is left out" >&2
fi
PERF=$(command -v perf || true)
exec python3 - "$ROOT" "$B/cli/viprof" "$JDK" "${ROUNDS:-5}" "${THREADS:-4}" "${PARKS:-5000}" "${VIPROF_BEFORE:-}" "$APLIB" "$PERF" <<'PY'
import os, re, resource, shutil, statistics, subprocess, sys, tempfile, time
root, vp, jdk, rounds, threads, parks, before, aplib, perf = sys.argv[1:10]
rounds = int(rounds)
tmp = tempfile.mkdtemp(prefix="vp-cost-breakdown-")
try:
    subprocess.run([f"{jdk}/bin/javac", "-d", tmp, f"{root}/bench/workloads/ParkDeep.java"], check=True)
    java = [f"{jdk}/bin/java", "-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,ParkDeep::*", "-cp", tmp]
    work = ["ParkDeep", threads, parks]
    variants = [("none", None, {}), ("viprof", vp, {}), ("viprof-walk", vp, {"VIPROF_DEBUG_NO_WALK_REUSE": "1"})]
    if before:
        variants.append(("before", before, {}))
    if perf:
        variants.append(("perf", "perf", {}))
    if aplib:
        variants.append(("asprof", "asprof", {}))
    res = {v[0]: {} for v in variants}

    def add(name, key, val):
        res[name].setdefault(key, []).append(val)

    def timing(err):
        # cpu (ms, cumulative) at each step of VIPROF_DEBUG_TIMING's breakdown
        cpu = {}
        for m in re.finditer(r"cpu\s+([0-9.]+) ms\s+(.*)", err):
            cpu[m.group(2).strip()] = float(m.group(1))
        def d(a, b):
            return cpu[b] - cpu[a] if a in cpu and b in cpu else None
        return {"start: BPF skeletons": d("record: backend selected, metadata written", "bpf: skeletons loaded (verified)"),
                "start: walking object": d("switch tracer: walking object opened", "switch tracer: walking object loaded"),
                "start: kallsyms": d("record: command released", "record: kallsyms taken")}

    for r in range(rounds):
        for name, tool, env in variants:
            d = f"{tmp}/s-{name}-{r}"
            if tool is None:
                cmd = java + work
            elif tool == "perf":
                cmd = [perf, "record", "-q", "-B", "-N", "-g", "-e", "sched:sched_switch", "-o", f"{d}.perf", "--"] + java + work
            elif tool == "asprof":
                cmd = java[:1] + [f"-agentpath:{aplib}=start,event=wall,interval=1ms,file={d}.collapsed,collapsed"] + java[1:] + work
            else:
                cmd = [tool, "record", "-g", "--off-cpu", "-o", d, "--"] + java + work
            e = dict(os.environ, VIPROF_DEBUG_TIMING="1", **env)
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            p = subprocess.run(cmd, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            t1 = time.monotonic()
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            if p.returncode:
                sys.exit(f"cost-breakdown: {name} failed ({p.returncode}): {p.stderr[-2000:]}")
            add(name, "cpu s", r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
            add(name, "wall s", t1 - t0)
            m = re.search(r"(\d+) user stacks walked at switch-out(?: \((\d+) reused unchanged\))?, ([0-9.]+) us each"
                          r"(?: \(walked ([0-9.]+) us, reused ([0-9.]+) us\))?", p.stderr)
            if m:
                add(name, "us per switch-out", float(m.group(3)))
                if m.group(4):
                    add(name, "us per walk", float(m.group(4)))
                    if int(m.group(2)):
                        add(name, "us per reuse", float(m.group(5)))
                    add(name, "reused %", 100.0 * int(m.group(2)) / max(1, int(m.group(1))))
            m = re.search(r"walk breakdown: (\d+) at preemptions reused, (\d+) walked \(([0-9.]+) us each\), "
                          r"blocks walked: (\d+) with nothing kept, (\d+) other registers, (\d+) a word changed; "
                          r"([0-9.]+) frames per walk \((\d+) ns per frame\); checks that passed: ([0-9.]+) words, "
                          r"(\d+) stack bytes each", p.stderr)
            if m:
                add(name, "walks at preemptions", int(m.group(2)))
                add(name, "us per preemption walk", float(m.group(3)))
                add(name, "blocks re-walked: regs", int(m.group(5)))
                add(name, "blocks re-walked: word", int(m.group(6)))
                add(name, "frames per walk", float(m.group(7)))
                add(name, "ns per frame walked", float(m.group(8)))
                add(name, "words per check", float(m.group(9)))
                add(name, "bytes copied per check", float(m.group(10)))
            if tool not in (None, "perf", "asprof"):
                for k, v in timing(p.stderr).items():
                    if v is not None:
                        add(name, k + " cpu ms", v)
            shutil.rmtree(d, ignore_errors=True)
            for f in (f"{d}.perf", f"{d}.collapsed"):
                if os.path.exists(f):
                    os.unlink(f)
        print(f"round {r + 1}/{rounds} done (load {os.getloadavg()[0]:.1f})", file=sys.stderr)

    names = [v[0] for v in variants]
    keys = []
    for n in names:
        for k in res[n]:
            if k not in keys:
                keys.append(k)
    def cell(n, k):
        v = res[n].get(k)
        if not v:
            return "-"
        return f"{statistics.median(v):.3g} [{min(v):.3g}-{max(v):.3g}]"
    print(f"== ParkDeep: {threads} threads x {parks} parks 50 methods deep, {rounds} interleaved rounds, "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; medians [min-max]")
    w = max(len(k) for k in keys) + 2
    print("".ljust(w) + "".join(n.rjust(30) for n in names))
    for k in keys:
        print(k.ljust(w) + "".join(cell(n, k).rjust(30) for n in names))
    def med(n, k):
        v = res.get(n, {}).get(k)
        return statistics.median(v) if v else None
    base = med("none", "cpu s")
    print("ratios (medians):")
    for n in names[1:]:
        c = med(n, "cpu s")
        if base and c:
            print(f"  {n}: cpu x{c / base:.3f} of no profiler (+{c - base:.2f} s)")
    x, y = med("before", "us per switch-out"), med("viprof", "us per switch-out")
    if x and y:
        print(f"  per switch-out walk: before {x:.2f} us, after {y:.2f} us: after / before = {y / x:.3f}")
    for a, b in (("viprof", "viprof-walk"), ("viprof", "before")):
        for k in ("us per switch-out", "cpu s", "start: walking object cpu ms"):
            x, y = med(a, k), med(b, k)
            if x and y:
                print(f"  {k}: {a} / {b} = {x / y:.3f}")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
PY
