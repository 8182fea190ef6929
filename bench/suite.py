#!/usr/bin/env python3
"""viprof's side-by-side benchmarks, for a shared and noisy machine.

Each part runs its variants (no profiler, viprof, the peer) in interleaved rounds whose
order rotates, so that slow phases of the machine fall on every variant alike, and
reports per variant the median and the range of:
  wall      the command end to end (profiler start-up and shutdown included);
  cpu       user+sys of the whole process tree (wait4: the profiler, the command and
            everything they waited for), with microsecond resolution. The kernel
            charges the sampling interrupt and BPF programs to the task they
            interrupted, so this is the profiler's whole CPU cost;
  prof      the profiler process's own user+sys (/proc/PID/stat read while it is a
            zombie, 10 ms ticks): viprof's or perf's recorder; async-profiler runs
            inside the JVM, so its cost is in the JVM's CPU.
Ratios are taken per round (variant / baseline of the same round) and the median of
those is the measurement; "sure" says whether every round agrees with the verdict.

Parts: startup (record -- /bin/true, with and without -g, vs perf record), javac (300
generated classes; --jdk DIR once per JDK, --before another viprof; goal 0.9x
async-profiler's CPU, issue 37), javac-breakdown (javac under each layer of record -g: start, sampling,
frame-pointer stacks, unwind tables, agent, DebugNonSafepoints; --before adds another
viprof), service (bench/workloads/Service.java: two busy workers with
allocation), native (bench/workloads/fixedwork.c on 2 threads). Each part ends with
lines `TARGET name measured=X target=Y met=yes|no ...` that bench/run-all.sh collects.

Usage: bench/suite.py [--build DIR] [--rounds N] [--quick] PART...   (root)
  `table FILE...` prints the summary table of the TARGET lines in FILEs.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")
JDK = os.environ.get("JDK", "/usr/lib/jvm/java-17-openjdk-amd64")
ASPROF_HOME = os.environ.get("ASPROF_HOME", "/work/peers/async-profiler/build")
RATE = 999                      # samples per second for every profiler
AP_INTERVAL = 1001001           # async-profiler's interval in ns for 999 Hz
STARTUP_SLACK_MS = 50           # issue 13: start+stop within 50 ms of perf's
JAVAC_GOAL = 0.9                # issue 37: javac's total CPU at most 0.9x async-profiler's


class Machine:
    """perf 6.1 aborts on this kernel while any BPF program is loaded (someone else's
    recording, a test): before each perf run wait until none is, and retry a run that
    aborted anyway. Both are counted and printed."""

    def __init__(self):
        self.perf_waits = 0
        self.perf_wait_s = 0.0
        self.perf_retries = 0

    @staticmethod
    def bpf_programs():
        try:
            out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, timeout=10)
            return len(json.loads(out.stdout or "[]")) if out.returncode == 0 else -1
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return -1

    def wait_for_no_bpf(self, limit_s=120.0):
        t0 = time.monotonic()
        waited = False
        while self.bpf_programs() > 0 and time.monotonic() - t0 < limit_s:
            waited = True
            time.sleep(0.1)
        if waited:
            self.perf_waits += 1
            self.perf_wait_s += time.monotonic() - t0


MACHINE = Machine()


def run_measured(cmd, errpath, env=None):
    """Runs cmd; returns (status, wall s, tree cpu s, own cpu s)."""
    with open(errpath, "wb") as err:
        t0 = time.monotonic_ns()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env)
        # Exited but not reaped: its /proc/PID/stat still holds its own final CPU time.
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
        t1 = time.monotonic_ns()
        try:
            with open(f"/proc/{p.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            own = (int(fields[11]) + int(fields[12])) / TICK   # utime, stime (fields 14, 15)
        except (OSError, IndexError, ValueError):
            own = float("nan")
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, (t1 - t0) / 1e9, ru.ru_utime + ru.ru_stime, own


class Variant:
    def __init__(self, name, cmd, kind, prep=None, env=None):
        self.name, self.cmd, self.kind, self.prep, self.env = name, cmd, kind, prep, env
        self.wall, self.cpu, self.own = [], [], []

    def run_once(self, tmp):
        if self.prep:
            self.prep()
        errpath = os.path.join(tmp, "err." + re.sub(r"\W", "_", self.name))
        for attempt in range(6):
            if self.kind == "perf":
                MACHINE.wait_for_no_bpf()
            rc, wall, cpu, own = run_measured(self.cmd, errpath, self.env)
            if rc == 0:
                break
            with open(errpath, errors="replace") as f:
                text = f.read()
            if self.kind == "perf" and (rc in (134, -6) or "stack smashing" in text or "assertion failed" in text):
                MACHINE.perf_retries += 1
                continue
            sys.exit(f"bench: {self.name} failed (status {rc}): {' '.join(self.cmd[:8])} ...\n{text[-2000:]}")
        else:
            sys.exit(f"bench: {self.name} aborted 6 times in a row (perf vs loaded BPF programs?)")
        self.wall.append(wall)
        self.cpu.append(cpu)
        self.own.append(own)


def interleave(variants, rounds, tmp, warmup=True):
    """Each round runs every variant once; round r starts at variant r mod n."""
    if warmup:   # page cache, CDS archive, javac's jars: warm for all alike
        for v in variants:
            v.run_once(tmp)
            v.wall.clear(); v.cpu.clear(); v.own.clear()
    n = len(variants)
    for r in range(rounds):
        for i in range(n):
            variants[(r + i) % n].run_once(tmp)
        print(f"  round {r + 1}/{rounds} done", file=sys.stderr)


def med(v):
    return statistics.median(v) if v else float("nan")


def rng(v, fmt="{:.3f}"):
    return (fmt + "-" + fmt).format(min(v), max(v)) if v else "-"


def print_variants(variants, base=None):
    print(f"  {'variant':<30} {'wall s (min-max)':>22} {'cpu s (min-max)':>22} {'prof s':>7}  cpu vs alone, per round")
    for v in variants:
        own = "-" if v.kind in ("base", "asprof") else f"{med(v.own):.2f}"
        vs = ""
        if base is not None and v is not base:
            r = [a / b - 1 for a, b in zip(v.cpu, base.cpu)]
            vs = f"{med(r) * 100:+6.1f}% [{min(r) * 100:+.1f}..{max(r) * 100:+.1f}]"
        print(f"  {v.name:<30} {med(v.wall):8.3f} ({rng(v.wall):>13}) {med(v.cpu):8.3f} ({rng(v.cpu):>13}) {own:>7}  {vs}")


def target_line(name, measured, target, met, sure, **kw):
    extra = " ".join(f"{k}={v}" for k, v in kw.items())
    print(f"TARGET {name} measured={measured} target={target} met={'yes' if met else 'no'} "
          f"sure={'yes' if sure else 'no'} {extra}".rstrip())


def cpu_target(name, vp, peer, base, peer_label, goal=1.0):
    """viprof's whole-tree CPU no more than goal times the peer's, per round."""
    ratios = [a / b for a, b in zip(vp.cpu, peer.cpu)]
    m = med(ratios)
    met = m <= goal
    sure = all((r <= goal) == met for r in ratios)
    ov = lambda v: med([a / b - 1 for a, b in zip(v.cpu, base.cpu)]) * 100
    target_line(name, f"{m:.3f}", f"<={goal:.3f}", met, sure, viprof=f"{ov(vp):+.1f}%cpu", peer=f"{ov(peer):+.1f}%cpu",
                peer_name=peer_label, ratio=f"{m:.3f}", spread=f"{min(ratios):.3f}..{max(ratios):.3f}",
                rounds=len(ratios))


def floor_line(name, variants, base, peer, goal):
    """What the sampling interrupt alone costs (the floor variant of jvm_variants), beside
    what the goal leaves viprof: goal x the peer's CPU, less the command alone. A goal below
    the floor cannot be met by any sampler of this VM's timer at this rate."""
    fl = next((x for x in variants if x.name.startswith("timer alone")), None)
    if not fl:
        print(f"SKIPPED {name} bench/timer-floor not built")
        return
    over = [c / b - 1 for c, b in zip(fl.cpu, base.cpu)]
    allowed = [goal * p / b - 1 for p, b in zip(peer.cpu, base.cpu)] if peer else []
    extra = {}
    if allowed:
        extra = dict(goal_allows=f"{med(allowed) * 100:+.1f}%cpu", peer=f"{goal:.2f}x{peer.name.split()[0]}",
                     below_floor=f"{sum(a < o for a, o in zip(allowed, over))}/{len(over)}")
    print(f"FLOOR {name} timer_alone={med(over) * 100:+.1f}%cpu spread={min(over) * 100:+.1f}..{max(over) * 100:+.1f}% "
          + " ".join(f"{k}={v}" for k, v in extra.items()) + f" rounds={len(over)}")


