#!/usr/bin/env python3
"""Per-sample cost of `viprof record -g -F 999 -- javac` (300 generated classes), for one
or more viprof binaries in interleaved rounds (compare them within one run: the VM is
shared): on_sample's BPF run time per run (run_time_ns / run_cnt, read from the recorder's
/proc/PID/fdinfo while it records; the stats are switched on with a BPF_ENABLE_STATS fd
held by this script, not the global sysctl, so other users' settings stay), the on_sample
runs, the recorder process's CPU (all its threads, start-up included) per sample, and the
session's bytes per sample.

Usage: python3 bench/sample-cost.py [--rounds N] [--jdk DIR] VIPROF [VIPROF...]   (root, x86-64)
"""
import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite  # noqa: E402  (javac_sources, _bpf_progs, _task_ns)

SYS_BPF, BPF_ENABLE_STATS, BPF_STATS_RUN_TIME = 321, 32, 0


def enable_stats():
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint32 * 32)()
    attr[0] = BPF_STATS_RUN_TIME
    fd = libc.syscall(SYS_BPF, BPF_ENABLE_STATS, ctypes.byref(attr), ctypes.sizeof(attr))
    if fd < 0:
        sys.exit(f"sample-cost: BPF_ENABLE_STATS failed: {os.strerror(ctypes.get_errno())}; run as root")
    return fd


def prog_names():
    try:
        out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, timeout=20).stdout
        return {x["id"]: x.get("name", "?") for x in json.loads(out or "[]")}
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}


def once(vp, jdk, files, tmp):
    sess, out = os.path.join(tmp, "s"), os.path.join(tmp, "out")
    shutil.rmtree(sess, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.Popen([vp, "record", "-q", "-g", "-F", "999", "-o", sess, "--", os.path.join(jdk, "bin/javac"),
                          "-d", out] + files, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    last, names, rec = {}, {}, 0
    while p.poll() is None:
        b = suite._bpf_progs(p.pid)
        if b:
            if set(b) - set(names):
                names.update(prog_names())
            last = b
        t = suite._task_ns(p.pid)
        if t:
            rec = sum(ns for _, ns, _ in t.values())
        time.sleep(0.05)
    runs = sum(n for k, (n, _) in last.items() if names.get(k) == "on_sample")
    ns = sum(t for k, (_, t) in last.items() if names.get(k) == "on_sample")
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(sess) for f in fs)
    return runs, ns, rec, size


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("viprof", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jdk", default="/usr/lib/jvm/java-17-openjdk-amd64")
    a = ap.parse_args()
    fd = enable_stats()
    tmp = tempfile.mkdtemp(prefix="vp-sample-cost-")
    try:
        files = suite.javac_sources(tmp, 300)
        res = {v: [] for v in a.viprof}
        print(f"per-sample cost, viprof record -g -F 999 -- javac of 300 classes, {a.rounds} interleaved rounds, "
              f"load {os.getloadavg()[0]:.1f}")
        for r in range(a.rounds):
            for v in (a.viprof if r % 2 == 0 else a.viprof[::-1]):
                runs, ns, rec, size = once(v, a.jdk, files, tmp)
                res[v].append((runs, ns, rec, size))
                print(f"  round {r + 1} {v}: {runs} on_sample runs, {ns / max(runs, 1):.0f} ns/run; recorder "
                      f"{rec / 1e6:.0f} ms CPU = {rec / max(runs, 1) / 1e3:.1f} us/sample; session "
                      f"{size / max(runs, 1):.0f} B/sample", flush=True)
        first = None
        for v in a.viprof:
            per = statistics.median(ns / max(runs, 1) for runs, ns, _, _ in res[v])
            recp = statistics.median(rec / max(runs, 1) for runs, _, rec, _ in res[v])
            first = first or per
            print(f"MEDIAN {v}: on_sample {per:.0f} ns/run ({per / first:.3f}x the first), recorder "
                  f"{recp / 1e3:.1f} us/sample")
        print(f"  load average after: {os.getloadavg()[0]:.2f}")
    finally:
        os.close(fd)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
