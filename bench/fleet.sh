#!/usr/bin/env bash
# The fleet store (docs/fleet.md) at scale: ingest rate, bytes per sample stored, and a
# fleet-wide top-methods query from ClickHouse next to `viprof report` of the same samples
# from one local session.
#
# Samples: a real recording (split3, -g) scaled by bench/gen-session to MIN_SAMPLES
# (each sample written COPIES times at its own time: the same stacks, so the store's
# per-second rows group them as they would group a busy VM's). It is stored HOSTS times
# (hosts vm-0.., in parallel, `viprof fleet push`: the same load + encode + INSERT path
# as `serve --push clickhouse=`) into a two-shard cluster of private clickhouse-servers
# (tests/fleet-lib.sh).
#   ingest       samples stored / wall time of the pushes (viprof's load and encode
#                included), and per CPU of the two servers (their user+sys during it)
#   bytes        compressed bytes of the store's parts / samples (and / rows)
#   query        `viprof report clickhouse:// --where host=vm-0 -n 20` (one host: the same
#                samples as the local session) and fleet-wide (all hosts), against
#                `viprof report SESSION -n 20`; ratio = store / local
# Ends with "TARGET name measured=X target=Y met=yes|no" lines (issue 36's targets:
# 1M samples/s per ClickHouse core, the fleet query within 2x the local report).
# Usage: bench/fleet.sh [BUILD_DIR] [ROUNDS]   (root; needs clickhouse-server)
#   MIN_SAMPLES  samples of the scaled session (default 10000000)
#   HOSTS        hosts storing it (default 2)
set -euo pipefail
B=$(realpath "${1:-build}")
ROUNDS=${2:-3}
MIN_SAMPLES=${MIN_SAMPLES:-10000000}
HOSTS=${HOSTS:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VP=$B/cli/viprof GEN=$B/bench/gen-session SPLIT3=$B/bench/split3
[ -x "$VP" ] && [ -x "$GEN" ] && [ -x "$SPLIT3" ] || { echo "fleet: build first ($VP, $GEN, $SPLIT3)" >&2; exit 1; }
set +u
. "$ROOT/tests/fleet-lib.sh"
set -u
ch_need
T=$(mktemp -d /tmp/vp-fleet-bench.XXXXXX)
trap 'set +e; ch_cleanup; rm -rf "$T"' EXIT

median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
now() { date +%s.%N; }
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }   # user+sys ticks

