#!/usr/bin/env python3
"""The JVM agent's own cost (issue 13 item 1): javac of N generated classes with no agent
and with libviprof-jvmti.so alone (-agentpath with a session directory, no sampler), in
interleaved rounds whose order rotates (bench/suite.py's harness). Prints per variant the
median and range of wall and whole-process-tree CPU, the per-round CPU ratio, and

  TARGET agent-alone-cpu-javac measured=X target=1.01 met=yes|no sure=yes|no ...

measured being the median over rounds of CPU(agent) / CPU(alone) in the same round.

--study adds the variants that say where the cost is (docs/benchmarks.md):
  agent noop        the agent loads and enables its events, its callbacks return at
                    once: what HotSpot itself pays to post them (and DebugNonSafepoints,
                    which HotSpot turns on while CompiledMethodLoad is enabled);
  agent inline=no   no INLINE records;
  +DebugNonSafepoints  no agent, the flag on: what the compilers pay for it alone;
  agent -DebugNonSafepoints  the agent with the flag off explicitly;
and runs the agent once more with its stats option, printing the time spent in each
callback kind and in the writer and the bytes of each record type.

Usage: bench/agent_cost.py --build DIR [--rounds N] [--classes N] [--study] [--quick]
  JDK    the JDK (default OpenJDK 17)
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite  # noqa: E402  (the interleaving harness, the javac generator, TARGET lines)

TARGET = 1.01


def agent_variant(name, javac, files, out, lib, sess, opts="", jflags=()):
    def prep():
        shutil.rmtree(sess, ignore_errors=True)
        os.makedirs(sess, mode=0o700)
    opt = f"-J-agentpath:{lib}=dir={sess}" + (f",{opts}" if opts else "")
    return suite.Variant(name, [javac] + list(jflags) + [opt, "-d", out] + files, "agent", prep)


GROUPS = (("compiler", ("C1 Compiler", "C2 Compiler")), ("service", ("Service Thread",)),
          ("agent", ("viprof-jvmti",)), ("gc", ("GC Thread", "G1 ", "VM Periodic")),
          ("vm-thread", ("VM Thread",)), ("main", ("java", "javac")))


def group_of(comm):
    for g, prefixes in GROUPS:
        if any(comm == p or comm.startswith(p) for p in prefixes):
            return g
    return "other"


def watched(cmd, prep):
    """Runs cmd, polling its threads' scheduler runtime (/proc/PID/task/TID/schedstat)
    every 20 ms; returns {group: ms of CPU}. A thread's last 20 ms may be missed."""
    if prep:
        prep()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ns, comm = {}, {}
    while p.poll() is None:
        try:
            tids = os.listdir(f"/proc/{p.pid}/task")
        except OSError:
            break
        for t in tids:
            try:
                with open(f"/proc/{p.pid}/task/{t}/comm") as f:
                    comm[t] = f.read().strip()
                with open(f"/proc/{p.pid}/task/{t}/schedstat") as f:
                    ns[t] = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        time.sleep(0.02)
    if p.wait() != 0:
        sys.exit(f"bench: {' '.join(cmd[:4])} ... failed")
    out = {}
    for t, v in ns.items():
        g = group_of(comm.get(t, "?"))
        out[g] = out.get(g, 0.0) + v / 1e6
    out["total"] = sum(ns.values()) / 1e6
    return out


def thread_study(variants, rounds):
    """Each variant `rounds` times, interleaved; prints the median CPU per thread group."""
    res = {v.name: [] for v in variants}
    for r in range(rounds):
        for i in range(len(variants)):
            v = variants[(r + i) % len(variants)]
            res[v.name].append(watched(v.cmd, v.prep))
        print(f"  threads round {r + 1}/{rounds} done", file=sys.stderr)
    groups = [g for g, _ in GROUPS] + ["other", "total"]
    print(f"  CPU ms per thread group, median of {rounds} runs (scheduler runtime, polled every 20 ms)")
    print("  " + f"{'variant':<36}" + "".join(f"{g:>10}" for g in groups))
    for v in variants:
        row = [suite.med([x.get(g, 0.0) for x in res[v.name]]) for g in groups]
        print("  " + f"{v.name:<36}" + "".join(f"{x:10.0f}" for x in row))


