#!/usr/bin/env python3
"""Checks a JFR file viprof wrote from a recording of tests/java/JfrTimes (issue 33 item 4)
with the JDK's own jfr tool: real start times and durations, environment events.

usage: test-report-jfr-check.py JFR_TOOL FILE.jfr SESSION.json FIXTURE_LOG
(SESSION.json: viprof report -F json of the session)

Each wait the fixture timed itself (KIND START_NS DURATION_NS HOLD_MS, System.nanoTime) must
be an event of its thread in the file, in the same order, starting where it started and
lasting what it lasted: a sleep as viprof.ThreadBlocked (its blocked part: the requested
sleep, to the timer), a monitor wait as jdk.JavaMonitorEnter, a ReentrantLock wait as
jdk.ThreadPark. Every event lies inside the recording. Exits 1 naming what failed."""
import json
import re
import subprocess
import sys
from datetime import datetime, timezone

jfr, path, session_json, fixture_log = sys.argv[1:5]
failed = []


def fail(msg):
    print("FAIL: " + msg)
    failed.append(msg)


def run(*args):
    r = subprocess.run([jfr] + list(args), capture_output=True, text=True)
    if r.returncode:
        print(r.stdout + r.stderr)
        sys.exit("jfr %s exited %d" % (" ".join(args), r.returncode))
    return r.stdout


def wall_ns(s):
    """'2026-11-28T21:48:39.810158218Z' -> ns since the epoch (nanoseconds kept)."""
    m = re.match(r"(\d+-\d+-\d+T\d+:\d+:\d+)(?:\.(\d+))?Z$", s)
    sec = int(datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp())
    frac = (m.group(2) or "0").ljust(9, "0")[:9]
    return sec * 1000000000 + int(frac)


def span_ns(s):
    """'PT0.005053018S', 'PT1M2.5S' -> ns."""
    m = re.match(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:\.(\d+))?S)?$", s)
    h, mi, se, fr = m.groups()
    ns = ((int(h or 0) * 60 + int(mi or 0)) * 60 + int(se or 0)) * 1000000000
    return ns + int((fr or "0").ljust(9, "0")[:9])


# The session's meta as the report reads it (viprof report -F json's "session").
meta = json.load(open(session_json))["session"]
mono0 = int(meta["start_monotonic_ns"])
real0 = int(meta["start_realtime_ns"])
# The sampling window: from where it opened (after the recorder's setup) for its duration.
win0 = int(meta["window.start_monotonic_ns"])
end = win0 + int(meta["duration_ns"])

# The environment events JMC's pages read.
summary = run("summary", path)
print(summary)
for t in ("jdk.JVMInformation", "jdk.OSInformation", "jdk.CPUInformation", "jdk.ActiveRecording",
          "jdk.ActiveSetting"):
    m = re.search(r"^\s*" + re.escape(t) + r"\s+(\d+)", summary, re.M)
    if not m or int(m.group(1)) < 1:
        fail("jfr summary lists no %s" % t)
env = json.loads(run("print", "--json", "--events",
                     "jdk.JVMInformation,jdk.OSInformation,jdk.CPUInformation,jdk.ActiveRecording", path))
envs = {e["type"]: e["values"] for e in env["recording"]["events"]}
jvm = envs.get("jdk.JVMInformation", {})
print("JVMInformation:", jvm)
print("OSInformation:", envs.get("jdk.OSInformation"))
print("CPUInformation:", envs.get("jdk.CPUInformation"))
print("ActiveRecording:", envs.get("jdk.ActiveRecording"))
if "VM" not in (jvm.get("jvmName") or "") or not jvm.get("jvmVersion") or not jvm.get("pid"):
    fail("jdk.JVMInformation has no JVM name, version or pid: %s" % jvm)
if "JfrTimes" not in (jvm.get("javaArguments") or ""):
    fail("jdk.JVMInformation's javaArguments do not name the main class: %s" % jvm)
if meta["kernel"] not in (envs.get("jdk.OSInformation", {}).get("osVersion") or ""):
    fail("jdk.OSInformation does not hold the kernel %s" % meta["kernel"])
rec = envs.get("jdk.ActiveRecording", {})
if not rec.get("recordingStart") or abs(wall_ns(rec["recordingStart"]) - (real0 + win0 - mono0)) > 1000000:
    fail("jdk.ActiveRecording starts at %s, the window at %d ns" % (rec.get("recordingStart"), real0 + win0 - mono0))

