#!/usr/bin/env python3
"""A small JSON Schema (draft-07 subset) validator plus the report checks that
test-report-json.c drives; stdlib only, since the machines have no pip packages.

  validate SCHEMA DOC           exit 0 when DOC validates, 1 with the first error
  diff-zero DOC                 every delta in DOC's "diff" section is 0
  doubled SINGLE DOUBLE         every count in DOUBLE is twice the one in SINGLE
"""
import json
import math
import re
import sys


class Invalid(Exception):
    pass


def is_type(v, t):
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "string":
        return isinstance(v, str)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "null":
        return v is None
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    raise Invalid("schema uses unsupported type %r" % t)


SUPPORTED = {"$schema", "$id", "title", "description", "type", "properties", "required",
             "additionalProperties", "items", "enum", "const", "minimum", "maximum",
             "minLength", "maxItems", "minItems", "$ref", "definitions", "pattern"}


def check(v, s, root, path):
    unknown = set(s) - SUPPORTED
    if unknown:
        raise Invalid("schema keyword(s) %s not supported by this validator" % sorted(unknown))
    if "$ref" in s:
        ref = s["$ref"]
        if not ref.startswith("#/"):
            raise Invalid("only local $ref supported: %s" % ref)
        target = root
        for part in ref[2:].split("/"):
            target = target[part]
        check(v, target, root, path)
    if "type" in s:
        types = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(is_type(v, t) for t in types):
            raise Invalid("%s: %r is not of type %s" % (path, v, s["type"]))
    if "const" in s and not (v == s["const"] and type(v) == type(s["const"])):
        raise Invalid("%s: %r != const %r" % (path, v, s["const"]))
    if "enum" in s and v not in s["enum"]:
        raise Invalid("%s: %r not in %r" % (path, v, s["enum"]))
    if is_type(v, "number"):
        if isinstance(v, float) and not math.isfinite(v):
            raise Invalid("%s: not finite" % path)
        if "minimum" in s and v < s["minimum"]:
            raise Invalid("%s: %r < minimum %r" % (path, v, s["minimum"]))
        if "maximum" in s and v > s["maximum"]:
            raise Invalid("%s: %r > maximum %r" % (path, v, s["maximum"]))
    if isinstance(v, str):
        if "minLength" in s and len(v) < s["minLength"]:
            raise Invalid("%s: shorter than %d" % (path, s["minLength"]))
        if "pattern" in s and not re.search(s["pattern"], v):
            raise Invalid("%s: %r does not match %s" % (path, v, s["pattern"]))
    if isinstance(v, dict):
        for k in s.get("required", []):
            if k not in v:
                raise Invalid("%s: missing required %r" % (path, k))
        props = s.get("properties", {})
        for k, sub in v.items():
            if k in props:
                check(sub, props[k], root, path + "." + k)
            elif "additionalProperties" in s:
                ap = s["additionalProperties"]
                if ap is False:
                    raise Invalid("%s: unexpected property %r" % (path, k))
                if isinstance(ap, dict):
                    check(sub, ap, root, path + "." + k)
    if isinstance(v, list):
        if "maxItems" in s and len(v) > s["maxItems"]:
            raise Invalid("%s: more than %d items" % (path, s["maxItems"]))
        if "minItems" in s and len(v) < s["minItems"]:
            raise Invalid("%s: fewer than %d items" % (path, s["minItems"]))
        if "items" in s:
            for i, item in enumerate(v):
                check(item, s["items"], root, "%s[%d]" % (path, i))


def load(path):
    with open(path, "rb") as f:
        # Strict UTF-8: the writer must have replaced invalid bytes.
        return json.loads(f.read().decode("utf-8"))


def consistency(doc):
    """Cross-field rules a schema cannot say."""
    n = len(doc["events"])
    nf = len(doc["frames"])
    for i, f in enumerate(doc["frames"]):
        if f["id"] != i:
            raise Invalid("frames[%d].id is %d" % (i, f["id"]))
    for i, s in enumerate(doc["stacks"]):
        if len(s["samples"]) != n or len(s["weight"]) != n:
            raise Invalid("stacks[%d]: %d events expected" % (i, n))
        for fid in s["frames"]:
            if fid >= nf:
                raise Invalid("stacks[%d]: frame id %d out of range" % (i, fid))
    for e, ev in enumerate(doc["events"]):
        t = doc["totals"][ev["name"]]
        if sum(s["samples"][e] for s in doc["stacks"]) != t["samples"]:
            raise Invalid("totals[%s].samples disagrees with the stacks" % ev["name"])
        if sum(s["weight"][e] for s in doc["stacks"]) != t["weight"]:
            raise Invalid("totals[%s].weight disagrees with the stacks" % ev["name"])
        if sum(l["samples"][e] for l in doc["layers"]) != t["samples"]:
            raise Invalid("layers do not sum to totals[%s]" % ev["name"])


def main(argv):
    try:
        if argv[1] == "validate":
            with open(argv[2]) as f:
                schema = json.load(f)
            doc = load(argv[3])
            check(doc, schema, schema, "$")
            consistency(doc)
        elif argv[1] == "diff-zero":
            doc = load(argv[2])
            d = doc.get("diff")
            if not d or not d["frames"]:
                raise Invalid("no diff section")
            for f in d["frames"]:
                if f["delta_self_pct"] != 0 or f["delta_total_pct"] != 0:
                    raise Invalid("non-zero delta for %s" % f["name"])
                if f["self"] != f["base_self"] or f["total"] != f["base_total"]:
                    raise Invalid("counts differ for %s" % f["name"])
        elif argv[1] == "doubled":
            a, b = load(argv[2]), load(argv[3])
            def key(doc, s):
                fr = doc["frames"]
                return (tuple((fr[i]["name"], fr[i]["layer"], fr[i]["image"]) for i in s["frames"]),
                        s["pid"], s["tid"], s["comm"])
            ma = {key(a, s): s for s in a["stacks"]}
            mb = {key(b, s): s for s in b["stacks"]}
            if set(ma) != set(mb):
                raise Invalid("the merged profile has other stacks")
            for k, s in ma.items():
                t = mb[k]
                if [2 * x for x in s["samples"]] != t["samples"] or [2 * x for x in s["weight"]] != t["weight"]:
                    raise Invalid("stack %r not doubled" % (k,))
            for name, t in a["totals"].items():
                if b["totals"][name]["samples"] != 2 * t["samples"]:
                    raise Invalid("total %s not doubled" % name)
            for x, y in zip(a["top"], b["top"]):
                if (x["name"], 2 * x["self"], x["self_pct"]) != (y["name"], y["self"], y["self_pct"]):
                    raise Invalid("top row %s differs" % x["name"])
        else:
            raise Invalid("unknown command %s" % argv[1])
    except (Invalid, KeyError, ValueError, IndexError, TypeError) as e:
        print("INVALID: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
