#!/usr/bin/env bash
# Regenerates the README's example output from a real run, so that it stays true: runs
# scripts/demo.sh (which records the bundled Java workload), then puts the report and its
# hottest folded stack between the README's example markers. Run as root, from anywhere:
#   bash scripts/readme-example.sh
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${1:-}" = "--reuse" ] && [ -d build/demo/session ] || bash scripts/demo.sh >/dev/null
report=$(build/cli/viprof report build/demo/session --layers --top 12 2>&1)
hottest=$(build/cli/viprof report build/demo/session --format folded 2>/dev/null |
	awk '{ n = $NF + 0; if (n > best) { best = n; line = $0 } } END { print line }')
# The example must be what a reader gets: no stale warning (a session reported after its
# files were rebuilt says "file changed since recording") and no path of this machine.
if grep -q '^# warning: .*file changed since recording' <<<"$report"; then
	echo "readme-example.sh: the session's files changed since it was recorded; run without --reuse" >&2
	exit 1
fi
if grep -qF "$PWD" <<<"$report$hottest"; then
	echo "readme-example.sh: the report names a path of this checkout ($PWD); not an example to publish" >&2
	exit 1
fi
python3 - "$report" "$hottest" <<'PY'
import re, sys
report, hottest = sys.argv[1], sys.argv[2]
p = "README.md"
s = open(p).read()
def put(s, name, text):
    pat = re.compile(r"(<!-- %s -->\n```\n).*?(\n```\n<!-- /%s -->)" % (name, name), re.S)
    if not pat.search(s):
        sys.exit("README.md has no <!-- %s --> block" % name)
    return pat.sub(lambda m: m.group(1) + text + m.group(2), s)
s = put(s, "example-report", report)
s = put(s, "example-folded", hottest)
open(p, "w").write(s)
PY
echo "README.md: example output regenerated from build/demo/session"
