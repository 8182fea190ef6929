#!/bin/bash
# viprof serve --socket, one scenario per ctest entry (tests/serve.cmake), run as root
# with real users made here by useradd and removed at the end. Exit 77: cannot run here.
#   usage: test-serve-socket.sh SCENARIO VIPROF SPLIT3
#   split       an unprivileged user records '-g -- split3' through the service: the
#               50/30/20 split within 3 pp, the session owned by that user, an audit line
#   refuse      the same user asking for another user's process (-p PID): one line, refused
#   two-users   two users, different events, at the same time: each their own split and event
#   kill        the service killed (SIGKILL) mid-recording: the session reads to its last chunk
#   client      a client killed mid-request: the service ends and frees its recording
#   flood       one user floods the socket: refused by the limit, another user still served
set -u
scenario=$1 viprof=$2 split3=$3
. "$(dirname "$0")/serve-lib.sh"
serve_lib_init serve-sock "$viprof" "$split3"

# check_split SESSION [EVENT]: work50/30/20 among themselves within 3 pp of 50/30/20.
check_split() {
	local out
	out=$("$viprof" report "$1" --top 10 ${2:+--event "$2"}) || fail "report $1"
	echo "$out" | awk -v want="50 30 20" '
		$NF == "split3" && $(NF-1) ~ /^work(50|30|20)$/ { s[$(NF-1)] = $3 }
		END {
			t = s["work50"] + s["work30"] + s["work20"]
			if (t < 500) { print "too few samples in work50/30/20: " t; exit 1 }
			split(want, w, " "); n[1] = "work50"; n[2] = "work30"; n[3] = "work20"
			for (i = 1; i <= 3; i++) {
				p = 100 * s[n[i]] / t
				printf "%s %.1f%% (want %d)\n", n[i], p, w[i]
				if (p < w[i] - 3 || p > w[i] + 3) bad = 1
			}
			exit bad
		}' || fail "split of $1 off by more than 3 pp"
}

