#!/bin/sh
# The cost of 'viprof serve --continuous' on an idle VM and on a busy one.
#
# idle: the service runs DUR seconds alone; its CPU time (its own and its recorders',
#       from wait4's rusage, so the recorder children count) in % of one CPU.
# busy: fixedwork (2 threads, a fixed amount of work) runs to its end, without the
#       service and with it, alternating ROUNDS times; the service's CPU % over the
#       run, and fixedwork's wall-time slowdown (median of rounds).
# exec: a loop starting short-lived programs (/bin/true, 200 a second) and a JVM
#       (java -version every 3 s) runs while, in turn, the service (--cpu-budget 0, so
#       that the rate stays) and plain 'viprof record -a -g' sample at the same rate
#       (-F EXEC_HZ, default 19); each one's CPU in % of one CPU and peak RSS, side by
#       side. With VIPROF_BASELINE=/path/to/an/older/viprof its service runs in the same
#       rounds too (the before/after of a change, in one run).
# Prints TARGET lines as bench/suite.py does. Run as root from the build tree:
#   sh bench/continuous.sh BUILD_DIR [DUR] [INTERVAL] [ROUNDS]
# e.g. sh bench/continuous.sh build 60 20 3
set -eu
BUILD=${1:?usage: continuous.sh BUILD_DIR [DUR] [INTERVAL] [ROUNDS]}
DUR=${2:-60}
INTERVAL=${3:-20}
ROUNDS=${4:-3}
VIPROF=$BUILD/cli/viprof
WORK=$BUILD/bench/fixedwork
[ -x "$VIPROF" ] && [ -x "$WORK" ] || { echo "continuous.sh: build viprof and bench/fixedwork in $BUILD first" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "continuous.sh: run as root (the service records the whole VM)" >&2; exit 2; }

exec python3 - "$VIPROF" "$WORK" "$DUR" "$INTERVAL" "$ROUNDS" <<'EOF'
import os, signal, statistics, subprocess, sys, tempfile, time, shutil

viprof, work, dur, interval, rounds = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
phases = os.environ.get("PHASES", "idle,busy,exec").split(",")
baseline = os.environ.get("VIPROF_BASELINE")
exec_hz = os.environ.get("EXEC_HZ", "19")
java = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"

def exec_load():
    # Short-lived programs, and a JVM now and then: what a busy build or batch VM does.
    script = ("while :; do for i in $(seq 20); do /bin/true; done; sleep 0.1; done & L=$!; "
              "while :; do %s -version >/dev/null 2>&1; sleep 3; done & J=$!; "
              "trap 'kill $L $J; exit 0' TERM; wait" % (java if os.path.exists(java) else "true"))
    return subprocess.Popen(["sh", "-c", script])

def measured(cmd, d, secs):
    # CPU (user + system, the process and its reaped children) in % of one CPU, and peak RSS.
    log = open(os.path.join(d, "m.log"), "w")
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=log, stderr=log)
    if secs:
        time.sleep(secs)
        p.send_signal(signal.SIGTERM)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    return (ru.ru_utime + ru.ru_stime) / wall * 100, ru.ru_maxrss / 1024