echo "== recording: split3 3 s at -F 999 -g"
"$VP" record -q -g -F 999 -o "$T/rec" -- "$SPLIT3" 3 >/dev/null 2>"$T/rec.err" || { cat "$T/rec.err"; exit 1; }
base=$("$VP" report "$T/rec" -F folded | awk '{s += $NF} END {print s}')
COPIES=$(( (MIN_SAMPLES + base - 1) / base ))
"$GEN" "$T/rec" "$T/big" "$COPIES" >/dev/null
for f in "$T"/rec/*; do [ "$(basename "$f")" = stream.vps ] || cp -r "$f" "$T/big/"; done
N=$("$VP" report "$T/big" -F folded | awk '{s += $NF} END {print s}')
echo "   $base samples recorded, x$COPIES = $N samples in the scaled session"

ch_start 2 || exit 1
for db in vpenc vpbench; do
	for i in 0 1; do "$VP" fleet init "clickhouse://127.0.0.1:${ch_http[$i]}/$db" --cluster "$ch_cluster" >/dev/null; done
done
S="clickhouse://127.0.0.1:${ch_http[0]}/vpbench"
ch_cpu() { echo $(( $(cpu_of "${ch_pid[0]}") + $(cpu_of "${ch_pid[1]}") )); }
hz=$(getconf CLK_TCK)

echo "== viprof's side: fleet push of the scaled session ($N samples; load, encode, INSERT)"
t0=$(now)
"$VP" fleet push "clickhouse://127.0.0.1:${ch_http[0]}/vpenc" "$T/big" --host vm-0 --service bench >/dev/null
t1=$(now)
printf "   %.2f s: %.0f samples/s (gen-session's copies share their second: %s rows)\n" "$(echo "$t1 - $t0" | bc -l)" \
	"$(echo "$N / ($t1 - $t0)" | bc -l)" "$(ch_query 0 "SELECT count() FROM vpenc.viprof_samples")"

# ClickHouse's side, with the row density of a real recording: the recording's rows
# (per second, stack, thread and event) stored once, then copied as COPIES intervals
# of its length, one after another, over HOSTS hosts, and inserted by one client per
# host over HTTP (TabSeparated), as the pushes would send them.
"$VP" fleet push "clickhouse://127.0.0.1:${ch_http[0]}/vpenc" "$T/rec" --host seed --service bench >/dev/null
cols="toUInt32(ts), host, service, interval_id, pid, tid, thread, container, event, unit, event_idx, layer, offcpu, gc_epoch, stack_hash, samples, weight"
ch_query 0 "SELECT $cols FROM vpenc.viprof_samples WHERE host = 'seed' FORMAT TabSeparated" >"$T/seed.tsv"
ch_query 0 "INSERT INTO vpbench.viprof_stacks SELECT * FROM vpenc.viprof_stacks" >/dev/null
R=$(wc -l <"$T/seed.tsv")
span=$(awk -F'\t' 'NR == 1 {lo = hi = $1} {if ($1 < lo) lo = $1; if ($1 > hi) hi = $1} END {print hi - lo + 1}' "$T/seed.tsv")
for ((h = 0; h < HOSTS; h++)); do
	awk -F'\t' -v OFS='\t' -v h="$h" -v hosts="$HOSTS" -v copies="$COPIES" -v span="$span" '
		{ row[NR] = $0 }
		END { for (k = h; k < copies; k += hosts) for (i = 1; i <= NR; i++) {
			split(row[i], f, "\t"); f[1] += k * span; f[2] = "vm-" h; f[4] = "iv" k
			line = f[1]; for (j = 2; j <= 17; j++) line = line OFS f[j]; print line } }' "$T/seed.tsv" >"$T/host$h.tsv"
done
echo "== ClickHouse's side: $COPIES intervals of $R rows ($base samples, ${span} s) over $HOSTS hosts"
c0=$(ch_cpu)
t0=$(now)
pids=()
for ((h = 0; h < HOSTS; h++)); do
	curl -sS --fail-with-body "http://127.0.0.1:${ch_http[$((h % 2))]}/?insert_distributed_sync=1&query=INSERT%20INTO%20vpbench.viprof_samples%20FORMAT%20TabSeparated" \
		--data-binary @"$T/host$h.tsv" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
t1=$(now)
c1=$(ch_cpu)
wall=$(echo "$t1 - $t0" | bc -l)
chcpu=$(echo "($c1 - $c0) / $hz" | bc -l)
stored=$(ch_query 0 "SELECT sum(samples) FROM vpbench.viprof_samples WHERE event = 'cpu-clock'")
rows=$(ch_query 0 "SELECT count() FROM vpbench.viprof_samples")
for i in 0 1; do ch_query "$i" "OPTIMIZE TABLE vpbench.viprof_samples_local FINAL" >/dev/null; done
bytes=0
for i in 0 1; do
	b=$(ch_query "$i" "SELECT sum(data_compressed_bytes) FROM system.parts WHERE database = 'vpbench' AND active")
	bytes=$((bytes + b))
done
percore=$(echo "if ($chcpu > 0) $stored / $chcpu else 0" | bc -l)
printf "   %d samples (%d rows) in %.2f s: %.0f samples/s; ClickHouse CPU %.2f s: %.0f samples/s per core\n" \
	"$stored" "$rows" "$wall" "$(echo "$stored / $wall" | bc -l)" "$chcpu" "$percore"
printf "   stored: %d bytes compressed: %.3f bytes/sample, %.1f bytes/row\n" "$bytes" \
	"$(echo "$bytes / $stored" | bc -l)" "$(echo "$bytes / $rows" | bc -l)"

echo "== query: top methods, $ROUNDS rounds (median)"
tl=() th=() tf=()
for ((r = 0; r < ROUNDS; r++)); do
	a=$(now); "$VP" report "$T/big" -n 20 >"$T/local.txt"; b=$(now); tl+=("$(echo "$b - $a" | bc -l)")
	a=$(now); "$VP" report "$S" --where host=vm-0 -n 20 >"$T/host.txt"; b=$(now); th+=("$(echo "$b - $a" | bc -l)")
	a=$(now); "$VP" report "$S" -n 20 >"$T/fleet.txt"; b=$(now); tf+=("$(echo "$b - $a" | bc -l)")
done
ml=$(printf "%s\n" "${tl[@]}" | median) mh=$(printf "%s\n" "${th[@]}" | median) mf=$(printf "%s\n" "${tf[@]}" | median)
hs=$(ch_query 0 "SELECT sum(samples) FROM vpbench.viprof_samples WHERE event = 'cpu-clock' AND host = 'vm-0'")
printf "   viprof report SESSION (%d samples)                     %.3f s\n" "$N" "$ml"
printf "   viprof report clickhouse:// --where host=vm-0 (%d)  %.3f s  ratio %.2f\n" "$hs" "$mh" "$(echo "$mh / $ml" | bc -l)"
printf "   viprof report clickhouse:// (%d hosts, %d)          %.3f s  ratio %.2f\n" "$HOSTS" "$stored" "$mf" "$(echo "$mf / $ml" | bc -l)"
# The same top methods: the fleet's report against the session's (shares as printed).
if python3 "$ROOT/tests/test-fleet-compare.py" text "$T/fleet.txt" "$T/local.txt" >"$T/cmp" 2>&1; then
	echo "   top methods: the same as the local session's ($(tail -1 "$T/cmp"))"
else
	echo "   top methods DIFFER:"; cat "$T/cmp"
fi
# The fleet query against the local report of as many samples: the session holds N,
# the fleet HOSTS times N/HOSTS... (both ~N; the ratio is per sample).
ratio=$(echo "($mf / $stored) / ($ml / $N)" | bc -l)
met() { if [ "$(echo "$1" | bc -l)" = 1 ]; then echo yes; else echo no; fi; }
printf "TARGET fleet-ingest-samples-per-ch-core measured=%.0f target=1000000 met=%s\n" "$percore" "$(met "$percore >= 1000000")"
printf "TARGET fleet-query-vs-local-ratio measured=%.2f target=2 met=%s\n" "$ratio" "$(met "$ratio <= 2")"
