#!/usr/bin/env python3
"""The project's layering, checked (ctest: check-layering, unit lane).

1. Folders: each folder includes headers only from itself and the folders listed for
   it in ALLOWED (the rooms below it); a folder not listed may include nothing of the
   project (tests/, bench/ and fuzz/ are exempt: they may use any room).
2. Files: no circle of modules (a module is foo.c with foo.h) including each other.

Prints one line per violation and exits 1; exits 0 when the tree keeps the rules.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Lowest first. A folder may include its own headers and those of the folders named.
ALLOWED = {
    "common": set(),
    "sampler-kernel": {"common"},
    "hv-glue": {"common", "sampler-kernel"},
    "maps": {"common"},
    # What viprof knows about HotSpot: below both the recorder and the agent.
    "hotspot": {"common"},
    "recorder": {"common", "sampler-kernel", "hv-glue", "maps", "hotspot"},
    "jvm-agent": {"common", "maps", "hotspot"},
    "postproc": {"common", "sampler-kernel", "hv-glue", "maps"},
    # The fleet store in ClickHouse: rows from profiles, profiles from queries.
    "fleet": {"common", "sampler-kernel", "hv-glue", "maps", "postproc"},
    "daemon": {"common", "sampler-kernel", "hv-glue", "maps", "recorder", "postproc", "fleet"},
    "cli": {"common", "sampler-kernel", "hv-glue", "maps", "hotspot", "recorder", "postproc", "daemon", "fleet"},
}
EXEMPT = {"tests", "bench", "fuzz", "build", "packaging", "docs", "scripts", "cmake"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources():
    for top in sorted(os.listdir(ROOT)):
        d = os.path.join(ROOT, top)
        if top.startswith(".") or top in EXEMPT or not os.path.isdir(d):
            continue
        for dirpath, _, files in os.walk(d):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield top, os.path.relpath(os.path.join(dirpath, f), ROOT)


def main():
    bad = []
    edges = {}
    for top, rel in sources():
        with open(os.path.join(ROOT, rel), errors="replace") as fh:
            text = fh.read()
        mod = os.path.splitext(rel)[0]
        for inc in INCLUDE.findall(text):
            if "/" not in inc:
                continue
            folder = inc.split("/", 1)[0]
            if not os.path.isdir(os.path.join(ROOT, folder)) or folder == top:
                if folder == top:
                    edges.setdefault(mod, set()).add(os.path.splitext(inc)[0])
                continue
            if top not in ALLOWED:
                bad.append(f"{rel}: includes {inc}, but {top}/ has no layering rule (add it to {__file__})")
            elif folder not in ALLOWED[top]:
                bad.append(f"{rel}: includes {inc}: {top}/ may include only "
                           f"{', '.join(sorted(ALLOWED[top] | {top}))}")
    # Module circles inside a folder (across folders the rules above forbid them).
    state = {}

    def visit(m, path):
        state[m] = 1
        for n in sorted(edges.get(m, ())):
            if n == m:
                continue
            if state.get(n) == 1:
                circle = path[path.index(n):] + [n] if n in path else [m, n]
                bad.append("include circle: " + " -> ".join(circle))
            elif not state.get(n):
                visit(n, path + [n])
        state[m] = 2

    for m in sorted(edges):
        if not state.get(m):
            visit(m, [m])
    for line in bad:
        print(line)
    if bad:
        print(f"check-layering: {len(bad)} violation(s)", file=sys.stderr)
        return 1
    print("check-layering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
