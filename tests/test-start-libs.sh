#!/usr/bin/env bash
# What every viprof command loads before main: not libcurl, which only the push and
# fleet clients use (fleet/curl_lazy.c loads it at their first call). Linked, it and the
# 30 libraries it needs cost each start 5-6 ms of CPU (perf stat of viprof --version:
# 7.55 ms linked, 1.48 ms without). That libcurl still works once loaded is the push and
# fleet tests' part (test-push, test-serve-http-push-*, test-fleet-*).
# Usage: test-start-libs.sh VIPROF   (exits 77 to skip)
set -u
vp=$1
command -v readelf >/dev/null || { echo "SKIP: no readelf (binutils) here"; exit 77; }
needed=$(readelf -d "$vp" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p')
echo "viprof needs: $(echo $needed)"
if grep -q '^libcurl' <<<"$needed"; then
	echo "FAIL: viprof is linked with libcurl: every start loads it and its libraries"; exit 1
fi
# The dynamic loader's own account of what it loaded for a plain command.
loaded=$(LD_DEBUG=files "$vp" --version 2>&1 >/dev/null | grep -c 'calling init:')
echo "viprof --version: $loaded libraries initialised"
if LD_DEBUG=files "$vp" --version 2>&1 >/dev/null | grep -q 'calling init:.*libcurl'; then
	echo "FAIL: viprof --version loaded libcurl"; exit 1
fi
echo "PASS"
