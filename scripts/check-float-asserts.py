#!/usr/bin/env python3
"""Flags floating-point arguments to the integer asserts of tests/test.h.

ASSERT_EQ/NE/GT/GE/LT/LE/UEQ convert both sides to a 64-bit integer, so
ASSERT_GT(share, 0.8) compares 0 with 0 for any share below 1.0 and cannot fail the
way its author meant. test.h refuses such calls at compile time (_Generic); this check
says the same from the text, so that it also covers files the current build does not
compile (tests behind an option, a JDK or a tool that is missing here), and it runs in
the unit lane. It reports a call when an argument holds a floating literal, a cast to
double or float, or a name the same file declares as double or float (a variable, or
a function returning one). Names are per file, not per scope: a false alarm is fixed
by renaming, a missed float by nothing.

usage: check-float-asserts.py [FILE.c ...]   (default: tests/*.c next to this script)
exit 0 when clean, 1 with one line per call otherwise."""
import glob
import os
import re
import sys

INT_ASSERTS = re.compile(r"\bASSERT_(EQ|NE|GT|GE|LT|LE|UEQ)\s*\(")
FLOAT_LITERAL = re.compile(r"(?<![\w.])(\d+\.\d*|\.\d+|\d+[eE][-+]?\d+)([eE][-+]?\d+)?[fFlL]?(?![\w.])")
FLOAT_CAST = re.compile(r"\(\s*(double|float|long\s+double)\s*\)")
DECL = re.compile(r"\b(?:double|float)\b\s*\**\s*([^;{}()=]*?(?:=[^;,]*)?(?:,[^;{}]*)*);")
# An argument that is wholly converted to an integer says its author meant integers.
INT_CAST = re.compile(r"^\s*\(\s*(?:(?:unsigned|signed|long|short|int|char)\s*)+\)|^\s*\(\s*(?:size_t|ssize_t|u?int\d+_t)\s*\)")
FUNC = re.compile(r"\b(?:double|float)\s+\**\s*(\w+)\s*\(")


def strip_comments_and_strings(text):
    """Blanks comments, string and char literals (keeping line breaks and length)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n - 1) - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def float_names(text):
    names = set(FUNC.findall(text))
    for m in re.finditer(r"\b(?:double|float)\b([^;(){}]*);", text):
        for part in m.group(1).split(","):
            name = re.match(r"\s*\**\s*(\w+)", part)
            if name:
                names.add(name.group(1))
    return names


def call_args(text, start):
    """The top-level arguments of the call whose '(' is at start, and its end."""
    depth, args, cur, i = 0, [], [], start
    while i < len(text):
        c = text[i]
        if c in "([{":
            depth += 1
            if depth > 1:
                cur.append(c)
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append("".join(cur))
                return args, i
            cur.append(c)
        elif c == "," and depth == 1:
            args.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    return args, i


def check(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = strip_comments_and_strings(f.read())
    names = float_names(text)
    found = []
    for m in INT_ASSERTS.finditer(text):
        args, _ = call_args(text, m.end() - 1)
        for a in args:
            why = None
            if INT_CAST.match(a) and a.strip().endswith(")"):
                continue
            if FLOAT_LITERAL.search(a):
                why = "a floating literal"
            elif FLOAT_CAST.search(a):
                why = "a cast to a floating type"
            else:
                hit = [w for w in re.findall(r"\b[A-Za-z_]\w*\b", a) if w in names]
                if hit:
                    why = "'%s', declared double or float in this file" % hit[0]
            if why:
                line = text.count("\n", 0, m.start()) + 1
                found.append("%s:%d: ASSERT_%s(%s) has %s; use ASSERT_%s_F or ASSERT_NEAR, which keep doubles"
                             % (path, line, m.group(1), ",".join(x.strip() for x in args), why,
                                m.group(1) if m.group(1) in ("GT", "GE", "LT", "LE") else "GT/GE/LT/LE"))
                break
    return found


def main(argv):
    files = argv[1:] or sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "tests", "*.c")))
    if not files:
        print("check-float-asserts: no test sources found", file=sys.stderr)
        return 2
    bad = [line for f in files for line in check(f)]
    for line in bad:
        print(line)
    print("check-float-asserts: %d file(s), %d integer assert(s) with floating arguments" % (len(files), len(bad)),
          file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