case $scenario in
split)
	mkuser a; u=$REPLY
	start_service
	as "$u" "'$viprof' record -g -o '$work/a/s1' -- '$split3' 3" 2>"$work/a.err" || { cat "$work/a.err"; fail "record"; }
	cat "$work/a.err"
	grep -q "session $work/a/s1" "$work/a.err" || fail "no summary line"
	[ "$(stat -c %U "$work/a/s1")" = "$u" ] || fail "session not owned by $u"
	for f in "$work/a/s1"/*; do [ "$(stat -c %U "$f")" = "$u" ] || fail "$f not owned by $u"; done
	grep -q "backend.*bpf\|\"backend\": \"bpf\"" "$work/a/s1/meta.json" || fail "not recorded by the service's bpf backend"
	check_split "$work/a/s1"
	grep -q "audit uid=$(id -u "$u") .*record target=launch.* -> ok" "$work/serve.log" || fail "no audit line"
	;;
refuse)
	mkuser a; u=$REPLY
	mkuser b; v=$REPLY
	start_service
	su "$v" -s /bin/sh -c "exec sleep 30" &
	other=$!
	for _ in $(seq 100); do victim=$(pgrep -u "$v" -x sleep | head -1); [ -n "$victim" ] && break; sleep 0.05; done
	[ -n "$victim" ] || fail "no process of $v"
	if as "$u" "'$viprof' record -p $victim -d 2 -o '$work/a/s2'" 2>"$work/a.err"; then fail "recording another user's process was allowed"; fi
	cat "$work/a.err"
	[ "$(wc -l <"$work/a.err")" = 1 ] || fail "the refusal is not one line"
	grep -q "process $victim belongs to uid $(id -u "$v")" "$work/a.err" || fail "the refusal does not say why"
	[ ! -e "$work/a/s2/stream.vps" ] || fail "a session was written"
	grep -q "audit uid=$(id -u "$u") .*pids:$victim.* -> refused" "$work/serve.log" || fail "no audit line"
	# -a is root's only.
	if as "$u" "'$viprof' record -a -d 1 -o '$work/a/s3'" 2>"$work/a.err"; then fail "-a was allowed to a user"; fi
	grep -q "only root" "$work/a.err" || fail "the -a refusal does not say why"
	# A rate over the limit, with -F or in the event's own term, is refused by name.
	if as "$u" "'$viprof' record -F 20000 -o '$work/a/s4' -- true" 2>"$work/a.err"; then fail "-F 20000 was allowed"; fi
	grep -q "over this service's limit of 4000 Hz" "$work/a.err" || { cat "$work/a.err"; fail "the -F refusal does not say why"; }
	if as "$u" "'$viprof' record -e cpu-clock/freq=50000/ -o '$work/a/s5' -- true" 2>"$work/a.err"; then fail "freq=50000 was allowed"; fi
	grep -q "over this service's limit" "$work/a.err" || { cat "$work/a.err"; fail "the freq= refusal does not say why"; }
	[ ! -e "$work/a/s4" ] && [ ! -e "$work/a/s5" ] || fail "a refused request left a directory"
	kill $other
	;;
two-users)
	mkuser a; u=$REPLY
	mkuser b; v=$REPLY
	start_service
	as "$u" "'$viprof' record -e cpu-clock -g -o '$work/a/s' -- '$split3' 4" 2>"$work/a.err" &
	p1=$!
	as "$v" "'$viprof' record -e task-clock -g -o '$work/b/s' -- '$split3' 4" 2>"$work/b.err" &
	p2=$!
	wait $p1 || { cat "$work/a.err"; fail "user a's recording"; }
	wait $p2 || { cat "$work/b.err"; fail "user b's recording"; }
	grep -q '"events": \["cpu-clock' "$work/a/s/meta.json" || fail "user a's session lacks its cpu-clock column"
	grep -q '"events": \["task-clock' "$work/b/s/meta.json" || fail "user b's session lacks its task-clock column"
	grep '"events":' "$work/a/s/meta.json" | grep -q task-clock && fail "user a sees user b's event"
	check_split "$work/a/s" cpu-clock
	check_split "$work/b/s" task-clock
	# Each sees only their own processes: every stack is split3's (or its launcher's),
	# and no pid of one user's session appears in the other's.
	"$viprof" report "$work/a/s" --format json >"$work/a.json" || fail "json of a"
	"$viprof" report "$work/b/s" --format json >"$work/b.json" || fail "json of b"
	python3 - "$work/a.json" "$work/b.json" <<'PY' || fail "a user's session holds other processes"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
pa = {s["pid"] for s in a["stacks"]}
pb = {s["pid"] for s in b["stacks"]}
comms = {s["comm"] for s in a["stacks"]} | {s["comm"] for s in b["stacks"]}
print("pids a:", sorted(pa), "b:", sorted(pb), "comms:", sorted(comms))
sys.exit(1 if pa & pb or comms - {"split3", "viprof"} else 0)
PY
	;;
kill)
	mkuser a; u=$REPLY
	start_service
	as "$u" "'$viprof' record -g -o '$work/a/s' -- '$split3' 6" 2>"$work/a.err" &
	client=$!
	# The service dies once the session holds the workload's samples (a session is
	# readable while it is written).
	for _ in $(seq 100); do
		"$viprof" report "$work/a/s" --top 5 2>/dev/null | grep -q work50 && break
		sleep 0.1
	done
	"$viprof" report "$work/a/s" --top 5 2>/dev/null | grep -q work50 || fail "no samples of the workload after 10 s"
	kill -KILL "$serve_pid"
	wait "$serve_pid" 2>/dev/null
	serve_pid=
	wait $client
	cat "$work/a.err"
	grep -q "closed the connection" "$work/a.err" || fail "the client did not say the service went away"
	[ "$(stat -c %U "$work/a/s/stream.vps")" = "$u" ] || fail "stream not owned by the user"
	out=$("$viprof" report "$work/a/s" --top 5 2>&1) || { echo "$out"; fail "the session is not readable"; }
	echo "$out" | head -12
	echo "$out" | grep -q work50 || fail "the session lost its samples"
	;;
client)
	mkuser a; u=$REPLY
	start_service --max-sessions 1
	as "$u" "exec '$viprof' record -o '$work/a/s' -- '$split3' 30" 2>"$work/a.err" &
	# The client is killed once it has stored some of the samples the service sent it
	# (killed before that, its session holds nothing to read).
	cpid=
	for _ in $(seq 100); do
		[ "$(stat -c %s "$work/a/s/stream.vps" 2>/dev/null || echo 0)" -gt 4096 ] &&
			cpid=$(pgrep -u "$u" -x viprof | head -1) && [ -n "$cpid" ] && break
		sleep 0.1
	done
	[ -n "$cpid" ] || fail "no client"
	kill -KILL "$cpid"
	for _ in $(seq 50); do grep -q "client gone" "$work/serve.log" && break; sleep 0.1; done
	grep -q "audit uid=$(id -u "$u") .* -> client gone" "$work/serve.log" || fail "the service did not end the recording"
	pkill -KILL -u "$u" split3
	# Its slot is free: with --max-sessions 1 a new recording is accepted.
	as "$u" "'$viprof' record -o '$work/a/s2' -- '$split3' 1" 2>"$work/a2.err" || { cat "$work/a2.err"; fail "the slot was not freed"; }
	"$viprof" report "$work/a/s" --top 3 >/dev/null || fail "the abandoned session is not readable"
	;;
flood)
	mkuser a; u=$REPLY
	mkuser b; v=$REPLY
	start_service --max-requests 10
	# 40 requests at once from a; 10 pass the bucket, 2 at a time record, the rest are refused.
	as "$u" "for i in \$(seq 40); do '$viprof' record -q -d 1 -o $work/a/f\$i -- sleep 2 2>>$work/a/flood.err & done; wait" || true
	refused=$(grep -c "requests in the last minute\|connections open\|recordings running" "$work/a/flood.err")
	echo "a: $refused of 40 refused"
	[ "$refused" -ge 25 ] || fail "the flood was not limited ($refused refused)"
	grep -q "limit per user" "$work/a/flood.err" || fail "the refusal does not name the limit"
	# b is served at once.
	t0=$(date +%s%N)
	as "$v" "'$viprof' record -o '$work/b/s' -- '$split3' 2" 2>"$work/b.err" || { cat "$work/b.err"; fail "b was starved"; }
	t=$(( ($(date +%s%N) - t0) / 1000000 ))
	echo "b recorded in $t ms"
	[ "$t" -lt 10000 ] || fail "b waited $t ms"
	check_split "$work/b/s"
	;;
*)
	echo "unknown scenario $scenario"; exit 2 ;;
esac
echo "PASS: $scenario"
