#!/bin/sh
# The cost of 'viprof serve --continuous' on an idle VM and on a busy one, interval by
# interval, side by side with plain 'viprof record -a -g' at the same rate.
#
# idle: nothing started by the bench (the VM's own load goes on).
# busy: a loop starting short-lived programs (/bin/true, 200 a second) and a JVM
#       (java -version every 3 s) runs throughout.
# In each, these run at the same time, so that they see the same load:
#   service   viprof serve --continuous --interval INTERVAL --no-jit -F HZ (default 19,
#             the service's default rate; --cpu-budget 0 so that the rate stays)
#   baseline  the same with VIPROF_BASELINE=/path/to/an/older/viprof (before/after)
#   record    viprof record -a -g -q --no-jit -F HZ
# and every INTERVAL seconds the bench prints, per process: its CPU time (user + system
# from /proc/PID/stat) in % of one CPU, the run time of its BPF programs in % of one
# CPU (the kernel's bpf_stats, enabled for the bench only through BPF_ENABLE_STATS;
# the kernel charges it to the interrupted tasks, not to the process), and its memory
# peak in the interval (VmHWM, reset through clear_refs at each interval's start).
# The first interval (the start: BPF verification, kernel symbols) is printed but left
# out of the medians. TARGET lines as bench/suite.py reads them.
#
# jvmstart: the interval in which a JVM starts, on the idle VM: the service alone (with
#       the agent: --jvm-attach all), a JVM (a class compiled at the bench's start, some
#       work, then asleep) started just after its first interval ended; the service's own
#       figure for that second interval (service.json's cpu_pct: attach, unwind tables,
#       the JVM's samples) and its split (jvm_attach_cpu_ns, unwind_tables_ns). With
#       VIPROF_BASELINE, the baseline the same way, alternating, ROUNDS rounds each
#       (medians). A first round, left out, fills the unwind-rule cache (cold tables).
#       JVM_INTERVAL (default 10) is the service's interval in this phase.
# slowdown (PHASES=slowdown): fixedwork (2 threads, fixed work) alone and under the
#       service, alternating ROUNDS times; its wall-time slowdown (median of rounds).
#
# Before/after: VIPROF_BASELINE=OLD/cli/viprof (a build of an older commit, its
# jvm-agent/ beside it) adds a baseline column to idle and busy, rounds to jvmstart, and
# the lines "before/after" with both figures side by side.
#
# Run as root from the build tree:
#   sh bench/continuous.sh BUILD_DIR [DUR] [INTERVAL] [ROUNDS]
# e.g. sh bench/continuous.sh build 120 20 3   (6 intervals of 20 s per phase)
set -eu
BUILD=${1:?usage: continuous.sh BUILD_DIR [DUR] [INTERVAL] [ROUNDS]}
DUR=${2:-120}
INTERVAL=${3:-20}
ROUNDS=${4:-3}
VIPROF=$BUILD/cli/viprof
WORK=$BUILD/bench/fixedwork
[ -x "$VIPROF" ] && [ -x "$WORK" ] || { echo "continuous.sh: build viprof and bench/fixedwork in $BUILD first" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "continuous.sh: run as root (the service records the whole VM)" >&2; exit 2; }

exec python3 - "$VIPROF" "$WORK" "$DUR" "$INTERVAL" "$ROUNDS" <<'EOF'
import ctypes, json, os, signal, statistics, subprocess, sys, tempfile, time, shutil

viprof, work, dur, interval, rounds = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
phases = os.environ.get("PHASES", "idle,busy,jvmstart").split(",")
baseline = os.environ.get("VIPROF_BASELINE")
hz = os.environ.get("HZ", "19")
java = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
tick = os.sysconf("SC_CLK_TCK")

def exec_load():
    # Short-lived programs, and a JVM now and then: what a busy build or batch VM does.
    script = ("while :; do for i in $(seq 20); do /bin/true; done; sleep 0.1; done & L=$!; "
              "while :; do %s -version >/dev/null 2>&1; sleep 3; done & J=$!; "
              "trap 'kill $L $J; exit 0' TERM; wait" % (java if os.path.exists(java) else "true"))
    return subprocess.Popen(["sh", "-c", script])

