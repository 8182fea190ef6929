#!/usr/bin/env python3
"""Checks an OTLP Profiles push body (issue 27) with an independent decoder: Debian's
protoc decodes it with tests/otlp-profiles.proto (written from the published schema),
and this script walks the text it prints. usage: test-push-otlp-check.py BODY PROTO_DIR
PROCESS FUNCTION [HOSTNAME]. Exit 0 when the body holds a cpu/nanoseconds profile with a sample of
PROCESS (attribute process.executable.name) whose stack, leaf first, reaches FUNCTION,
with process.pid, thread.id and thread.name attributes, and host.name on the resource (equal
to HOSTNAME when given)."""
import subprocess
import sys

body, proto_dir, process, function = sys.argv[1:5]
hostname = sys.argv[5] if len(sys.argv) > 5 else None
with open(body, "rb") as f:
    text = subprocess.run(["protoc", "-I", proto_dir, "--decode=opentelemetry.proto.profiles.v1development."
                           "ExportProfilesServiceRequest", "otlp-profiles.proto"], stdin=f, check=True,
                          capture_output=True, text=True).stdout


def parse(lines, i):
    """The protoc text format as a tree: (name, value) pairs, messages as lists."""
    out = []
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line:
            continue
        if line == "}":
            return out, i
        if line.endswith("{"):
            sub, i = parse(lines, i)
            out.append((line[:-1].strip(), sub))
        else:
            k, v = line.split(":", 1)
            v = v.strip()
            out.append((k, eval(v) if v.startswith('"') else int(v) if v.lstrip("-").isdigit() else v))
    return out, i


def get(msg, key):
    return [v for k, v in msg if k == key]


def one(msg, key, default=0):
    v = get(msg, key)
    return v[0] if v else default


tree, _ = parse(text.splitlines(), 0)
d = one(tree, "dictionary", [])
strings = get(d, "string_table")
funcs = [one(f, "name_strindex") for f in get(d, "function_table")]
locs = [[one(l, "function_index") for l in get(loc, "lines")] for loc in get(d, "location_table")]
stacks = [get(s, "location_indices") for s in get(d, "stack_table")]
attrs = []
for a in get(d, "attribute_table"):
    v = one(a, "value", [])
    attrs.append((strings[one(a, "key_strindex")], one(v, "string_value", None) if get(v, "string_value")
                  else one(v, "int_value", None)))
rp = one(tree, "resource_profiles", [])
res = {one(kv, "key", ""): one(one(kv, "value", []), "string_value", "") for kv in get(one(rp, "resource", []), "attributes")}
prof = one(one(rp, "scope_profiles", []), "profiles", [])
st = one(prof, "sample_type", [])
errors = []
if (strings[one(st, "type_strindex")], strings[one(st, "unit_strindex")]) != ("cpu", "nanoseconds"):
    errors.append("sample type is not cpu/nanoseconds")
if not res.get("host.name"):
    errors.append("no host.name on the resource")
elif hostname is not None and res.get("host.name") != hostname:
    errors.append("host.name is not %r" % hostname)
found = 0
seen = set()
total = 0
for s in get(prof, "samples"):
    a = dict(attrs[i] for i in get(s, "attribute_indices"))
    vals = get(s, "values")
    total += 1
    for k in ("process.pid", "thread.id", "thread.name", "process.executable.name"):
        if k not in a:
            errors.append("a sample without " + k)
    seen.add(a.get("process.executable.name"))
    if a.get("process.executable.name") != process:
        continue
    names = [strings[funcs[f]] for li in stacks[one(s, "stack_index")] for f in locs[li]]
    if function in names and vals and vals[0] > 0:
        found += 1
if not found:
    errors.append("no sample of %s reaches %s (processes: %s)" % (process, function, ", ".join(sorted(map(str, seen)))))
print("otlp body: %d samples, %d of %s through %s, %d strings, host.name=%s" %
      (total, found, process, function, len(strings), res.get("host.name")))
if errors:
    print("\n".join(sorted(set(errors))))
    sys.exit(1)
