#!/usr/bin/env bash
# What the agent's walk of the code heaps at each GC's start costs (issue 32): GC churn
# (tests/java/CodeReuse: a class defined, compiled, dropped and collected per generation,
# two System.gc() each) with the agent alone, its walk at GC start on (the default) and
# off (gcwalk=no), interleaved rounds. Prints per variant the median JVM CPU time and
# total GC pause (-Xlog:gc) with their ranges, and for the walk its count, the median CPU
# per walk (the agent's stats) and the longest walk's wall time.
# Usage: bench/gcwalk-cost.sh [BUILD_DIR] [ROUNDS]   JDK=<a JDK> (default Temurin 25)
#        GENS=24 SECS=0.4 (the workload's generations and seconds per generation)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$ROOT/build}
ROUNDS=${2:-5}
JDK=${JDK:-/usr/lib/jvm/temurin-25-jdk-amd64}
SO=$B/jvm-agent/libviprof-jvmti.so
CP=$B/tests/java/classes
[ -f "$SO" ] || { echo "gcwalk-cost: $SO missing; build first (cmake --build $B --target viprof-jvmti)" >&2; exit 1; }
[ -f "$CP/CodeReuse.class" ] || { echo "gcwalk-cost: $CP/CodeReuse.class missing; build the Java fixtures (cmake --build $B --target java-fixtures)" >&2; exit 1; }
[ -x "$JDK/bin/java" ] || { echo "gcwalk-cost: no JDK at $JDK; set JDK=" >&2; exit 1; }
T=$(mktemp -d /tmp/viprof-gcwalk-XXXXXX)
trap 'rm -rf "$T"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for v in on off; do
    opt=dir=$T/jit-$v-$r,stats
    [ $v = off ] && opt=$opt,gcwalk=no
    /usr/bin/time -f "cpu_s %U %S" -o "$T/time-$v-$r" "$JDK/bin/java" -agentpath:"$SO"=$opt -Xlog:gc:file="$T/gc-$v-$r" \
      -cp "$CP" CodeReuse "${GENS:-24}" "${SECS:-0.4}" > /dev/null 2> "$T/err-$v-$r"
  done
done
python3 - "$T" "$ROUNDS" <<'PY'
import re, statistics as st, sys
t, rounds = sys.argv[1], int(sys.argv[2])
for v in ("on", "off"):
    cpu, pause, walks, wcpu, longest, short = [], [], [], [], [], []
    for r in range(1, rounds + 1):
        u, s = open(f"{t}/time-{v}-{r}").read().split()[1:3]
        cpu.append(float(u) + float(s))
        pause.append(sum(float(m) for m in re.findall(r"Pause.* ([0-9.]+)ms", open(f"{t}/gc-{v}-{r}").read())))
        err = open(f"{t}/err-{v}-{r}").read()
        m = re.search(r"GarbageCollectionStart: code heap walk\s+n=(\d+)\s+cpu_ms=([0-9.]+)", err)
        if m and int(m.group(1)):
            walks.append(int(m.group(1)))
            wcpu.append(float(m.group(2)) * 1000 / int(m.group(1)))
        m = re.search(r"walks at GC start=\d+ longest_us=([0-9.]+) short_lived_loads=(\d+)", err)
        if m:
            longest.append(float(m.group(1)))
            short.append(int(m.group(2)))
    line = (f"gcwalk={v:3}  JVM CPU {st.median(cpu):6.2f} s ({min(cpu):.2f}-{max(cpu):.2f})  GC pauses "
            f"{st.median(pause):7.1f} ms ({min(pause):.0f}-{max(pause):.0f})")
    if walks:
        line += (f"  walks at GC start {st.median(walks):.0f}, CPU per walk {st.median(wcpu):.0f} us (median), "
                 f"longest {max(longest):.0f} us (wall), short-lived code loaded {st.median(short):.0f}")
    print(line)
PY