def enable_bpf_stats():
    # BPF_ENABLE_STATS (32), BPF_STATS_RUN_TIME (0): on while the fd is open, so only
    # for the bench's life, whatever kernel.bpf_stats_enabled says.
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.c_uint32 * 4
    a = attr(0, 0, 0, 0)
    fd = libc.syscall(321, 32, ctypes.byref(a), ctypes.sizeof(a))
    return fd if fd >= 0 else None

def bpf_run_ns(pids):
    # {pid: run time of the BPF programs it holds}, from its descriptors' fdinfo
    # (a program held by two descriptors counts once).
    per = {}
    for pid in pids:
        seen = {}
        try:
            fds = os.listdir(f"/proc/{pid}/fdinfo")
        except OSError:
            continue
        for fd in fds:
            try:
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    kv = dict(l.split(":", 1) for l in f if ":" in l)
            except OSError:
                continue
            if "prog_id" in kv and "run_time_ns" in kv:
                seen[kv["prog_id"].strip()] = int(kv["run_time_ns"])
        per[pid] = sum(seen.values())
    return per

def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])   # utime, stime
    except OSError:
        return None

def hwm_mb(pid, reset):
    try:
        with open(f"/proc/{pid}/status") as f:
            kb = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
        if reset:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")   # the peak starts again from the current RSS
        return kb / 1024
    except (OSError, StopIteration):
        return None

