#!/usr/bin/env bash
# The fleet store (issue 36), live, with ClickHouse servers run by the test from Debian's
# package (tests/fleet-lib.sh): two `viprof serve --continuous` in two network namespaces
# (standing for two VMs, hostnames vm-0 and vm-1 in their own UTS namespaces) push their
# intervals over veth links into a cluster of two shards.
#   roundtrip  3 intervals per host: `report clickhouse://` per host and for both equals
#              `viprof report` of the same interval directories (text, folded, and pprof read
#              by the real pprof): the same top methods, shares within 0.1 pp
#   outage     the shard server vm-1 pushes to is stopped for two intervals, then started:
#              every interval the queue held arrives, none twice (sums equal the disk's)
#   tls        (no namespaces) a push over https with the test's CA and a ClickHouse user's
#              password (basic=FILE) arrives, and `report clickhouses://..?ca=&user=` reads
#              it; a target given another CA is refused in one line and sent nothing; one
#              given a wrong password stores nothing
#   gc         (jvm; no namespaces) a JVM that collects garbage on purpose (CodeReuse), its
#              agent loaded by the service (--jvm-attach PID): its rows carry several GC
#              epochs, each a span of time after the one before, and each interval's
#              samples of it equal the directory's
#   escapes    (no namespaces, no sampling) a stack whose frame names hold a quote, a
#              backslash, a tab and commas, stored as the pusher's TabSeparated writes it:
#              report clickhouse:// gives the names back exactly
#   layers     with --off-cpu, and a second workload in a pid namespace of its own (a container
#              made without a runtime, "pidns-<inode>"): the off-CPU kinds, steal per host and
#              the container's samples (--container, --where container=) equal the disk's
# usage: test-fleet.sh SCENARIO VIPROF SPLIT3 [JAVA CLASSES]
set -u
scenario=$1 viprof=$2 split3=$3 java=${4:-} classes=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/fleet-lib.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces, the sampler)"; exit 77; }
ch_need
command -v ip >/dev/null || { echo "SKIP: ip (iproute2) is missing"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: unshare is missing"; exit 77; }

work=$(mktemp -d /tmp/vp-fleet.XXXXXX)
if [ "$scenario" = escapes ]; then
	trap 'ch_cleanup; rm -rf "$work"' EXIT
	ch_start 1 || { echo "FAIL: ClickHouse did not start"; exit 1; }
	"$viprof" fleet init "clickhouse://127.0.0.1:${ch_http[0]}/vpf" --cluster none >/dev/null || { echo "FAIL: fleet init"; exit 1; }
	# Names as fleet/encode.c writes them: \\ \' \t escaped inside the quoted elements.
	printf '%s\t%s\t%s\t%s\t%s\n' 42 "['main','it\\'s','C:\\\\dir','a\\tb','f(int, long)']" \
		"['/bin/x','/bin/x','/bin/x','/bin/x','/bin/x']" "[2,2,2,2,2]" "[0,0,0,0,0]" >"$work/stacks.tsv"
	printf '1795900000\tvm-0\tsvc\tiv\t1\t1\tt\\tx\t\tcpu-clock\tnanoseconds\t0\t2\t\t0\t42\t7\t7000\n' >"$work/samples.tsv"
	for t in stacks samples; do
		curl -sS --fail-with-body "http://127.0.0.1:${ch_http[0]}/?query=INSERT%20INTO%20vpf.viprof_$t%20FORMAT%20TabSeparated" \
			--data-binary @"$work/$t.tsv" || { echo "FAIL: insert into $t"; exit 1; }
	done
	got=$("$viprof" report "clickhouse://127.0.0.1:${ch_http[0]}/vpf" -F folded --threads)
	want=$(printf "t\tx;main;it's;C:\\\\dir;a\tb;f(int, long) 7")
	[ "$got" = "$want" ] || { echo "FAIL: folded from the store:"; printf '%s\n' "$got" | od -c | head; echo "expected:"; printf '%s\n' "$want" | od -c | head; exit 1; }
	echo "ok: $got"
	echo PASS
	exit 0
fi
if [ "$scenario" = gc ]; then
	[ -x "$java" ] && [ -f "$classes/CodeReuse.class" ] || { echo "SKIP: no JDK or test classes ($java, $classes)"; exit 77; }
	jpid= serve_gc=
	trap 'kill -KILL $serve_gc $jpid 2>/dev/null; ch_cleanup; rm -rf "$work"' EXIT
	ch_start 1 || { echo "FAIL: ClickHouse did not start"; exit 1; }
	"$viprof" fleet init "clickhouse://127.0.0.1:${ch_http[0]}/vpf" --cluster none >/dev/null || { echo "FAIL: fleet init"; exit 1; }
	# 40 generations, each ending in System.gc(): an epoch boundary every 0.3 s or so.
	"$java" -cp "$classes" CodeReuse 40 0.3 >"$work/java.log" 2>&1 & jpid=$!
	# Only this JVM: the machine's other JVMs (other tests') are not the service's to touch.
	"$viprof" serve --continuous "$work/c" --interval 3 --jvm-attach "$jpid" \
		--push "clickhouse=http://127.0.0.1:${ch_http[0]},database=vpf" >"$work/serve.log" 2>&1 & serve_gc=$!
	wait "$jpid"; jpid=
	# The interval the JVM ended in ends too (the service's rotation, not a result): one
	# more "continuous: ... s at ... Hz" line than now.
	ended() { grep -c "continuous: .* s at .* Hz" "$work/serve.log"; }
	n=$(ended)
	for _ in $(seq 150); do [ "$(ended)" -gt "$n" ] && break; sleep 0.1; done
	[ "$(ended)" -gt "$n" ] || { echo "FAIL: no interval ended within 15 s after the JVM"; tail -20 "$work/serve.log"; exit 1; }
	kill -INT "$serve_gc"; wait "$serve_gc"; serve_gc=
	q() { ch_query 0 "$1"; }
	pid=$(q "SELECT pid FROM vpf.viprof_samples WHERE thread != '' AND gc_epoch > 0 GROUP BY pid ORDER BY count() DESC LIMIT 1")
	[ -n "$pid" ] || { echo "FAIL: no row of the JVM carries a GC epoch"; tail -20 "$work/serve.log"; exit 1; }
	n=$(q "SELECT uniqExact(gc_epoch) FROM vpf.viprof_samples WHERE pid = $pid")
	[ "$n" -ge 3 ] || { echo "FAIL: the JVM's rows carry $n distinct GC epochs, not 3 or more"; exit 1; }
	# Within an interval, epoch k+1 begins no earlier than epoch k (rows are per second).
	bad=$(q "SELECT count() FROM (SELECT interval_id, gc_epoch, min(ts) AS lo, max(ts) AS hi FROM vpf.viprof_samples
		WHERE pid = $pid GROUP BY interval_id, gc_epoch) AS a ALL INNER JOIN (SELECT interval_id, toUInt32(gc_epoch - 1) AS gc_epoch,
		min(ts) AS lo2 FROM vpf.viprof_samples WHERE pid = $pid GROUP BY interval_id, gc_epoch) AS b USING (interval_id, gc_epoch)
		WHERE lo2 < lo")
	[ "$bad" = 0 ] || { echo "FAIL: $bad GC epochs begin before the one they follow"; exit 1; }
	for iv in $(q "SELECT DISTINCT interval_id FROM vpf.viprof_samples WHERE pid = $pid ORDER BY interval_id"); do
		d=$("$viprof" report "$work/c/$iv" -p "$pid" -F folded 2>/dev/null | awk '{s += $NF} END {print s + 0}')
		s=$(q "SELECT sum(samples) FROM vpf.viprof_samples FINAL WHERE pid = $pid AND interval_id = '$iv' AND event_idx = 0")
		[ "$d" = "$s" ] || { echo "FAIL: interval $iv: $d samples of the JVM on disk, $s in the store"; exit 1; }
		echo "ok: $iv: $s samples of the JVM, epochs $(q "SELECT arrayStringConcat(groupUniqArray(toString(gc_epoch)), ',') FROM vpf.viprof_samples WHERE pid = $pid AND interval_id = '$iv'")"
	done
	echo PASS
	exit 0
fi
if [ "$scenario" = tls ]; then
	command -v openssl >/dev/null || { echo "SKIP: openssl is missing (makes the test's CA)"; exit 77; }
	trap 'kill -KILL $serve_tls 2>/dev/null; ch_cleanup; rm -rf "$work"' EXIT
	serve_tls=
	cd "$work" || exit 1
	# A CA, a server certificate for 127.0.0.1 signed by it, and another CA.
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=vp-fleet-ca 2>/dev/null &&
	openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.pem -days 2 -subj /CN=vp-fleet-other 2>/dev/null &&
	openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 2>/dev/null &&
	printf 'subjectAltName=IP:127.0.0.1\n' >ext &&
	openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile ext 2>/dev/null ||
		{ echo "FAIL: openssl could not make the test's certificates"; exit 1; }
	chmod 644 srv.key
	cd - >/dev/null
	printf 'vpfleet:s3cret-%s\n' "$$" >"$work/auth" && printf 'vpfleet:wrong\n' >"$work/bad" && chmod 600 "$work/auth" "$work/bad"
	CH_USER=vpfleet CH_PASSWORD=s3cret-$$ CH_TLS_CERT=$work/srv.pem CH_TLS_KEY=$work/srv.key ch_start 1 ||
		{ echo "FAIL: ClickHouse with TLS did not start"; exit 1; }
	for pre in viprof_ other_ bad_; do
		"$viprof" fleet init "clickhouse://127.0.0.1:${ch_http[0]}/vpf?prefix=$pre" --cluster none >/dev/null ||
			{ echo "FAIL: fleet init"; exit 1; }
	done
	tgt=https://127.0.0.1:${ch_https[0]}
	"$viprof" serve --continuous "$work/c" --interval 2 --no-jit \
		--push "clickhouse=$tgt,database=vpf,ca=$work/ca.pem,basic=$work/auth" \
		--push "clickhouse=$tgt/,database=vpf,prefix=other_,ca=$work/other.pem,basic=$work/auth" \
		--push "clickhouse=$tgt/x,database=vpf,prefix=bad_,ca=$work/ca.pem,basic=$work/bad" >"$work/serve.log" 2>&1 &
	serve_tls=$!
	"$split3" 3 >/dev/null 2>&1
	for t in $(seq 100); do
		[ "$(ch_query 0 "SELECT count() FROM vpf.viprof_samples")" -gt 0 ] && break
		sleep 0.2
	done
	kill -INT "$serve_tls"; wait "$serve_tls"; serve_tls=
	n=$(ch_query 0 "SELECT count() FROM vpf.viprof_samples")
	[ "$n" -gt 0 ] || { echo "FAIL: nothing arrived over https with the test's CA"; cat "$work/serve.log"; exit 1; }
	m=$(ch_query 0 "SELECT count() FROM vpf.other_samples")
	[ "$m" = 0 ] || { echo "FAIL: $m rows arrived through the target given another CA"; exit 1; }
	grep "$tgt/:" "$work/serve.log" | grep -q "certificate" ||
		{ echo "FAIL: the other CA's refusal does not name the certificate"; cat "$work/serve.log"; exit 1; }
	grep "$tgt/:" "$work/serve.log" | head -1
	m=$(ch_query 0 "SELECT count() FROM vpf.bad_samples")
	[ "$m" = 0 ] || { echo "FAIL: $m rows arrived with a wrong password"; exit 1; }
	grep "$tgt/x:" "$work/serve.log" | grep -q "password" ||
		{ echo "FAIL: the wrong password's refusal is not logged"; grep "$tgt/x" "$work/serve.log" | head -3; exit 1; }
	grep "$tgt/x:" "$work/serve.log" | head -1
	"$viprof" report "clickhouses://127.0.0.1:${ch_https[0]}/vpf?ca=$work/ca.pem&user=$work/auth" -F folded >"$work/f" ||
		{ echo "FAIL: report clickhouses:// with the test's CA"; exit 1; }
	[ -s "$work/f" ] || { echo "FAIL: report clickhouses:// is empty"; exit 1; }
	if "$viprof" report "clickhouses://127.0.0.1:${ch_https[0]}/vpf?ca=$work/other.pem" -F folded >/dev/null 2>"$work/e"; then
		echo "FAIL: report clickhouses:// trusted another CA"; exit 1
	fi
	echo "ok: $n rows over https; the other CA: $(cat "$work/e")"
	echo PASS
	exit 0
fi
tag=$$
ns=(vpfleet${tag}a vpfleet${tag}b)
sub=10.$((RANDOM % 200 + 30)).$((RANDOM % 250))   # a /24 of its own, at random (other tests may run)
serve_pid=() busy=
cleanup() {
	local p i
	[ -n "$cbusy" ] && pkill -KILL -P "$cbusy"
	for p in "${serve_pid[@]}" $busy $cbusy; do kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	for i in 0 1; do
		ip netns del "${ns[$i]}" 2>/dev/null
		ip link del "vpf${tag}h$i" 2>/dev/null
	done
	ch_cleanup
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	for i in 0 1; do echo "--- serve vm-$i:"; tail -20 "$work/serve$i.log" 2>/dev/null; done
	exit 1
}

# Two "VMs": a namespace each, reached over a veth pair; a /30 each inside $sub.0/24.
for i in 0 1; do
	host_ip=$sub.$((4 * i + 1)) ns_ip=$sub.$((4 * i + 2))
	hip[$i]=$host_ip
	ip netns add "${ns[$i]}" 2>/dev/null || { echo "SKIP: cannot make a network namespace (ip netns add)"; exit 77; }
	ip link add "vpf${tag}h$i" type veth peer name "vpf${tag}n$i" || fail "ip link add veth"
	ip link set "vpf${tag}n$i" netns "${ns[$i]}"
	ip addr add "$host_ip/30" dev "vpf${tag}h$i" && ip link set "vpf${tag}h$i" up || fail "veth address"
	ip -n "${ns[$i]}" addr add "$ns_ip/30" dev "vpf${tag}n$i"
	ip -n "${ns[$i]}" link set "vpf${tag}n$i" up
	ip -n "${ns[$i]}" link set lo up
done
ch_start 2 "${hip[0]}" "${hip[1]}" || fail "the ClickHouse servers did not start"
for i in 0 1; do
	"$viprof" fleet init "clickhouse://127.0.0.1:${ch_http[$i]}/vpf" --cluster "$ch_cluster" >/dev/null ||
		fail "viprof fleet init on shard $i"
done
store="clickhouse://127.0.0.1:${ch_http[0]}/vpf"

extra=()
[ "$scenario" = layers ] && extra=(--off-cpu)
"$split3" 600 >/dev/null 2>&1 & busy=$!
cbusy=
if [ "$scenario" = layers ]; then
	unshare -p -f --kill-child "$split3" 600 >/dev/null 2>&1 & cbusy=$!
fi
for i in 0 1; do
	# Each host pushes to the server of its own shard; the Distributed table there places
	# the rows by (service, host).
	ip netns exec "${ns[$i]}" unshare -u bash -c "hostname vm-$i; exec '$viprof' serve --continuous '$work/c$i' \
		--interval 2 --no-jit -F 49 ${extra[*]} --push 'clickhouse=http://${hip[$i]}:${ch_http[$i]},database=vpf'" \
		>"$work/serve$i.log" 2>&1 &
	serve_pid[$i]=$!
done

intervals() {   # intervals HOST: the interval names the store holds for HOST, oldest first
	ch_query 0 "SELECT DISTINCT interval_id FROM vpf.viprof_samples WHERE host = '$1' ORDER BY interval_id"
}
wait_intervals() {   # wait_intervals N SECONDS: until each host has N intervals in the store
	local n=$1 t
	for t in $(seq $(( $2 * 5 ))); do
		[ "$(intervals vm-0 | wc -l)" -ge "$n" ] && [ "$(intervals vm-1 | wc -l)" -ge "$n" ] && return 0
		sleep 0.2
	done
	fail "after $2 s the store holds $(intervals vm-0 | wc -l) and $(intervals vm-1 | wc -l) intervals, not $n each"
}
stop_serves() {
	local i
	for i in 0 1; do kill -INT "${serve_pid[$i]}"; done
	for i in 0 1; do wait "${serve_pid[$i]}"; done
	serve_pid=()
}

# compare WHAT FMT ARGS_STORE -- DIRS: the shares of the fleet report and of the local one
compare() {
	local what=$1 fmt=$2; shift 2
	local store_args=() dirs=()
	while [ "$1" != "--" ]; do store_args+=("$1"); shift; done
	shift
	dirs=("$@")
	local a="$work/store.$fmt" b="$work/disk.$fmt"
	"$viprof" report "$store" "${store_args[@]}" --no-norm -F "$fmt" -n 30 -o "$a" 2>"$work/err" ||
		fail "$what: report $store ${store_args[*]} -F $fmt: $(cat "$work/err")"
	"$viprof" report "${dirs[@]}" "${evargs[@]}" --no-norm -F "$fmt" -n 30 -o "$b" 2>"$work/err" ||
		fail "$what: report of the directories -F $fmt: $(cat "$work/err")"
	if [ "$fmt" = pprof ]; then
		"$pprof" -top -symbolize=none -nodecount=40 "$a" >"$a.top" 2>&1 || fail "pprof cannot read the store's report: $(head -3 "$a.top")"
		"$pprof" -top -symbolize=none -nodecount=40 "$b" >"$b.top" 2>&1 || fail "pprof cannot read the disk's report"
		a=$a.top b=$b.top
	fi
	python3 "$here/test-fleet-compare.py" "$fmt" "$a" "$b" || fail "$what ($fmt): the fleet report differs from the disk's"
	echo "ok: $what ($fmt)"
}

pprof=
find_pprof() {
	pprof=./pprof
	[ -x "$pprof" ] && return 0
	command -v go >/dev/null || { echo "note: go is missing: pprof comparison skipped"; pprof=; return 1; }
	[ -d /usr/share/gocode/src/github.com/google/pprof ] || { echo "note: pprof sources missing: skipped"; pprof=; return 1; }
	GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$PWD/.gocache go build -o pprof.tmp github.com/google/pprof &&
		mv pprof.tmp pprof || { pprof=; return 1; }
}

# where_of HOST N: --where naming HOST's first N intervals in the store; dirs_of the same dirs
where_of() { local w="" iv; for iv in $(intervals "$1" | head -"$2"); do w+=",interval=$iv"; done; echo "${w#,}"; }
dirs_of() { local i=$1 iv; for iv in $(intervals "vm-$i" | head -"$2"); do echo "$work/c$i/$iv"; done; }

evargs=()
case "$scenario" in
roundtrip)
	wait_intervals 3 40
	stop_serves
	kill "$busy"; busy=
	find_pprof
	fmts=(text folded)
	[ -n "$pprof" ] && fmts+=(pprof)
	for i in 0 1; do
		for f in "${fmts[@]}"; do
			compare "vm-$i" "$f" --where "host=vm-$i,$(where_of vm-$i 3)" -- $(dirs_of $i 3)
		done
	done
	# Both together: the same intervals of both hosts (the where's interval keys name either).
	for f in "${fmts[@]}"; do
		compare "vm-0 and vm-1" "$f" --where "$(where_of vm-0 3),$(where_of vm-1 3)" -- $(dirs_of 0 3) $(dirs_of 1 3)
	done
	# A glob over the hosts names both.
	n=$("$viprof" report "$store" --where 'host=vm-*' -F folded | awk '{s += $NF} END {print s}')
	m=$(ch_query 0 "SELECT sum(samples) FROM vpf.viprof_samples FINAL WHERE event = 'cpu-clock'")
	[ "$n" = "$m" ] || fail "--where host=vm-* reported $n cpu-clock samples, the store holds $m"
	# --time in Unix seconds: the rows' whole span holds them all, a span before it none.
	lo=$(ch_query 0 "SELECT toUInt32(min(ts)) FROM vpf.viprof_samples WHERE event = 'cpu-clock'")
	hi=$(ch_query 0 "SELECT toUInt32(max(ts)) FROM vpf.viprof_samples WHERE event = 'cpu-clock'")
	n=$("$viprof" report "$store" -e cpu-clock --time "$lo,$((hi + 1))" -F folded | awk '{s += $NF} END {print s}')
	[ "$n" = "$m" ] || fail "--time $lo,$((hi + 1)) reported $n cpu-clock samples, the store holds $m"
	n=$("$viprof" report "$store" -e cpu-clock --time "$lo,$((lo + 1))" -F folded | awk '{s += $NF} END {print s + 0}')
	f=$(ch_query 0 "SELECT sum(samples) FROM vpf.viprof_samples FINAL WHERE event = 'cpu-clock' AND ts < toDateTime($((lo + 1)))")
	[ "$n" = "$f" ] || fail "--time $lo,$((lo + 1)) reported $n cpu-clock samples, the store holds $f in that second"
	echo "ok: --time (all $m, first second $f)"
	# --diff between two label sets of the store: vm-1 against vm-0.
	"$viprof" report "$store" --where "host=vm-1" --diff "$store" --base-where "host=vm-0" -n 5 >"$work/diff.txt" 2>&1 ||
		fail "report --diff --base-where: $(cat "$work/diff.txt")"
	base=$(ch_query 0 "SELECT sum(samples) FROM vpf.viprof_samples FINAL WHERE event = 'cpu-clock' AND host = 'vm-0'")
	new=$(ch_query 0 "SELECT sum(samples) FROM vpf.viprof_samples FINAL WHERE event = 'cpu-clock' AND host = 'vm-1'")
	grep -q "diff on cpu-clock: base $base samples, new $new samples" "$work/diff.txt" ||
		fail "the diff's header does not say base $base (vm-0) and new $new (vm-1): $(grep diff "$work/diff.txt")"
	echo "ok: --diff vm-1 against vm-0 ($new against $base samples)"
	;;
