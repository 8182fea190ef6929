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
  -DebugNonSafepoints  alone and agent with -XX:-DebugNonSafepoints set explicitly;
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite  # noqa: E402  (the interleaving harness, the javac generator, TARGET lines)

TARGET = 1.01


def agent_variant(name, javac, files, out, lib, sess, opts="", jflags=()):
    def prep():
        shutil.rmtree(sess, ignore_errors=True)
        os.makedirs(sess, mode=0o700)
    opt = f"-J-agentpath:{lib}=dir={sess}" + (f",{opts}" if opts else "")
    return suite.Variant(name, [javac] + list(jflags) + [opt, "-d", out] + files, "agent", prep)


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
    print(f"  code map on disk: {size} bytes (compressed)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(suite.ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--classes", type=int, default=300)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--study", action="store_true")
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
        if a.study:
            nodns = ("-J-XX:+UnlockDiagnosticVMOptions", "-J-XX:-DebugNonSafepoints")
            variants += [
                agent_variant("javac + agent noop", javac, files, out, lib, sess, "noop"),
                agent_variant("javac + agent inline=no", javac, files, out, lib, sess, "inline=no"),
                suite.Variant("javac -DebugNonSafepoints", [javac, *nodns, "-d", out] + files, "base"),
                agent_variant("javac + agent -DebugNonSafepoints", javac, files, out, lib, sess, "", nodns),
            ]
        print(f"== agent alone: javac of {a.classes} generated classes ({suite.version(jdk)}), "
              f"{rounds} interleaved rounds")
        suite.interleave(variants, rounds, tmp)
        suite.print_variants(variants, base)
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
