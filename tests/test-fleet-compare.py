#!/usr/bin/env python3
"""test-fleet.sh's comparison: FMT A B (text, folded, or pprof -top output). The top
methods must be the same and each share within 0.1 percentage points."""
import re
import sys

TOL = 0.1


def shares(fmt, path):
    out = {}
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    if fmt == "folded":
        tot = 0
        for ln in lines:
            stack, _, n = ln.rpartition(" ")
            if not stack:
                continue
            leaf = stack.split(";")[-1]
            out[leaf] = out.get(leaf, 0) + int(n)
            tot += int(n)
        return {k: 100.0 * v / tot for k, v in out.items()} if tot else {}
    if fmt == "text":
        for ln in lines:
            m = re.match(r"^\s+(\d+\.\d)\s+(\d+\.\d|-)\s+(\d+)\s+(\S+)\s+(.*?)\s{2,}", ln + "  ")
            if m and m.group(4) != "(other:":
                out[m.group(5) + " " + m.group(4)] = float(m.group(1))
        return out
    # pprof -top: "flat flat% sum% cum cum% name"
    for ln in lines:
        m = re.match(r"^\s*\S+\s+(\d+\.\d+)%\s+\S+%\s+\S+\s+\S+%\s+(.*)$", ln)
        if m:
            out[m.group(2)] = out.get(m.group(2), 0) + float(m.group(1))
    return out


def main():
    fmt, a, b = sys.argv[1:4]
    sa, sb = shares(fmt, a), shares(fmt, b)
    if not sb:
        print(f"no rows in {b}")
        return 1
    top_b = sorted(sb, key=lambda k: -sb[k])[:10]
    bad = 0
    for k in top_b:
        if abs(sa.get(k, 0.0) - sb[k]) > TOL + 1e-9:
            print(f"{k}: {sa.get(k, 0.0):.2f}% in the store's report, {sb[k]:.2f}% in the disk's")
            bad += 1
    top_a = sorted(sa, key=lambda k: -sa[k])[:5]
    if [k for k in top_a if sa[k] >= 1.0] != [k for k in top_b[:5] if sb[k] >= 1.0]:
        # The order of equal shares may differ; the sets and shares above decide.
        if set(k for k in top_a if sa[k] >= 1.0) != set(k for k in top_b[:5] if sb[k] >= 1.0):
            print(f"top methods differ: store {top_a}, disk {top_b[:5]}")
            bad += 1
    print(f"{fmt}: {len(top_b)} top rows compared, {bad} differ")
    return 1 if bad else 0


sys.exit(main())