outage)
	wait_intervals 1 30
	ch_stop 1
	# Two intervals end on vm-1 while its server is down: they wait in its queue.
	before=$(ls "$work/c1" | wc -l)
	for t in $(seq 100); do [ "$(ls "$work/c1" | wc -l)" -ge $((before + 2)) ] && break; sleep 0.2; done
	[ "$(ls "$work/c1" | wc -l)" -ge $((before + 2)) ] || fail "vm-1 did not end two intervals in 20 s"
	grep -q "no answer" "$work/serve1.log" || fail "vm-1's pushes did not fail while its server was down"
	ch_restart 1 || fail "the server of shard 1 did not start again"
	# Then the queues empty (the back-off is at most one interval long).
	for t in $(seq 150); do
		q=$(find "$work"/c0/.push "$work"/c1/.push -type f -name '0*' | wc -l)
		[ "$q" = 0 ] && break
		sleep 0.2
	done
	[ "$q" = 0 ] || fail "$q interval(s) still queued 30 s after the server came back"
	stop_serves
	kill "$busy"; busy=
	# Every interval a host ended is in the store once: its cpu-clock samples there
	# (FINAL and, after the merge, without it) equal the directory's; or it is still in
	# the queue on disk (the last ones, ended at the stop), and not in the store.
	# A resend whose first answer was lost (the rows stored, the 200 not received): the
	# same rows again, as the queue would send them. The tables' keys make them one.
	iv1=$(intervals vm-1 | head -1)
	ch_query 1 "SELECT * FROM vpf.viprof_samples WHERE host = 'vm-1' AND interval_id = '$iv1' FORMAT TabSeparated" >"$work/resend"
	[ -s "$work/resend" ] || fail "no rows of vm-1's interval $iv1 to send again"
	curl -sS --fail-with-body "http://127.0.0.1:${ch_http[1]}/?insert_distributed_sync=1&query=INSERT%20INTO%20vpf.viprof_samples%20FORMAT%20TabSeparated" \
		--data-binary @"$work/resend" || fail "sending vm-1's interval $iv1 again"
	ch_query 0 "OPTIMIZE TABLE vpf.viprof_samples_local FINAL" >/dev/null
	ch_query 1 "OPTIMIZE TABLE vpf.viprof_samples_local FINAL" >/dev/null
	for i in 0 1; do
		queued=$(ls "$work/c$i"/.push/clickhouse-*/)
		for iv in $(ls "$work/c$i" | sort); do
			if grep -q -- "-$iv\$" <<<"$queued"; then
				s=$(ch_query 0 "SELECT count() FROM vpf.viprof_samples WHERE host = 'vm-$i' AND interval_id = '$iv'")
				[ "$s" = 0 ] || fail "vm-$i interval $iv is both queued and in the store ($s rows)"
				echo "ok: vm-$i $iv: still queued at the stop"
				continue
			fi
			d=$("$viprof" report "$work/c$i/$iv" -F folded 2>/dev/null | awk '{s += $NF} END {print s + 0}')
			s=$(ch_query 0 "SELECT sum(samples) FROM vpf.viprof_samples FINAL WHERE host = 'vm-$i' AND interval_id = '$iv' AND event = 'cpu-clock'")
			r=$(ch_query 0 "SELECT sum(samples) FROM vpf.viprof_samples WHERE host = 'vm-$i' AND interval_id = '$iv' AND event = 'cpu-clock'")
			[ "$d" = 0 ] && continue   # an interval without samples is not sent
			[ "$s" = "$d" ] && [ "$r" = "$d" ] ||
				fail "vm-$i interval $iv: $d cpu-clock samples on disk, $s in the store (FINAL), $r without FINAL"
			echo "ok: vm-$i $iv: $d samples, once"
		done
	done
	;;