def need(path, what):
    if not os.path.exists(path):
        sys.exit(f"bench: {what} not found at {path}")


# ---- parts -------------------------------------------------------------------------

def part_startup(a, tmp):
    vp = os.path.join(a.build, "cli/viprof")
    need(vp, "viprof (build it first)")
    sess, pdata = os.path.join(tmp, "s"), os.path.join(tmp, "p.data")
    clean_s = lambda: shutil.rmtree(sess, ignore_errors=True)
    clean_p = lambda: os.path.exists(pdata) and os.unlink(pdata)
    rounds = a.rounds * 2 + 1   # cheap: more rounds, tighter medians
    print(f"== start+stop: record -- /bin/true, {rounds} interleaved rounds, medians (wall is the target)")
    alone = Variant("/bin/true alone", ["/bin/true"], "base")
    v = Variant("viprof record", [vp, "record", "-q", "-o", sess, "--", "/bin/true"], "viprof", clean_s)
    p = Variant("perf record --no-bpf-event", ["perf", "record", "-q", "--no-bpf-event", "-o", pdata, "--", "/bin/true"],
                "perf", clean_p)
    vg = Variant("viprof record -g", [vp, "record", "-q", "-g", "-o", sess, "--", "/bin/true"], "viprof", clean_s)
    pg = Variant("perf record --no-bpf-event -g",
                 ["perf", "record", "-q", "--no-bpf-event", "-g", "-o", pdata, "--", "/bin/true"], "perf", clean_p)
    variants = [alone, v, p, vg, pg]
    if a.before:
        # Another viprof binary (e.g. main's) measured in the same rounds: before/after.
        variants += [Variant("viprof record (before)", [a.before, "record", "-q", "-o", sess, "--", "/bin/true"],
                             "viprof", clean_s),
                     Variant("viprof record -g (before)", [a.before, "record", "-q", "-g", "-o", sess, "--", "/bin/true"],
                             "viprof", clean_s)]
    if not a.quick:
        # Informative only: perf's defaults add its side-band thread, whose 1 s poll
        # timeout it waits out at the end (strace: poll(..., 1000) = 0 (Timeout)).
        variants.append(Variant("perf record (defaults)", ["perf", "record", "-q", "-o", pdata, "--", "/bin/true"],
                                "perf", clean_p))
    interleave(variants, rounds, tmp)
    print_variants(variants)
    for name, x, y in (("startup-true", v, p), ("startup-true-g", vg, pg)):
        diff = [(s - t) * 1000 for s, t in zip(x.wall, y.wall)]
        ratio = [s / t for s, t in zip(x.wall, y.wall)]
        m = med(diff)
        met = m <= STARTUP_SLACK_MS
        target_line(name, f"{m:+.0f}ms", f"<=+{STARTUP_SLACK_MS}ms", met,
                    all((d <= STARTUP_SLACK_MS) == met for d in diff),
                    viprof=f"{med(x.wall) * 1000:.0f}ms", peer=f"{med(y.wall) * 1000:.0f}ms",
                    peer_name="perf", ratio=f"{med(ratio):.2f}",
                    spread=f"{min(diff):+.0f}..{max(diff):+.0f}ms", rounds=len(diff))


