#!/usr/bin/env python3
"""The project's layering, checked (ctest: check-layering, unit lane).

1. Folders: each folder includes headers only from itself and the folders listed for
   it in ALLOWED (the rooms below it); a folder not listed may include nothing of the
   project (tests/, bench/ and fuzz/ are exempt: they may use any room).
2. Files: no circle of modules (a module is foo.c with foo.h) including each other.
3. Shared headers: a header may declare functions defined in several .c files only when
   those files do not call (or name) each other's functions through it in a circle.
   Files that call each other through one header are a circle that rule 2 cannot see:
   the header stands for all of them (issue 35: the session loader's session_internal.h,
   whose five files shared one struct). cli/commands.h (one cmd_* per command file) and
   report/report.h (writers over one output) keep the rule.

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
    # The report writers, the wall view and the pipeline that drives them: above the loader.
    "report": {"common", "sampler-kernel", "hv-glue", "maps", "postproc"},
    # The fleet store in ClickHouse: rows from profiles, profiles from queries.
    "fleet": {"common", "sampler-kernel", "hv-glue", "maps", "postproc"},
    "daemon": {"common", "sampler-kernel", "hv-glue", "maps", "recorder", "postproc", "report", "fleet"},
    "cli": {"common", "sampler-kernel", "hv-glue", "maps", "hotspot", "recorder", "postproc", "report", "daemon", "fleet"},
}
EXEMPT = {"tests", "bench", "fuzz", "build", "packaging", "docs", "scripts", "cmake"}
# Headers known to break rule 3, each with the work that removes it; reported, not
# failed. One that keeps the rule is reported too, to be taken off this list.
KNOWN_SHARED = {}
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


COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"', re.S)
HEAD = re.compile(r'^([A-Za-z_][\w \t\*]*?)\b([A-Za-z_]\w*)\s*\(', re.M)
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "defined"}


def bare(text):
    """The text without comments and string literals (lines kept), nor preprocessor lines."""
    text = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n") if m.group(0)[0] == "/" else '""', text)
    return re.sub(r'^\s*#[^\n]*(?:\\\n[^\n]*)*', "", text, flags=re.M)


def after_parens(text, i):
    """The index after the parenthesis that closes the one at text[i], or -1."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j + 1
    return -1


def functions(text):
    """(name, is_definition, is_static) of each function declared or defined at file scope
    (a line that starts with its type)."""
    out = []
    for m in HEAD.finditer(text):
        name = m.group(2)
        if name in KEYWORDS or "=" in m.group(1):
            continue
        end = after_parens(text, m.end() - 1)
        if end < 0:
            continue
        rest = text[end:end + 200].lstrip()
        while rest.startswith("__attribute__"):
            close = after_parens(rest, rest.index("("))
            rest = rest[close:].lstrip() if close > 0 else ""
        if rest.startswith("{"):
            out.append((name, True, "static" in m.group(1).split()))
        elif rest.startswith(";"):
            out.append((name, False, "static" in m.group(1).split()))
    return out


def find_circle(nodes, calls):
    """A circle [a, b, ..., a] in the graph calls ({a: {b: name}}), or None."""
    state = {}

    def visit(a, path):
        state[a] = 1
        for b in sorted(calls.get(a, ())):
            if state.get(b) == 1:
                return path[path.index(b):] + [b]
            if not state.get(b):
                c = visit(b, path + [b])
                if c:
                    return c
        state[a] = 2
        return None

    for a in nodes:
        if not state.get(a):
            c = visit(a, [a])
            if c:
                return c
    return None


def shared_headers(texts):
    """Rule 3 over texts ({path: bare text}): (header, message) for each header that
    declares functions of several .c files that call each other through it."""
    defined = {}
    for rel, text in texts.items():
        if rel.endswith(".c"):
            for name, is_def, static in functions(text):
                if is_def and not static:
                    defined.setdefault(name, set()).add(rel)
    found = []
    for h, text in sorted(texts.items()):
        if not h.endswith(".h"):
            continue
        owner = {}
        for name, is_def, static in functions(text):
            if not is_def and not static and len(defined.get(name, ())) == 1:
                owner[name] = next(iter(defined[name]))
        files = sorted(set(owner.values()))
        if len(files) < 2:
            continue
        calls = {}
        for a in files:
            for name, b in sorted(owner.items()):
                if b != a and re.search(r'\b' + name + r'\b', texts[a]):
                    calls.setdefault(a, {}).setdefault(b, name)
        circle = find_circle(files, calls)
        if circle:
            ties = [f"{a} -> {b} ({calls[a][b]})" for a, b in zip(circle, circle[1:])]
            found.append((h, f"{h}: declares functions of {len(files)} files, and through it they call each "
                             f"other in a circle: {'; '.join(ties)}: give each file its own header for what "
                             f"the others may call (an opaque type with its own functions), so that each "
                             f"calls only below itself"))
    return found


def main():
    bad = []
    edges = {}
    texts = {}
    for top, rel in sources():
        with open(os.path.join(ROOT, rel), errors="replace") as fh:
            text = fh.read()
        texts[rel] = bare(text)
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
    known = []
    shared = shared_headers(texts)
    for h, msg in shared:
        (known if h in KNOWN_SHARED else bad).append(msg)
    for h in sorted(set(KNOWN_SHARED) - {h for h, _ in shared}):
        bad.append(f"{h} keeps rule 3 now: take it off KNOWN_SHARED in {__file__}")
    for line in known:
        print(f"known exception ({KNOWN_SHARED[line.split(':', 1)[0]]}): {line}")
    for line in bad:
        print(line)
    if bad:
        print(f"check-layering: {len(bad)} violation(s)", file=sys.stderr)
        return 1
    print("check-layering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
