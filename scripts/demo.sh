#!/usr/bin/env bash
# The main job: install what is missing, build viprof, record the bundled Java workload
# (three methods with a known 50/30/20 split, with allocation so that GCs move code
# between epochs) and print its whole-stack report; also writes an HTML flame graph and
# a pprof profile next to the session. Needs root (or CAP_BPF + CAP_PERFMON).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
out=build/demo
mkdir -p "$out"
"$JAVA_HOME/bin/javac" -d "$out" tests/java/JitSplit.java
build/cli/viprof probe
rm -rf "$out/session" "$out/session.old"
build/cli/viprof record -g -o "$out/session" -- "$JAVA_HOME/bin/java" -cp "$out" JitSplit 10
build/cli/viprof report "$out/session" --layers --top 20
build/cli/viprof report "$out/session" --format html -o "$out/flame.html"
build/cli/viprof report "$out/session" --format pprof -o "$out/profile.pb.gz"
echo "viprof demo: session $out/session, flame graph $out/flame.html, pprof $out/profile.pb.gz"