def steady(phase, d):
    nint = max(2, int(dur // interval))
    procs = []
    for name, b in [("service", viprof)] + ([("baseline", baseline)] if baseline else []):
        out = os.path.join(d, name)
        shutil.rmtree(out, ignore_errors=True)
        log = open(os.path.join(d, name + ".log"), "w")
        procs.append((name, subprocess.Popen([b, "serve", "--continuous", out, "--interval", str(interval),
                                              "--no-jit", "-F", hz, "--cpu-budget", "0"], stdout=log, stderr=log)))
    shutil.rmtree(os.path.join(d, "r"), ignore_errors=True)
    rlog = open(os.path.join(d, "record.log"), "w")
    procs.append(("record -a -g", subprocess.Popen([viprof, "record", "-a", "-g", "-q", "--no-jit", "-F", hz, "-d",
                                                    str(nint * interval + 5), "-o", os.path.join(d, "r")],
                                                   stdout=rlog, stderr=rlog)))
    names = [n for n, _ in procs]
    rows = {n: [] for n in names}
    t0 = time.monotonic()
    last = {n: (0, 0) for n in names}
    for n, p in procs:
        hwm_mb(p.pid, True)
    bpf0 = bpf_run_ns([p.pid for _, p in procs])
    print(f"== {phase} VM, {hz} Hz, {interval} s intervals: CPU % of one CPU (process / its BPF programs), "
          f"memory peak MB", flush=True)
    print("  interval  " + "".join(f"{n:>28}" for n in names), flush=True)
    for k in range(1, nint + 1):
        time.sleep(max(0, t0 + k * interval - time.monotonic()))
        bpf = bpf_run_ns([p.pid for _, p in procs])
        cols = []
        for n, p in procs:
            t = cpu_ticks(p.pid)
            ticks = (t - last[n][0]) if t is not None else 0
            last[n] = (t if t is not None else last[n][0], 0)
            bns = bpf.get(p.pid, 0) - bpf0.get(p.pid, 0)
            mb = hwm_mb(p.pid, True)
            pct = ticks / tick / interval * 100
            bpct = bns / 1e9 / interval * 100
            rows[n].append((pct, bpct, mb or 0))
            cols.append(f"{pct:6.2f}% /{bpct:5.2f}% {mb or 0:6.0f} MB")
        bpf0 = bpf
        print(f"  {k:8d}  " + "".join(f"{c:>28}" for c in cols), flush=True)
    for n, p in procs:
        p.send_signal(signal.SIGTERM)
    for n, p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    # The services' own figure per interval (service.json: getrusage, microseconds, where
    # /proc/PID/stat counts 10 ms ticks, 0.05% of a 20 s interval): intervals 2 to the one
    # before the last (the start, and the one the stop cut short, left out).
    own = {}
    for n in ("service", "baseline"):
        out = os.path.join(d, n)
        try:
            ivs = sorted(x for x in os.listdir(out) if len(x) == 16 and x[8] == "T")
        except OSError:
            continue
        pcts = []
        for k in range(2, len(ivs)):
            j = interval_json(out, k)
            if j:
                pcts.append(j["cpu_pct"])
        if pcts:
            own[n] = statistics.median(pcts)
            print(f"  {n}: its own service.json: median {own[n]:.3f}% of one CPU ({min(pcts):.3f}..{max(pcts):.3f}) "
                  f"over intervals 2..{len(ivs) - 1}", flush=True)
    res = {}
    for n in names:
        st = rows[n][1:]   # the start's interval left out
        cpu = [x[0] for x in st]
        res[n] = (statistics.median(cpu), min(cpu), max(cpu), statistics.median(x[1] for x in st),
                  max(x[2] for x in rows[n]), own.get(n))
        print(f"  {n}: median {res[n][0]:.2f}% of one CPU ({res[n][1]:.2f}..{res[n][2]:.2f}) over intervals "
              f"2..{nint}, its BPF programs {res[n][3]:.2f}%, memory peak {res[n][4]:.0f} MB "
              f"(first interval {rows[n][0][0]:.2f}%)", flush=True)
    return res

def interval_json(out, k):
    # The k-th ended interval's service.json under out (1-based), or None.
    try:
        names = sorted(n for n in os.listdir(out) if len(n) == 16 and n[8] == "T")
        with open(os.path.join(out, names[k - 1], "service.json")) as f:
            return json.load(f)
    except (OSError, IndexError, ValueError):
        return None

def wait_for(fn, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = fn()
        if v is not None:
            return v
        time.sleep(0.2)
    return None

def jvm_round(binary, d, classes, jiv):
    out = os.path.join(d, "j")
    shutil.rmtree(out, ignore_errors=True)
    log = open(os.path.join(d, "jvm-serve.log"), "w")
    p = subprocess.Popen([binary, "serve", "--continuous", out, "--interval", str(jiv), "-F", hz,
                          "--cpu-budget", "0", "--jvm-attach", "all"], stdout=log, stderr=log)
    j = None
    try:
        if wait_for(lambda: interval_json(out, 1), jiv * 3 + 30) is None:
            return None
        j = subprocess.Popen([java, "-cp", classes, "VpBenchIdle", str(jiv * 2)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        return wait_for(lambda: interval_json(out, 2), jiv * 3 + 30)
    finally:
        if j:
            j.kill()
            j.wait()
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

def jvmstart(d):
    jiv = int(os.environ.get("JVM_INTERVAL", "10"))
    javac = os.path.join(os.path.dirname(java), "javac")
    if not os.path.exists(javac):
        print(f"# jvmstart: no {javac}: phase skipped")
        return None
    classes = os.path.join(d, "classes")
    os.makedirs(classes, exist_ok=True)
    with open(os.path.join(classes, "VpBenchIdle.java"), "w") as f:
        f.write("public class VpBenchIdle { public static void main(String[] a) throws Exception {"
                " long s = 0; for (int i = 0; i < 2000000; i++) s += Integer.toString(i).hashCode();"
                " System.out.println(s); Thread.sleep(Long.parseLong(a[0]) * 1000); } }\n")
    subprocess.run([javac, "-d", classes, os.path.join(classes, "VpBenchIdle.java")], check=True)
    names = [("service", viprof)] + ([("baseline", baseline)] if baseline else [])
    print(f"== JVM start on the idle VM, {hz} Hz, {jiv} s intervals: the service's CPU in the interval the JVM "
          f"starts in (% of one CPU; JVM attaches / unwind tables in ms)", flush=True)
    cold = jvm_round(viprof, d, classes, jiv)
    if cold:
        print(f"  cold tables (left out): service {cold['cpu_pct']:.2f}% "
              f"(attaches {cold.get('jvm_attach_cpu_ns', 0) / 1e6:.0f} ms, "
              f"tables {cold.get('unwind_tables_ns', 0) / 1e6:.0f} ms)", flush=True)
    res = {n: [] for n, _ in names}
    for r in range(rounds):
        cols = []
        for n, b in names:
            js = jvm_round(b, d, classes, jiv)
            if js is None:
                cols.append(f"{n} (no interval)")
                continue
            res[n].append(js["cpu_pct"])
            extra = ""
            if "jvm_attach_cpu_ns" in js:
                extra = f" ({js['jvm_attach_cpu_ns'] / 1e6:.0f} / {js['unwind_tables_ns'] / 1e6:.0f} ms)"
            cols.append(f"{n} {js['cpu_pct']:.2f}%{extra}")
        print(f"  round {r + 1}: " + ", ".join(cols), flush=True)
    return {n: statistics.median(v) for n, v in res.items() if v}

def fixedwork():
    t = time.monotonic()
    subprocess.run([work, "4000", "2"], stdout=subprocess.DEVNULL, check=True)
    return time.monotonic() - t

def target(name, measured, target, met, **kw):
    extra = " ".join(f"{k}={v}" for k, v in kw.items())
    print(f"TARGET {name} measured={measured} target={target} met={'yes' if met else 'no'} sure=no {extra}".rstrip())

d = tempfile.mkdtemp(prefix="vp-bench-continuous-")
statsfd = enable_bpf_stats()
if statsfd is None:
    print("# bpf_stats could not be enabled: the BPF columns read 0")
try:
    for phase in ("idle", "busy"):
        if phase not in phases:
            continue
        load = exec_load() if phase == "busy" else None
        try:
            time.sleep(1 if load else 0)
            res = steady(phase, d)
        finally:
            if load:
                load.send_signal(signal.SIGTERM)
                load.wait()
        s, r = res["service"], res["record -a -g"]
        kw = dict(hz=hz, interval=interval, spread=f"{s[1]:.2f}..{s[2]:.2f}%", bpf=f"{s[3]:.2f}%",
                  peak_mb=f"{s[4]:.0f}", record_a=f"{r[0]:.2f}%")
        if baseline:
            kw["baseline"] = f"{res['baseline'][0]:.2f}%"
        goal = 0.2 if phase == "idle" else 0.5
        target(f"continuous-{phase}-cpu", f"{s[0]:.2f}%", f"<={goal}%", s[0] <= goal, **kw)
        if s[5] is not None:
            kw["own"] = f"{s[5]:.3f}%"
        if baseline:
            b = res["baseline"]
            if s[5] is not None and b[5] is not None:
                print(f"before/after {phase} (service.json): {b[5]:.3f}% -> {s[5]:.3f}% of one CPU (median)"
                      + (f", ratio {s[5] / b[5]:.2f}" if b[5] > 0 else ""), flush=True)
            print(f"before/after {phase}: {b[0]:.2f}% -> {s[0]:.2f}% of one CPU (median), "
                  f"BPF {b[3]:.2f}% -> {s[3]:.2f}%, memory peak {b[4]:.0f} -> {s[4]:.0f} MB"
                  + (f", ratio {s[0] / b[0]:.2f}" if b[0] > 0 else ""), flush=True)
    if "jvmstart" in phases:
        jr = jvmstart(d)
        if jr and "service" in jr:
            kw = dict(hz=hz, interval=os.environ.get("JVM_INTERVAL", "10"), rounds=rounds)
            if "baseline" in jr:
                kw["baseline"] = f"{jr['baseline']:.2f}%"
                print(f"before/after jvmstart: {jr['baseline']:.2f}% -> {jr['service']:.2f}% of one CPU in the "
                      f"JVM's first interval (median of {rounds})"
                      + (f", ratio {jr['service'] / jr['baseline']:.2f}" if jr['baseline'] > 0 else ""), flush=True)
            target("continuous-jvmstart-cpu", f"{jr['service']:.2f}%", "<=1%", jr["service"] <= 1, **kw)
    if "slowdown" in phases:
        base, under = [], []
        for r in range(rounds):
            base.append(fixedwork())
            shutil.rmtree(os.path.join(d, "c"), ignore_errors=True)
            log = open(os.path.join(d, "serve.log"), "w")
            p = subprocess.Popen([viprof, "serve", "--continuous", os.path.join(d, "c"), "--interval", str(interval),
                                  "--no-jit", "-F", hz], stdout=log, stderr=log)
            time.sleep(2)   # past the start
            under.append(fixedwork())
            p.send_signal(signal.SIGTERM)
            p.wait()
            print(f"round {r + 1}: fixedwork {base[-1]:.2f} s alone, {under[-1]:.2f} s under the service "
                  f"({(under[-1] / base[-1] - 1) * 100:+.1f}%)", flush=True)
        slow = statistics.median(u / b - 1 for u, b in zip(under, base)) * 100
        target("continuous-busy-slowdown", f"{slow:+.1f}%", "<=3%", slow <= 3, rounds=rounds)
finally:
    if statsfd is not None:
        os.close(statsfd)
    shutil.rmtree(d, ignore_errors=True)
EOF