def asprof_lib():
    lib = os.path.join(ASPROF_HOME, "lib/libasyncProfiler.so")
    return lib if os.path.exists(lib) else None


def jvm_variants(a, tmp, cmd, jopt_prefix, label):
    """alone / viprof record -g -F 999 / async-profiler agent at 999 Hz, cpu mode."""
    vp = os.path.join(a.build, "cli/viprof")
    need(vp, "viprof (build it first)")
    sess = os.path.join(tmp, "s")
    base = Variant(f"{label} alone", cmd, "base")
    v = Variant(f"viprof record -g -F {RATE}", [vp, "record", "-q", "-g", "-F", str(RATE), "-o", sess, "--"] + cmd,
                "viprof", lambda: shutil.rmtree(sess, ignore_errors=True))
    variants = [base, v]
    floor = os.path.join(a.build, "bench/timer-floor")
    if os.path.exists(floor):
        # The sampling interrupt alone (bench/workloads/timer-floor.c): a cpu-clock event at
        # the same rate on the same command, with no stack, record or reader. No profiler
        # that samples by this VM's timer costs less (floor_line).
        variants.append(Variant(f"timer alone at {RATE} Hz (the floor)", [floor, str(RATE), "--"] + cmd, "base"))
    lib = asprof_lib()
    ap = None
    if lib:
        # event=cpu is perf_events' cpu-clock: it works without a PMU, like viprof's
        # default event here; stacks as async-profiler takes them by default.
        opt = (f"-agentpath:{lib}=start,event=cpu,interval={AP_INTERVAL},"
               f"file={os.path.join(tmp, 'ap.collapsed')},collapsed")
        ap = Variant(f"async-profiler cpu {RATE} Hz", [cmd[0], jopt_prefix + opt] + cmd[1:], "asprof")
        variants.append(ap)
    else:
        print(f"  async-profiler: not found at {ASPROF_HOME} (set ASPROF_HOME to an async-profiler build); "
              "its columns are skipped")
    return base, v, ap, variants


def javac_sources(tmp, n):
    """Writes n generated classes under tmp/src/gen; returns their paths."""
    src = os.path.join(tmp, "src/gen")
    os.makedirs(src, exist_ok=True)
    files = []
    for i in range(1, n + 1):   # the generator of bench/run-jvm.sh, in Python
        body = [f"package gen; public class C{i} {{"]
        for m in range(1, 9):
            body.append(f"  public static int m{m}(int x) {{ int s = 0; for (int k = 0; k < x; k++) {{ s += k * {m} ^ "
                        f"(s >>> 3); }} return s + C{(i % n) + 1}.m{m}(x - 1); }}")
        body.append(f"  public java.util.List<String> names() {{ java.util.List<String> l = new java.util.ArrayList<>(); "
                    f"for (int k = 0; k < 10; k++) l.add(\"c{i}\" + k); return l; }}")
        body.append("}")
        path = os.path.join(src, f"C{i}.java")
        with open(path, "w") as f:
            f.write("\n".join(body) + "\n")
        files.append(path)
    return files