def exec_phase(d):
    rows = {}
    for r in range(rounds):
        load = exec_load()
        time.sleep(1)
        try:
            runs = [("service", viprof)] + ([("service-baseline", baseline)] if baseline else [])
            for name, b in runs:
                shutil.rmtree(os.path.join(d, "c"), ignore_errors=True)
                pct, rss = measured([b, "serve", "--continuous", os.path.join(d, "c"), "--interval", interval,
                                     "--no-jit", "-F", exec_hz, "--cpu-budget", "0"], d, dur)
                rows.setdefault(name, []).append((pct, rss))
            shutil.rmtree(os.path.join(d, "r"), ignore_errors=True)
            pct, rss = measured([viprof, "record", "-a", "-g", "-q", "--no-jit", "-F", exec_hz, "-d", str(int(dur)),
                                 "-o", os.path.join(d, "r")], d, 0)
            rows.setdefault("record -a -g", []).append((pct, rss))
        finally:
            load.send_signal(signal.SIGTERM)
            load.wait()
        print("exec round %d: " % (r + 1) + ", ".join("%s %.2f%% of one CPU (%.0f MB)" % (k, v[-1][0], v[-1][1])
                                                        for k, v in rows.items()))
    print("exec-heavy VM at %s Hz, %s s intervals, medians of %d rounds: " % (exec_hz, interval, rounds) +
          ", ".join("%s %.2f%% of one CPU, peak %.0f MB" % (k, statistics.median(x[0] for x in v),
                                                            max(x[1] for x in v)) for k, v in rows.items()))
    return {k: statistics.median(x[0] for x in v) for k, v in rows.items()}

def start_service(d):
    log = open(os.path.join(d, "serve.log"), "w")
    p = subprocess.Popen([viprof, "serve", "--continuous", os.path.join(d, "c"), "--interval", interval,
                          "--no-jit"], stdout=log, stderr=log)
    return p, time.monotonic()

def stop_service(p, t0):
    p.send_signal(signal.SIGTERM)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    return (ru.ru_utime + ru.ru_stime) / wall * 100, wall

def fixedwork():
    t = time.monotonic()
    subprocess.run([work, "4000", "2"], stdout=subprocess.DEVNULL, check=True)
    return time.monotonic() - t

def target(name, measured, target, met, **kw):
    extra = " ".join(f"{k}={v}" for k, v in kw.items())
    print(f"TARGET {name} measured={measured} target={target} met={'yes' if met else 'no'} sure=no {extra}".rstrip())

d = tempfile.mkdtemp(prefix="vp-bench-continuous-")
try:
  if "exec" in phases:
    ex = exec_phase(d)
    target("continuous-exec-cpu", f"{ex['service']:.2f}%", "<=0.5%", ex["service"] <= 0.5, hz=exec_hz,
           record_a=f"{ex['record -a -g']:.2f}%")
  if "idle" in phases or "busy" in phases:
      # Idle: the service alone.
      p, t0 = start_service(d)
      time.sleep(dur)
      idle_pct, idle_wall = stop_service(p, t0)
      print(f"idle VM: the service used {idle_pct:.2f}% of one CPU over {idle_wall:.0f} s ({interval} s intervals)")

      # Busy: fixedwork alone and under the service, alternating.
      base, under, pcts = [], [], []
      for r in range(rounds):
          base.append(fixedwork())
          shutil.rmtree(os.path.join(d, "c"), ignore_errors=True)
          p, t0 = start_service(d)
          time.sleep(2)   # the first interval's start-up, as in steady state
          under.append(fixedwork())
          pct, _ = stop_service(p, t0)
          pcts.append(pct)
          print(f"round {r + 1}: fixedwork {base[-1]:.2f} s alone, {under[-1]:.2f} s under the service "
                f"({(under[-1] / base[-1] - 1) * 100:+.1f}%), the service {pct:.2f}% of one CPU")
      slow = statistics.median(u / b - 1 for u, b in zip(under, base)) * 100
      busy_pct = statistics.median(pcts)
      print(f"busy VM: fixedwork {statistics.median(base):.2f} s alone, {statistics.median(under):.2f} s under the "
            f"service: {slow:+.1f}%; the service {busy_pct:.2f}% of one CPU")
      target("continuous-idle-cpu", f"{idle_pct:.2f}%", "<=2%", idle_pct <= 2, interval=interval)
      target("continuous-busy-cpu", f"{busy_pct:.2f}%", "<=2%", busy_pct <= 2, interval=interval)
      target("continuous-busy-slowdown", f"{slow:+.1f}%", "<=3%", slow <= 3, rounds=rounds)
finally:
    shutil.rmtree(d, ignore_errors=True)
EOF