layers)
	wait_intervals 2 40
	stop_serves
	kill "$busy"; busy=
	cpid=$(pgrep -P "$cbusy" | head -1)
	cont=pidns-$(stat -L -c %i "/proc/$cpid/ns/pid")
	kill -KILL "$cpid"; wait "$cbusy"; cbusy=   # pid 1 of its namespace: only KILL ends it
	for i in 0 1; do
		evargs=(--container "$cont")
		compare "vm-$i container $cont" folded --container "$cont" --where "host=vm-$i,$(where_of vm-$i 2)" -- $(dirs_of $i 2)
		compare "vm-$i container= $cont" folded --where "container=pidns-*,host=vm-$i,$(where_of vm-$i 2)" -- $(dirs_of $i 2)
		for ev in off-cpu steal; do
			evargs=(-e "$ev")
			compare "vm-$i $ev" folded -e "$ev" --where "host=vm-$i,$(where_of vm-$i 2)" -- $(dirs_of $i 2)
		done
		# The off-CPU kinds as the store's column says them (a query by kind).
		k=$(ch_query 0 "SELECT count() FROM vpf.viprof_samples WHERE host = 'vm-$i' AND offcpu LIKE '[blocked%'")
		[ "$k" -gt 0 ] || fail "vm-$i: no rows of a blocked kind in the store"
	done
	;;
*) echo "usage: test-fleet.sh roundtrip|outage|layers|tls|gc|escapes VIPROF SPLIT3 [JAVA CLASSES]"; exit 2 ;;
esac
echo "PASS"