def jdk_major(jdk):
    m = re.search(r'version "(\d+)', version(jdk))
    return m.group(1) if m else os.path.basename(jdk)


def part_javac(a, tmp):
    """javac under viprof and async-profiler, per JDK (--jdk, repeatable; default $JDK),
    with --before's viprof in the same rounds: the ratio to async-profiler of each."""
    n = a.classes
    files = javac_sources(tmp, n)
    out = os.path.join(tmp, "out")
    for jdk in a.jdk or [JDK]:
        javac = os.path.join(jdk, "bin/javac")
        need(javac, "javac (set JDK or --jdk)")
        cmd = [javac, "-d", out] + files
        suffix = f"-jdk{jdk_major(jdk)}" if a.jdk else ""
        print(f"== javac of {n} generated classes ({version(jdk)}), {a.rounds} interleaved rounds, "
              f"load average {os.getloadavg()[0]:.2f}")
        base, v, ap, variants = jvm_variants(a, tmp, cmd, "-J", "javac")
        before = None
        if a.before:
            sess = os.path.join(tmp, "s")
            before = Variant(f"viprof record -g -F {RATE} (before)",
                             [a.before, "record", "-q", "-g", "-F", str(RATE), "-o", sess, "--"] + cmd, "viprof",
                             lambda: shutil.rmtree(sess, ignore_errors=True))
            variants.append(before)
        interleave(variants, a.rounds, tmp)
        print_variants(variants, base)
        if ap:
            cpu_target("javac-cpu-vs-asprof" + suffix, v, ap, base, "async-profiler", JAVAC_GOAL)
            floor_line("javac-floor" + suffix, variants, base, ap, JAVAC_GOAL)
            if before:
                cpu_target("javac-cpu-vs-asprof-before" + suffix, before, ap, base, "async-profiler", JAVAC_GOAL)
        else:
            print(f"SKIPPED javac-cpu-vs-asprof{suffix} async-profiler not found (ASPROF_HOME)")
        print(f"  load average after: {os.getloadavg()[0]:.2f}")
        sys.stdout.flush()


