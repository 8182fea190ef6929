#!/bin/sh
# The cost of 'viprof serve --continuous' on an idle VM and on a busy one.
#
# idle: the service runs DUR seconds alone; its CPU time (its own and its recorders',
#       from wait4's rusage, so the recorder children count) in % of one CPU.
# busy: fixedwork (2 threads, a fixed amount of work) runs to its end, without the
#       service and with it, alternating ROUNDS times; the service's CPU % over the
#       run, and fixedwork's wall-time slowdown (median of rounds).
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