# The events, their threads, times and durations (monotonic, as the fixture logged).
types = "jdk.ThreadPark,jdk.JavaMonitorEnter,viprof.ThreadBlocked,jdk.ObjectAllocationSample,jdk.ExecutionSample"
evs = json.loads(run("print", "--json", "--stack-depth", "2", "--events", types, path))["recording"]["events"]
got = {}
outside = 0
for e in evs:
    v = e["values"]
    start = wall_ns(v["startTime"]) - real0 + mono0
    dur = span_ns(v["duration"]) if "duration" in v else 0
    th = (v.get("eventThread") or v.get("sampledThread") or {}).get("javaName", "")
    if start < win0 - 1000000 or start + dur > end + 1000000:
        outside += 1
        if outside < 5:
            print("outside [%d, %d]: %s start %d dur %d" % (win0, end, e["type"], start, dur))
    got.setdefault(e["type"], []).append((start, dur, th, v))
for t, l in sorted(got.items()):
    print("%-28s %6d events, %6d distinct durations" % (t, len(l), len(set(d for _, d, _, _ in l))))
if outside:
    fail("%d events outside the recording" % outside)
for t in ("jdk.ExecutionSample", "jdk.ObjectAllocationSample"):
    if not got.get(t):
        fail("no %s events" % t)

waits = {"sleep": [], "monitor": [], "lock": []}
for line in open(fixture_log):
    k, t0, d, ms = line.split()
    waits[k].append((int(t0), int(d), int(ms) * 1000000))
kinds = {"sleep": ("viprof.ThreadBlocked", "jt-sleeper"), "monitor": ("jdk.JavaMonitorEnter", "jt-mwaiter"),
         "lock": ("jdk.ThreadPark", "jt-lwaiter")}
for k, (t, th) in kinds.items():
    ev = sorted((s, d) for s, d, n, _ in got.get(t, []) if n == th)
    w = sorted(waits[k])
    durs = set(d for _, d in ev)
    print("%s: the fixture timed %d waits, %s has %d events of %s with %d distinct durations"
          % (k, len(w), t, len(ev), th, len(durs)))
    if len(durs) <= 5:
        fail("%s: %d distinct durations (one per stack?)" % (t, len(durs)))
    matched, last, errs = 0, -1, []
    for t0, d, hold in w:
        if k != "sleep" and d < 2000000:
            continue   # the holder had let go already: no contention, no event
        # The sleep's blocked part is the requested sleep (the rest of what the fixture
        # timed is the run queue's); a lock wait is what the waiter timed.
        want = hold if k == "sleep" else d
        best = None
        for i, (s, ed) in enumerate(ev):
            if abs(s - t0) <= 5000000 and (best is None or abs(s - t0) < abs(ev[best][0] - t0)):
                best = i
        if best is None:
            errs.append("no event near %d (%.1f ms)" % (t0, d / 1e6))
            continue
        s, ed = ev[best]
        if abs(ed - want) > max(2000000, want // 20):
            errs.append("wait at %d: %.3f ms, the event %.3f ms" % (t0, want / 1e6, ed / 1e6))
            continue
        if best <= last:
            errs.append("wait at %d: matched out of order" % t0)
            continue
        last = best
        matched += 1
    w = [x for x in w if k == "sleep" or x[1] >= 2000000]
    print("%s: %d of %d waits matched by start (5 ms) and duration (2 ms or 5%%)" % (k, matched, len(w)))
    for x in errs[:8]:
        print("   " + x)
    if len(w) < 10:
        fail("%s: the fixture timed only %d waits" % (k, len(w)))
    elif matched * 10 < len(w) * 8:
        fail("%s: only %d of %d waits have their event" % (k, matched, len(w)))
    if k == "monitor" and ev:
        mx = max(d for _, d in ev)
        print("monitor: longest event %.3f ms, longest timed wait %.3f ms" % (mx / 1e6, max(d for _, d, _ in w) / 1e6))

# jfr view (JDK 21 on): contention by site prints the real longest wait as its Max.
help_text = subprocess.run([jfr, "help"], capture_output=True, text=True).stdout
if re.search(r"^\s*jfr view", help_text, re.M):
    view = run("view", "--width", "200", "contention-by-site", path)
    print(view)
    row = [ln for ln in view.splitlines() if "JfrTimes.onMonitor" in ln]
    mons = sorted(d for s, d, n, _ in got.get("jdk.JavaMonitorEnter", []) if n == "jt-mwaiter")
    if not row:
        fail("jfr view contention-by-site has no row for JfrTimes.onMonitor()")
    elif mons:
        nums = re.findall(r"([\d.]+) ms", row[0])
        mx = float(nums[-1]) if nums else -1
        avg = float(nums[-2]) if len(nums) > 1 else -1
        print("contention-by-site: avg %.2f ms, max %.2f ms; the events' longest %.3f ms" % (avg, mx, mons[-1] / 1e6))
        if abs(mx - mons[-1] / 1e6) > 0.6 or mx <= avg * 1.2:
            fail("contention-by-site's max %.2f ms is not the longest wait %.3f ms (avg %.2f)"
                 % (mx, mons[-1] / 1e6, avg))
else:
    print("this JDK's jfr has no 'view' command: the longest wait is checked from jfr print")

sys.exit(1 if failed else 0)