def part_javac_breakdown(a, tmp):
    """What 'record -g' adds to javac, part by part, as differences of variants run in
    the same interleaved rounds (median per-round CPU over javac alone, in % of it)."""
    javac = os.path.join(JDK, "bin/javac")
    need(javac, "javac (set JDK)")
    vp = os.path.join(a.build, "cli/viprof")
    agent = os.path.join(a.build, "jvm-agent/libviprof-jvmti.so")
    need(vp, "viprof (build it first)")
    need(agent, "the JVM agent (build it first)")
    files = javac_sources(tmp, a.classes)
    cmd = [javac, "-d", os.path.join(tmp, "out")] + files
    sess = os.path.join(tmp, "s")
    clean = lambda: shutil.rmtree(sess, ignore_errors=True)
    jit = os.path.join(tmp, "jit")
    clean_jit = lambda: (shutil.rmtree(jit, ignore_errors=True), os.makedirs(jit))
    rec = lambda *o: [vp, "record", "-q", "-F", str(RATE)] + list(o) + ["-o", sess, "--"]
    dns = ["-J-XX:+UnlockDiagnosticVMOptions", "-J-XX:+DebugNonSafepoints"]
    print(f"== what record -g adds to javac of {a.classes} generated classes ({version(JDK)}), "
          f"{a.rounds} interleaved rounds")
    alone = Variant("javac alone", cmd, "base")
    v = {
        "dns": Variant("javac +DebugNonSafepoints", [javac] + dns + cmd[1:], "base"),
        "agent": Variant("javac + agent (+DNS)", [javac, f"-J-agentpath:{agent}=dir={jit}"] + dns + cmd[1:], "base",
                         clean_jit),
        "start": Variant("record -g --no-jit -- /bin/true", rec("-g", "--no-jit") + ["/bin/true"], "viprof", clean),
        "floor": Variant(f"timer alone at {RATE} Hz (the floor)",
                         [os.path.join(a.build, "bench/timer-floor"), str(RATE), "--"] + cmd, "base"),
        "nog": Variant("record --no-jit (no -g)", rec("--no-jit") + cmd, "viprof", clean),
        "fp": Variant("record -g --no-jit --stack-walk fp", rec("-g", "--no-jit", "--stack-walk", "fp") + cmd,
                      "viprof", clean),
        "g": Variant("record -g --no-jit", rec("-g", "--no-jit") + cmd, "viprof", clean),
        "full": Variant(f"record -g -F {RATE}", rec("-g") + cmd, "viprof", clean),
    }
    if a.before:   # another viprof (e.g. main's) in the same rounds: before/after
        v["before"] = Variant(f"record -g -F {RATE} (before)", [a.before] + rec("-g")[1:] + cmd, "viprof", clean)
    if not os.path.exists(v["floor"].cmd[0]):
        print(f"  bench/timer-floor not built: the floor row is left out")
        del v["floor"]
    variants = [alone] + list(v.values())
    lib = asprof_lib()
    ap = None
    if lib:
        opt = (f"-J-agentpath:{lib}=start,event=cpu,interval={AP_INTERVAL},"
               f"file={os.path.join(tmp, 'ap.collapsed')},collapsed")
        ap = Variant(f"async-profiler cpu {RATE} Hz", [javac, opt] + cmd[1:], "asprof")
        variants.append(ap)
    interleave(variants, a.rounds, tmp)
    print_variants(variants, alone)
    over = lambda x: [c / b - 1 for c, b in zip(x.cpu, alone.cpu)]
    diff = lambda x, y: med([(c - d) / b for c, d, b in zip(x.cpu, y.cpu, alone.cpu)]) * 100
    start = med([c / b for c, b in zip(v["start"].cpu, alone.cpu)]) * 100
    print("  parts, in % of javac alone's CPU (medians of per-round differences):")
    rows = [("recorder start+stop (BPF load and verification, symbols; record -- /bin/true)", start),
            ("sampler interrupts and drain at 999 Hz, no stacks (record - start)", med(over(v["nog"])) * 100 - start),
            *([("  of which the timer interrupt alone (the floor: bench/timer-floor)", med(over(v["floor"])) * 100)]
              if "floor" in v else []),
            ("stacks by frame pointers (-g --stack-walk fp - no -g)", diff(v["fp"], v["nog"])),
            ("unwind tables and their walk (-g - fp)", diff(v["g"], v["fp"])),
            ("the agent in the recording: walk, naming, DNS (full - -g --no-jit)", diff(v["full"], v["g"])),
            ("  of which DebugNonSafepoints alone (javac +DNS - alone)", med(over(v["dns"])) * 100),
            ("  of which the agent alone (javac + agent - +DNS)", diff(v["agent"], v["dns"])),
            ("total: record -g", med(over(v["full"])) * 100)]
    if "before" in v:
        rows.append(("record -g before (--before)", med(over(v["before"])) * 100))
    if ap:
        rows.append(("async-profiler cpu, same rate", med(over(ap)) * 100))
    for name, val in rows:
        print(f"    {val:+6.1f}%  {name}")
    if ap:
        cpu_target("javac-cpu-vs-asprof", v["full"], ap, alone, "async-profiler", JAVAC_GOAL)
        if "before" in v:
            print("  before:", end=" ")
            cpu_target("javac-cpu-vs-asprof-before", v["before"], ap, alone, "async-profiler", JAVAC_GOAL)


def part_service(a, tmp):
    java = os.path.join(JDK, "bin/java")
    need(java, "java (set JDK)")
    cls = os.path.join(tmp, "svc")
    subprocess.run([os.path.join(JDK, "bin/javac"), "-d", cls, os.path.join(ROOT, "bench/workloads/Service.java")],
                   check=True)
    cmd = [java, "-Xmx256m", "-cp", cls, "Service", str(a.requests)]
    print(f"== service-like JVM: Service {a.requests} requests (acceptor + 2 busy workers, allocation; "
          f"{version(JDK)}), {a.rounds} interleaved rounds")
    base, v, ap, variants = jvm_variants(a, tmp, cmd, "", "Service")
    before = None
    if a.before:   # another viprof (e.g. main's) in the same rounds: before/after
        sess = os.path.join(tmp, "s")
        before = Variant(f"viprof record -g -F {RATE} (before)",
                         [a.before, "record", "-q", "-g", "-F", str(RATE), "-o", sess, "--"] + cmd, "viprof",
                         lambda: shutil.rmtree(sess, ignore_errors=True))
        variants.append(before)
    if a.no_switches:   # what the switch tracer (exact steal per thread) costs
        sess2 = os.path.join(tmp, "s2")
        nosw = Variant(f"viprof record -g -F {RATE} (no switch tracer)",
                       [v.cmd[0], "record", "-q", "-g", "-F", str(RATE), "-o", sess2, "--"] + cmd, "viprof",
                       lambda: shutil.rmtree(sess2, ignore_errors=True),
                       env=dict(os.environ, VIPROF_DEBUG_NO_SWITCHES="1"))
        variants.append(nosw)
    interleave(variants, a.rounds, tmp)
    print_variants(variants, base)
    # Issue 37: a service owner accepts +2% CPU for always-on profiling.
    for name, x in (("service-cpu-vs-alone", v), ("service-cpu-vs-alone-before", before),
                    ("service-cpu-vs-alone-no-switches", nosw if a.no_switches else None)):
        if x:
            over = [c / b - 1 for c, b in zip(x.cpu, base.cpu)]
            m = med(over)
            target_line(name, f"{m * 100:+.1f}%", "<=+2.0%", m <= 0.02, all((o <= 0.02) == (m <= 0.02) for o in over),
                        viprof=f"{m * 100:+.1f}%cpu", ratio=f"{1 + m:.3f}",
                        spread=f"{min(over) * 100:+.1f}..{max(over) * 100:+.1f}%", rounds=len(over))
    floor_line("service-floor", variants, base, None, 1.0)
    if ap:
        cpu_target("service-cpu-vs-asprof", v, ap, base, "async-profiler")
        if before:
            print("  before:", end=" ")
            cpu_target("service-cpu-vs-asprof-before", before, ap, base, "async-profiler")
    else:
        print("SKIPPED service-cpu-vs-asprof async-profiler not found (ASPROF_HOME)")