def stats_run(javac, files, out, lib, sess, jflags=()):
    shutil.rmtree(sess, ignore_errors=True)
    os.makedirs(sess, mode=0o700)
    cmd = [javac] + list(jflags) + [f"-J-agentpath:{lib}=dir={sess},stats", "-d", out] + files
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = [l for l in p.stderr.splitlines() if l.startswith("viprof agent stats:")]
    size = 0
    for d, _, fs in os.walk(sess):
        size += sum(os.path.getsize(os.path.join(d, f)) for f in fs)
    for l in lines:
        print("  " + l[len("viprof agent stats: "):])
    print(f"  code map on disk: {size} bytes")


def before_lib(path):
    """The agent of --before: the .so itself, or the one of a build directory or of its
    cli/viprof."""
    p = os.path.abspath(path)
    if p.endswith(".so"):
        lib = p
    elif os.path.isdir(p):
        lib = os.path.join(p, "jvm-agent/libviprof-jvmti.so")
    else:
        lib = os.path.join(os.path.dirname(os.path.dirname(p)), "jvm-agent/libviprof-jvmti.so")
    suite.need(lib, "the --before build's agent")
    return lib


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(suite.ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--classes", type=int, default=300)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--study", action="store_true")
    ap.add_argument("--before", help="another build's agent to run in the same rounds: its .so, its build "
                    "directory, or its cli/viprof (as bench/suite.py's --before)")
    ap.add_argument("--threads", type=int, default=0, metavar="N",
                    help="also N interleaved runs of each variant with CPU per thread group (the agent's "
                    "own thread and the VM thread, where its GC-start walk runs, are what a build changes)")
    a = ap.parse_args()
    rounds = a.rounds or (3 if a.quick else 9)
    jdk = suite.JDK
    javac = os.path.join(jdk, "bin/javac")
    lib = os.path.join(os.path.abspath(a.build), "jvm-agent/libviprof-jvmti.so")
    suite.need(javac, "javac (set JDK)")
    suite.need(lib, "the agent (build the viprof-jvmti target)")
    tmp = tempfile.mkdtemp(prefix="viprof-agentcost.")
    try:
        files = suite.javac_sources(tmp, a.classes)
        out = os.path.join(tmp, "out")
        sess = os.path.join(tmp, "s")
        base = suite.Variant("javac alone", [javac, "-d", out] + files, "base")
        agent = agent_variant("javac + agent", javac, files, out, lib, sess)
        variants = [base, agent]
        if a.before:
            variants.append(agent_variant("javac + agent (before)", javac, files, out, before_lib(a.before), sess))
        if a.study:
            dns = ("-J-XX:+UnlockDiagnosticVMOptions", "-J-XX:+DebugNonSafepoints")
            nodns = ("-J-XX:+UnlockDiagnosticVMOptions", "-J-XX:-DebugNonSafepoints")
            variants += [
                agent_variant("javac + agent jit=events", javac, files, out, lib, sess, "jit=events"),
                agent_variant("javac + agent noop", javac, files, out, lib, sess, "noop"),
                agent_variant("javac + agent inline=no", javac, files, out, lib, sess, "inline=no"),
                suite.Variant("javac +DebugNonSafepoints", [javac, *dns, "-d", out] + files, "base"),
                agent_variant("javac + agent -DebugNonSafepoints", javac, files, out, lib, sess, "", nodns),
            ]
        print(f"== agent alone: javac of {a.classes} generated classes ({suite.version(jdk)}), "
              f"{rounds} interleaved rounds")
        suite.interleave(variants, rounds, tmp)
        suite.print_variants(variants, base)
        if a.threads:
            thread_study(variants, a.threads)
        if a.study:
            print("  agent stats (one more run with the stats option):")
            stats_run(javac, files, out, lib, sess)
        ratios = [x / y for x, y in zip(agent.cpu, base.cpu)]
        walls = [x / y for x, y in zip(agent.wall, base.wall)]
        m = suite.med(ratios)
        met = m <= TARGET
        sure = all((r <= TARGET) == met for r in ratios)
        suite.target_line("agent-alone-cpu-javac", f"{m:.3f}", f"{TARGET:.2f}", met, sure,
                          cpu=f"{(m - 1) * 100:+.1f}%", spread=f"{min(ratios):.3f}..{max(ratios):.3f}",
                          wall=f"{(suite.med(walls) - 1) * 100:+.1f}%", rounds=len(ratios),
                          jdk=suite.version(jdk).replace(" ", "_"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