def _task_ns(pid):
    """Per thread of pid: (comm, CPU ns from schedstat, exact)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tids:
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                st = f.read().split()
            ns, runs = int(st[0]), int(st[2])
        except (OSError, ValueError, IndexError):
            continue
        out[t] = (comm, ns, runs)
    return out


def _bpf_progs(pid):
    """The BPF programs pid holds: {prog_id: (runs, run ns)} (bpf_stats must be on)."""
    out = {}
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return out
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                kv = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
        except OSError:
            continue
        if "prog_id" in kv and "run_cnt" in kv:
            out[int(kv["prog_id"])] = (int(kv["run_cnt"]), int(kv["run_time_ns"]))
    return out


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def breakdown_once(vp, cmd, tmp, t1, t2):
    """One `viprof record -g -F RATE -- cmd`: between t1 and t2 s after the JVM started,
    the CPU of every party by the scheduler's exact runtimes and the BPF programs' own
    run time (kernel.bpf_stats_enabled). Returns a dict of ns and counts."""
    sess = os.path.join(tmp, "s-bd")
    shutil.rmtree(sess, ignore_errors=True)
    err = open(os.path.join(tmp, "err.bd"), "wb")
    p = subprocess.Popen([vp, "record", "-q", "-g", "-F", str(RATE), "-o", sess, "--"] + cmd,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    java, t0 = None, None
    while p.poll() is None and java is None:
        for c in _children(p.pid):
            try:
                with open(f"/proc/{c}/comm") as f:
                    if f.read().strip() == "java":
                        java, t0 = c, time.monotonic()
            except OSError:
                pass
        time.sleep(0.01)
    snaps = []
    for t in (t1, t2):
        while p.poll() is None and time.monotonic() - t0 < t:
            time.sleep(0.01)
        if p.poll() is not None:
            break
        snaps.append((time.monotonic(), _task_ns(p.pid), _bpf_progs(p.pid), _task_ns(java)))
        if len(snaps) == 1:
            try:
                names = {x["id"]: x.get("name", "?") for x in json.loads(subprocess.run(
                    ["bpftool", "-j", "prog", "show"], capture_output=True, text=True, timeout=10).stdout or "[]")}
            except (OSError, ValueError, subprocess.TimeoutExpired):
                names = {}
    p.wait()
    err.close()
    if len(snaps) < 2:
        sys.exit("bench: the JVM ended before the breakdown's window; raise --requests")
    (w1, r1, b1, j1), (w2, r2, b2, j2) = snaps
    d = {"wall": (w2 - w1) * 1e9, "progs": {}, "recorder": {}, "jvm": {}}
    for pid, (n, ns) in b2.items():
        n0, ns0 = b1.get(pid, (0, 0))
        name = names.get(pid, str(pid))
        x = d["progs"].setdefault(name, [0, 0])
        x[0] += n - n0
        x[1] += ns - ns0
    for which, a_, b_ in (("recorder", r1, r2), ("jvm", j1, j2)):
        for tid, (comm, ns, runs) in b_.items():
            grp = comm if which == "recorder" else ("agent" if comm == "viprof-jvmti" else "jvm")
            d[which][grp] = d[which].get(grp, 0) + ns - a_.get(tid, (comm, 0, 0))[1]
    # Times the JVM's threads were switched in (schedstat's run count): about as many
    # switch-outs, each an on_switch run charged to the JVM's CPU.
    d["jvm_switches"] = sum(runs - j1.get(tid, ("", 0, 0))[2] for tid, (_, _, runs) in j2.items())
    return d


def part_service_breakdown(a, tmp):
    """Where `record -g -F 999` spends its CPU on the service-like JVM, per sample, in a
    window of its steady state (start-up and shutdown are outside it)."""
    java = os.path.join(JDK, "bin/java")
    cls = os.path.join(tmp, "svc")
    subprocess.run([os.path.join(JDK, "bin/javac"), "-d", cls, os.path.join(ROOT, "bench/workloads/Service.java")],
                   check=True)
    cmd = [java, "-Xmx256m", "-cp", cls, "Service", str(a.requests * 3)]
    builds = [("after", os.path.join(a.build, "cli/viprof"))] + ([("before", a.before)] if a.before else [])
    t1, t2 = 2.0, 6.0
    print(f"== service breakdown: Service {a.requests * 3} requests under viprof record -g -F {RATE}, window "
          f"{t1:.0f}-{t2:.0f} s after the JVM started, {a.rounds} rounds per build alternating, medians; "
          "kernel.bpf_stats_enabled=1 during the runs")
    old = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    res = {b: [] for b, _ in builds}
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        for r in range(a.rounds):
            for b, vp in (builds if r % 2 == 0 else builds[::-1]):
                res[b].append(breakdown_once(vp, cmd, tmp, t1, t2))
            print(f"  round {r + 1}/{a.rounds} done", file=sys.stderr)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)
    for b, _ in builds:
        runs = res[b]
        samples = med([sum(n for k, (n, _) in d["progs"].items() if k == "on_sample") for d in runs])
        print(f"  {b}: {samples:.0f} samples in the window (on_sample runs), "
              f"{samples / med([d['wall'] for d in runs]) * 1e9:.0f}/s")
        rows = []
        for k in sorted({k for d in runs for k in d["progs"]}):
            n = med([d["progs"].get(k, [0, 0])[0] for d in runs])
            ns = med([d["progs"].get(k, [0, 0])[1] for d in runs])
            rows.append((f"bpf {k} ({n:.0f} runs, {ns / n if n else 0:.0f} ns/run)", ns))
        for k in sorted({k for d in runs for k in d["recorder"]}):
            rows.append((f"recorder thread {k}", med([d["recorder"].get(k, 0) for d in runs])))
        rows.append(("JVM agent thread (viprof-jvmti)", med([d["jvm"].get("agent", 0) for d in runs])))
        jvm = med([d["jvm"].get("jvm", 0) + d["jvm"].get("agent", 0) for d in runs])
        bpf_jvm = med([sum(v[1] for v in d["progs"].values()) for d in runs])
        work = jvm - bpf_jvm - rows[-1][1]
        print(f"    {'part':<60} {'ms':>8} {'us/sample':>10} {'% of work':>10}")
        for name, ns in rows:
            print(f"    {name:<60} {ns / 1e6:8.1f} {ns / samples / 1e3 if samples else 0:10.2f} {ns / work * 100:9.2f}%")
        tot = sum(ns for _, ns in rows)
        print(f"    {'total':<60} {tot / 1e6:8.1f} {tot / samples / 1e3 if samples else 0:10.2f} {tot / work * 100:9.2f}%")
        print(f"    (work = the JVM's CPU in the window less BPF run time and the agent: {work / 1e6:.0f} ms; "
              "BPF time is charged to whatever task it interrupted, mostly the JVM)")
        sw = med([d["jvm_switches"] for d in runs])
        onsw = [d["progs"].get("on_switch", [0, 0]) for d in runs]
        per = med([x[1] / x[0] for x in onsw if x[0]]) if any(x[0] for x in onsw) else 0
        print(f"    the JVM's own context switches in the window: {sw:.0f} ({sw / med([d['wall'] for d in runs]) * 1e9:.0f}/s);"
              f" the switch tracer's runs charged to the JVM: about {sw * per / 1e6:.1f} ms = {sw * per / work * 100:.2f}% "
              "of work (the rest is the VM's other tasks')")


def part_native(a, tmp):
    vp = os.path.join(a.build, "cli/viprof")
    fw = os.path.join(a.build, "bench/fixedwork")
    need(fw, "fixedwork (build the bench/ targets)")
    sess, pdata = os.path.join(tmp, "s"), os.path.join(tmp, "p.data")
    cmd = [fw, str(a.fw_iters), "2"]
    print(f"== native: fixedwork {a.fw_iters} 2 (fixed work on 2 threads), {a.rounds} interleaved rounds")
    base = Variant("fixedwork alone", cmd, "base")
    v = Variant(f"viprof record -g -F {RATE}", [vp, "record", "-q", "-g", "-F", str(RATE), "-o", sess, "--"] + cmd,
                "viprof", lambda: shutil.rmtree(sess, ignore_errors=True))
    p = Variant(f"perf record -g -F {RATE}",
                ["perf", "record", "-q", "--no-bpf-event", "-g", "-F", str(RATE), "-o", pdata, "--"] + cmd, "perf",
                lambda: os.path.exists(pdata) and os.unlink(pdata))
    variants = [base, v, p]
    interleave(variants, a.rounds, tmp)
    print_variants(variants, base)
    cpu_target("native-cpu-vs-perf", v, p, base, "perf")


def version(jdk):
    try:
        out = subprocess.run([os.path.join(jdk, "bin/java"), "-version"], capture_output=True, text=True).stderr
        return out.splitlines()[0]
    except (OSError, IndexError):
        return jdk


# ---- the summary table -------------------------------------------------------------

def parse_targets(path):
    rows = []
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("SKIPPED "):
                parts = line.split(None, 2)
                rows.append({"name": parts[1], "met": "skipped: " + (parts[2].strip() if len(parts) > 2 else "")})
                continue
            if not line.startswith("TARGET "):
                continue
            parts = line.split()
            row = {"name": parts[1] if len(parts) > 1 else "?"}
            for kv in parts[2:]:
                if "=" in kv:
                    k, val = kv.split("=", 1)
                    row[k] = val
            rows.append(row)
    return rows


def print_table(files, missing):
    rows = []
    for path in files:
        rows += [(os.path.basename(path).split(".")[0], r) for r in parse_targets(path)]
    hdr = ("target", "viprof", "peer", "ratio", "spread", "measured", "goal", "met")
    out = []
    for src, r in rows:
        met = r.get("met", "?")
        if r.get("sure") == "no":
            met += " (within noise)"
        peer = r.get("peer", "-")
        if "peer_name" in r and peer != "-":
            peer = f"{r['peer_name']} {peer}"
        out.append((r["name"], r.get("viprof", r.get("measured", "-")), peer, r.get("ratio", "-"),
                    r.get("spread", "-"), r.get("measured", "-"), r.get("target", "-"), met))
    for m in missing:
        out.append((m, "-", "-", "-", "-", "-", "-", "not present"))
    w = [max(len(str(x[i])) for x in out + [hdr]) for i in range(len(hdr))]
    fmt = "  ".join("{:<%d}" % n for n in w)
    print(fmt.format(*hdr))
    print(fmt.format(*("-" * n for n in w)))
    for x in out:
        print(fmt.format(*x))
    met = sum(1 for x in out if x[7].startswith("yes"))
    print(f"{met} of {sum(1 for _, r in rows if not r.get('met', '?').startswith('skipped'))} targets met" + (f"; {len(missing)} script(s) not present" if missing else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("parts", nargs="+", help="startup javac javac-breakdown service service-breakdown native | table FILE... [--missing NAME]")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=None, help="rounds per comparison (default 5; --quick 2)")
    ap.add_argument("--quick", action="store_true", help="fewer rounds and smaller workloads, for trying it out")
    ap.add_argument("--classes", type=int, default=300)
    ap.add_argument("--requests", type=int, default=None, help="Service requests (default 300000; --quick 100000)")
    ap.add_argument("--fw-iters", type=int, default=None, help="fixedwork size (default 500; --quick 200)")
    ap.add_argument("--jdk", action="append", help="(javac) a JDK to run javac of; repeat for several (default $JDK)")
    ap.add_argument("--before", help="(startup, javac, javac-breakdown, service, service-breakdown) another viprof binary to time in the same rounds, e.g. main's")
    ap.add_argument("--no-switches", action="store_true",
                    help="(service) add viprof without its switch tracer (VIPROF_DEBUG_NO_SWITCHES=1)")
    ap.add_argument("--missing", action="append", default=[], help="(table) a script that is not there")
    a = ap.parse_args()
    if a.parts[0] == "table":
        print_table(a.parts[1:], a.missing)
        return
    a.build = os.path.abspath(a.build)
    a.rounds = a.rounds or (2 if a.quick else 5)
    a.requests = a.requests or (100000 if a.quick else 300000)
    a.fw_iters = a.fw_iters or (200 if a.quick else 500)
    if os.geteuid() != 0:
        sys.exit("bench: run as root (viprof and perf record need it here)")
    parts = {"startup": part_startup, "javac": part_javac, "javac-breakdown": part_javac_breakdown, "service": part_service,
             "service-breakdown": part_service_breakdown, "native": part_native}
    for p in a.parts:
        if p not in parts:
            sys.exit(f"bench: unknown part '{p}' (startup, javac, javac-breakdown, service, service-breakdown, native, table)")
    tmp = tempfile.mkdtemp(prefix="vp-suite.")
    try:
        print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, load average {os.getloadavg()[0]:.2f}, "
              f"{os.cpu_count()} CPUs, build {a.build}")
        for p in a.parts:
            parts[p](a, tmp)
            sys.stdout.flush()
        if MACHINE.perf_waits or MACHINE.perf_retries:
            print(f"# perf waited {MACHINE.perf_waits} time(s) ({MACHINE.perf_wait_s:.1f} s) for other BPF programs to "
                  f"unload, and was retried {MACHINE.perf_retries} time(s) after aborting")
        else:
            print("# perf never had to wait for other BPF programs, nor be retried")
        print(f"# load average at the end {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
