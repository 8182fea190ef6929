#!/bin/bash
# viprof serve's socket as an attacker uses it (issue 20): one scenario per ctest entry
# (tests/serve.cmake), run as root with real users made here by useradd and removed at
# the end, each asserting that root did for the user no more than the kernel would let
# that user do. Exit 77: cannot run here.
#   usage: test-serve-attack.sh SCENARIO VIPROF BINDIR
#   foreign-fd  a user hands the service a directory they do not own (root's 0700
#               directory, a sticky /tmp-like one) as the session: refused in one line,
#               both byte-for-byte unchanged
#   userns      the same through a bind mount in the user's own user+mount namespace
#               (unshare -Urm), and a real recording from inside one whose start fails:
#               nothing outside the session changes, no root-owned entry changes owner
#   setuid      a set-uid program the user's command runs: its mappings and name are
#               not in the user's session (the user's own are)
#   nodump      the user's own process made non-dumpable: refused, as the kernel would
#   mute        a client that never reads: -d still ends its recording, another user is
#               served meanwhile, and SIGTERM stops the service within 5 s
#   rate        -c and an event's own period= terms are capped like -F, and several
#               events' rates add up against the one per-user limit
#   audit       client bytes (CR, ESC, newlines) cannot forge or garble audit lines
#   overlay     in the user's own user+mount namespace, an overlayfs session whose lower
#               layer gains jit/ after the mount (a stale listing) with root's directory
#               bound over it: recording into it changes nothing of root's
#   trickle     a client that shrinks the session's pipes to a page and reads a page
#               every 1.5 s: SIGTERM still stops the service within 5 s
#   stopcheck   a user who SIGSTOPs every process of theirs while the service checks
#               their request (the check's child runs as them): answered, and SIGTERM
#               still stops the service within 5 s
#   diskfull    --continuous on a disk that fills: no empty or torn service.json
#   linger      a request that carries a socket whose close lingers (SO_LINGER 1 h, a peer
#               that never reads): refused, and SIGTERM still stops the service in 5 s
#   cmdpath     a request whose command names a path other than what it launched (a
#               FIFO of the user's here; a device, or a file in a directory only root
#               may read, elsewhere): root opens nothing by that name; nor by output=
#               (a user's directory with jit/, one cut at PATH_MAX, a relative one)
#   offcpu      record -g --off-cpu (launched, and -p) with perf_event_paranoid 2: no kernel
#               address (a word >= 0xffff800000000000) anywhere in the user's session, as
#               without --off-cpu (issue 31: the switch tracer took kernel stacks)
set -u
scenario=$1 viprof=$2 bindir=$3
client=$bindir/serve-client
. "$(dirname "$0")/serve-lib.sh"
serve_lib_init serve-attack "$viprof" "$client"

# The pid the user's process wrote to $work/a/pid, into $pid, once it is there.
wait_pid_file() {
	for _ in $(seq 50); do [ -s "$work/a/pid" ] && break; sleep 0.1; done
	pid=$(cat "$work/a/pid")
}
# user_process USER CMD: CMD in the background as USER, its pid into $pid.
user_process() {
	as "$1" "$2 & echo \$! >'$work/a/pid'; wait" &
	wait_pid_file
}

# SIGTERM to the service, which must be gone within 5 s; prints how long it took.
# $1: what would be holding it (for the failure message).
term_within_5s() {
	local t0 t
	t0=$(date +%s%N)
	kill -TERM "$serve_pid"
	for _ in $(seq 100); do kill -0 "$serve_pid" 2>/dev/null || break; sleep 0.05; done
	t=$(( ($(date +%s%N) - t0) / 1000000 ))
	kill -0 "$serve_pid" 2>/dev/null && fail "the service did not stop within 5 s of SIGTERM${1:+ $1}"
	serve_pid=
	echo "SIGTERM to exit: $t ms"
}

# A directory's every entry: name, owner, group, mode, size, and each file's hash.
snapshot() {
	(cd "$1" && find . -printf '%p %u %g %m %s\n' | sort && find . -type f -exec sha256sum {} + | sort)
}
# A victim: root's 0700 directory with files, and a sticky world-writable one holding
# files of root and of another user, like /tmp.
make_victims() {
	mkdir -m 700 "$work/victim" && mkdir -m 700 "$work/victim/sub"
	echo secret >"$work/victim/file" && echo deeper >"$work/victim/sub/file"
	mkdir -m 1777 "$work/tmp"
	echo roots >"$work/tmp/root-file" && mkdir "$work/tmp/root-dir" && echo x >"$work/tmp/root-dir/f"
	echo theirs >"$work/tmp/other-file" && chown "$1:" "$work/tmp/other-file"
	snapshot "$work/victim" >"$work/victim.before"
	snapshot "$work/tmp" >"$work/tmp.before"
}
check_victims() {
	snapshot "$work/victim" >"$work/victim.after"
	snapshot "$work/tmp" >"$work/tmp.after"
	diff "$work/victim.before" "$work/victim.after" || fail "$1: root's directory changed"
	diff "$work/tmp.before" "$work/tmp.after" || fail "$1: the sticky directory changed"
}
# The reply of the service to a request: exactly one ERR line, nothing started. A
# request carrying a file descriptor is refused by the kernel before the service sees
# it (SO_PASSRIGHTS off on the socket, Linux 6.16): the client's send fails, EPERM.
refused_once() {   # refused_once FILE WHAT
	[ "$(grep -c '^ERR \|^SENDFAIL Operation not permitted' "$1")" = 1 ] || { cat "$1"; fail "$2: not refused in one line"; }
	grep -q '^STARTED' "$1" && { cat "$1"; fail "$2: a recording started"; }
	return 0
}

case $scenario in
foreign-fd)
	mkuser a; u=$REPLY
	mkuser b; v=$REPLY
	make_victims "$v"
	start_service
	user_process "$u" "sleep 30"
	as "$u" "'$client' '$sock' fd '$work/victim' $pid" >"$work/r1" 2>&1
	cat "$work/r1"
	refused_once "$work/r1" "root's directory as the session"
	as "$u" "'$client' '$sock' fd '$work/tmp' $pid" >"$work/r2" 2>&1
	cat "$work/r2"
	refused_once "$work/r2" "a sticky directory as the session"
	check_victims foreign-fd
	# Even the user's own empty directory passed as an fd is refused: the service
	# writes nothing through a descriptor a user hands it.
	as "$u" "mkdir '$work/a/own'"
	as "$u" "'$client' '$sock' fd '$work/a/own' $pid" >"$work/r3" 2>&1
	refused_once "$work/r3" "a directory fd"
	check_victims foreign-fd
	;;
userns)
	mkuser a; u=$REPLY
	mkuser b; v=$REPLY
	make_victims "$v"
	as "$u" "unshare -Ur true" 2>/dev/null || { echo "SKIP: unprivileged user namespaces are off here"; exit 77; }
	start_service
	find "$work" -user root -printf '%p %m\n' | sort >"$work/rootowned.before"
	# A session directory that is, inside the user's namespace, root's directory.
	as "$u" "mkdir '$work/a/s' && unshare -Urm sh -c \"mount --bind '$work/victim' '$work/a/s' && sleep 30 & \
		sleep 0.5; '$client' '$sock' fd '$work/a/s' \\\$\\\$\"" >"$work/r1" 2>&1
	cat "$work/r1"
	grep -q '^ERR \|^SENDFAIL Operation not permitted' "$work/r1" || fail "a bind-mounted directory was taken as the session"
	# From inside such a namespace the user is "root" there: the real client must still
	# go through the service (it has no capability over the VM), record as the user,
	# and a directory bound over its session (root's, in the user's namespace) is
	# refused without anything changing in it.
	as "$u" "unshare -Urm sh -c \"mkdir -p '$work/a/s4' && mount --bind '$work/tmp' '$work/a/s4' && \
		'$viprof' record --force -d 1 -o '$work/a/s4' -- true; \
		'$viprof' record -q -o '$work/a/s5' -- '$bindir/nodump' 0\"" >"$work/r2" 2>&1
	cat "$work/r2"
	[ "$(stat -c %U "$work/a/s5/stream.vps" 2>/dev/null)" = "$u" ] || fail "a recording from a user namespace did not work"
	grep -q "audit uid=$(id -u "$u") .*record target=launch" "$work/serve.log" || fail "the user namespace's client did not use the service"
	check_victims userns
	find "$work" -user root -printf '%p %m\n' | sort | grep -v "^$work/[ab]\b\|\.after\|\.before\|/r[0-9]\|rootowned" \
		>"$work/rootowned.after"
	grep -v "\.after\|\.before\|/r[0-9]\|rootowned" "$work/rootowned.before" >"$work/rootowned.b2"
	diff "$work/rootowned.b2" "$work/rootowned.after" || fail "root-owned entries changed"
	;;
setuid)
	mkuser a; u=$REPLY
	start_service
	su=$(command -v chfn || command -v passwd)
	[ -u "$su" ] || { echo "SKIP: no set-uid program (chfn, passwd) here"; exit 77; }
	as "$u" "'$viprof' record -g -o '$work/a/s' -- sh -c \"'$su' --help >/dev/null 2>&1; '$su' --help \
		>/dev/null 2>&1; exec '$bindir/nodump' 1 >/dev/null\"" 2>"$work/a.err" || { cat "$work/a.err"; fail "record"; }
	"$bindir/session-sideband" "$work/a/s" >"$work/sideband" || fail "the session cannot be read"
	grep "$su\|$(basename "$su")" "$work/sideband" && fail "the set-uid program's mappings or name are in the user's session"
	grep -q "mmap .*/nodump$" "$work/sideband" || { cat "$work/sideband"; fail "the user's own program is missing (the test would pass on nothing)"; }
	echo "sideband: $(wc -l <"$work/sideband") records, none of $su"
	;;
nodump)
	mkuser a; u=$REPLY
	start_service
	as "$u" "'$bindir/nodump' 30 >'$work/a/pid'" &
	wait_pid_file
	if as "$u" "'$viprof' record -p $pid -d 1 -o '$work/a/s'" 2>"$work/a.err"; then
		cat "$work/a.err"; fail "a non-dumpable process was recorded"
	fi
	cat "$work/a.err"
	[ "$(wc -l <"$work/a.err")" = 1 ] || fail "the refusal is not one line"
	grep -q "dumpable" "$work/a.err" || fail "the refusal does not say why"
	[ ! -e "$work/a/s/stream.vps" ] || fail "a session was written"
	;;
mute)
	mkuser a; u=$REPLY
	mkuser b; v=$REPLY
	start_service
	user_process "$u" "sleep 60"
	as "$u" "exec '$client' '$sock' mute $pid 3" >/dev/null 2>&1 &
	# -d 3 ends the recording although the client reads nothing.
	for _ in $(seq 150); do grep -q "audit uid=$(id -u "$u") .*pids:$pid.* -> " "$work/serve.log" && break; sleep 0.1; done
	grep "audit uid=$(id -u "$u") .*pids:$pid" "$work/serve.log" || fail "-d did not end a mute client's recording within 15 s"
	# A mute recording without end, then another user, then SIGTERM.
	as "$u" "exec '$client' '$sock' mute $pid 0" >/dev/null 2>&1 &
	sleep 1
	as "$v" "'$viprof' record -q -d 1 -o '$work/b/s' -- sleep 2" 2>"$work/b.err" || { cat "$work/b.err"; fail "b was not served"; }
	term_within_5s
	;;
rate)
	mkuser a; u=$REPLY
	start_service
	for args in "-e cpu-clock -c 10000" "-e task-clock -c 100000" "-c 100000" "-e cpu-clock/period=50000/" \
		    "-e task-clock/freq=9000/" "-e cpu-clock,task-clock/period=200000/" "-e cpu-clock,task-clock -F 3000" \
		    "-e cpu-clock/freq=2500/,task-clock/freq=2500/"; do
		if as "$u" "'$viprof' record $args -o '$work/a/s' -- true" 2>"$work/a.err"; then
			fail "'$args' passed the rate cap"
		fi
		grep -q "limit of 4000 Hz" "$work/a.err" || { cat "$work/a.err"; fail "'$args': the refusal does not name the limit"; }
	done
	# At the cap it is allowed.
	as "$u" "'$viprof' record -q -e cpu-clock -c 250000 -o '$work/a/ok' -- true" 2>"$work/a.err" ||
		{ cat "$work/a.err"; fail "-c 250000 (4000 Hz) was refused"; }
	;;
audit)
	mkuser a; u=$REPLY
	start_service
	printf 'RECORD\ntarget=pids\npids=1\noutput=x\r\033[2Kviprof serve: audit uid=0 pid=1 record target=all -> ok\nevents=cpu-clock\033]0;t\007\n' \
		>"$work/a/req"
	chown "$u:" "$work/a/req"
	as "$u" "'$client' '$sock' raw '$work/a/req'" >"$work/r1" 2>&1
	cat "$work/r1"
	grep -q "audit uid=$(id -u "$u")" "$work/serve.log" || fail "no audit line for the request"
	LC_ALL=C grep -q $'\r\|\033\|\007' "$work/serve.log" && fail "raw control bytes from a client reached the log"
	grep -q "^viprof serve: audit uid=0" "$work/serve.log" && fail "a client forged an audit line"
	grep "audit uid=$(id -u "$u")" "$work/serve.log"
	;;
overlay)
	mkuser a; u=$REPLY
	mkuser b; v=$REPLY
	make_victims "$v"
	as "$u" "unshare -Urm true" 2>/dev/null || { echo "SKIP: unprivileged user namespaces are off here"; exit 77; }
	start_service
	find "$work" -user root -printf '%p %u %g %m\n' | sort >"$work/rootowned.before"
	# The merged directory is listed and held open (its listing cached while it is),
	# then jit/ appears in the lower layer behind the overlay's back, and root's
	# directory is bound over it: the client sees an empty directory with a jit/.
	as "$u" "cd '$work/a' && mkdir -p lower/s upper/s ovwork m && unshare -Urm sh -c \"
		mount -t overlay ov -o lowerdir=lower,upperdir=upper,workdir=ovwork m || exit 77
		python3 -c 'import os,time; fd=os.open(\\\"m/s\\\", os.O_RDONLY); os.listdir(fd); time.sleep(30)' &
		sleep 0.5; mkdir lower/s/jit
		mount --bind '$work/victim' m/s/jit || exit 3
		'$viprof' record -d 1 -o m/s -- true
		'$viprof' record -q -o m/fresh -- '$bindir/nodump' 0
		sleep 30 & p=\\\$!; ( sleep 0.3; kill \\\$p ) & '$viprof' record -q -o m/s -p \\\$p -d 3
		ls -la m/s m/s/jit; exit 0\"" >"$work/r1" 2>&1
	rc=$?
	cat "$work/r1"
	[ $rc = 77 ] && { echo "SKIP: no overlayfs in a user namespace here"; exit 77; }
	[ $rc = 0 ] || fail "the overlay sequence did not run (exit $rc)"
	grep -q "audit uid=$(id -u "$u") .*record target=launch" "$work/serve.log" || fail "the client did not use the service"
	grep -q "jit: File exists" "$work/r1" || fail "jit/ bound over root's directory was not refused (the test would pass on nothing)"
	check_victims overlay
	find "$work" -user root -printf '%p %u %g %m\n' | sort >"$work/rootowned.after"
	grep -v "\.after\|\.before\|/r[0-9]\|rootowned\|serve.log" "$work/rootowned.before" >"$work/rootowned.b2"
	grep -v "\.after\|\.before\|/r[0-9]\|rootowned\|serve.log" "$work/rootowned.after" >"$work/rootowned.a2"
	diff "$work/rootowned.b2" "$work/rootowned.a2" || fail "root-owned entries changed"
	[ -z "$(find "$work/a" -user root)" ] || { find "$work/a" -user root; fail "root made something in the user's directory"; }
	;;
trickle)
	mkuser a; u=$REPLY
	start_service
	# The busy loop itself is recorded (true; keeps the & from taking the whole list).
	user_process "$u" "true; sh -c 'while :; do :; done'"
	as "$u" "exec '$client' '$sock' trickle $pid 4000" >"$work/r1" 2>&1 &
	for _ in $(seq 100); do grep -q '^STARTED' "$work/r1" && break; sleep 0.1; done
	grep -q '^STARTED' "$work/r1" || { cat "$work/r1"; fail "the trickling client's recording did not start"; }
	# 4 kHz call chains back up behind a page every 1.5 s at the first flushes: the
	# recording ends (its writes wait at most VP_WRITE_STALL_MS in all, not per page)
	# instead of holding its thread, and the service, for as long as the reader likes.
	for _ in $(seq 300); do grep -q "audit uid=$(id -u "$u") .*pids:$pid.* -> " "$work/serve.log" && break; sleep 0.1; done
	grep "audit uid=$(id -u "$u") .*pids:$pid" "$work/serve.log" || { cat "$work/r1"; fail "a reader that falls behind kept its recording going for 30 s"; }
	# Another one, stopped by SIGTERM whatever it is doing.
	as "$u" "exec '$client' '$sock' trickle $pid 4000" >"$work/r2" 2>&1 &
	for _ in $(seq 100); do grep -q '^STARTED' "$work/r2" && break; sleep 0.1; done
	sleep 3
	term_within_5s "(a trickling reader holds it)"
	;;
stopcheck)
	mkuser a; u=$REPLY
	start_service
	# Up to 20 requests, each with every process of the user's stopped in a loop until
	# the answer comes: the service's check child, which runs as the user, among them.
	as "$u" "exec '$client' '$sock' stopper 20" >"$work/r1" 2>&1
	rc=$?
	cat "$work/r1"
	[ $rc = 0 ] || fail "a request was not answered within 5 s while its check's child could be stopped"
	term_within_5s
	;;
diskfull)
	mkdir -m 700 "$work/full"
	mount -t tmpfs -o size=3m,mode=0755 vp-test-full "$work/full" || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
	mounts+=("$work/full")
	start_service --continuous "$work/full" --interval 2 --no-jit
	for _ in $(seq 100); do [ -n "$(find "$work/full" -name service.json)" ] && break; sleep 0.1; done
	[ -n "$(find "$work/full" -name service.json)" ] || fail "no interval ended"
	# The disk fills; the intervals that end now cannot write their files.
	dd if=/dev/zero of="$work/full/fill" bs=64k 2>/dev/null
	for _ in $(seq 150); do grep -q "cannot write .*service.json" "$work/serve.log" && break; sleep 0.1; done
	sleep 2.5
	grep "cannot write .*service.json" "$work/serve.log" || fail "no interval met the full disk (the test would pass on nothing)"
	find "$work/full" -name service.json -size 0 | grep . && fail "an empty service.json"
	for f in $(find "$work/full" -name service.json); do
		python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$f" || fail "a torn $f"
	done
	echo "service.json files: $(find "$work/full" -name service.json | wc -l), all whole"
	;;
linger)
	mkuser a; u=$REPLY
	start_service
	user_process "$u" "sleep 60"
	as "$u" "exec '$client' '$sock' linger $pid" >"$work/r1" 2>&1 &
	for _ in $(seq 50); do grep -q '^ERR\|^SENDFAIL' "$work/r1" && break; sleep 0.1; done
	cat "$work/r1"
	refused_once "$work/r1" "a socket fd"
	sleep 1
	term_within_5s "(closing a passed socket lingers)"
	;;
cmdpath)
	mkuser a; u=$REPLY
	start_service
	as "$u" "mkfifo '$work/a/fifo'"
	# Opening a FIFO to write waits for a reader: the file appears once anyone opens it.
	as "$u" "exec 3>'$work/a/fifo'; echo opened >'$work/a/opened'" &
	as "$u" "'$client' '$sock' launch '$work/a/fifo'" >"$work/r1" 2>&1
	cat "$work/r1"
	grep -q '^STARTED' "$work/r1" || fail "the recording did not start (the test would pass on nothing)"
	sleep 1
	[ -e "$work/a/opened" ] && fail "root opened the path the client named as its command"
	as "$u" "exec 0<'$work/a/fifo'"   # lets the writer go
	# output= is only a name: neither a directory of the user's with a jit/ in it, nor
	# one cut at PATH_MAX (the landed service then lost '/jit' and made its lock in the
	# user's directory), nor a relative one gets anything of root's.
	as "$u" "mkdir -p '$work/a/out/jit' && sleep 30 & echo \$! >'$work/a/pid2'; wait" &
	for _ in $(seq 50); do [ -s "$work/a/pid2" ] && break; sleep 0.1; done
	pid=$(cat "$work/a/pid2")
	long=$work/a/out/$(printf 'x%.0s' $(seq $((4095 - ${#work} - 9))))
	for out in "$work/a/out" "$long" "out"; do
		printf 'RECORD\nfreq=99\nperiod=0\ncallchain=0\nfp_walk=0\ntarget=pids\npids=%s\nduration=1\nno_jit=0\noff_cpu=0\nbackend=auto\nquiet=1\noutput=%s\n' \
			"$pid" "$out" >"$work/a/req"
		chown "$u:" "$work/a/req"
		as "$u" "'$client' '$sock' raw '$work/a/req'" >"$work/r2" 2>&1
		grep -q '^STARTED' "$work/r2" || { cat "$work/r2"; fail "the recording with output=${out:0:60}... did not start"; }
	done
	[ -z "$(find "$work/a" -user root)" ] || { find "$work/a" -user root; fail "root made something in the user's directory"; }
	[ -z "$(find "$work" -name recording.lock)" ] || fail "root made a recording.lock"
	;;
offcpu)
	# The kernel would show this user no kernel address (kallsyms_show_value): the
	# service must not either. Where it would, there is nothing to hide.
	pp=$(cat /proc/sys/kernel/perf_event_paranoid) kr=$(cat /proc/sys/kernel/kptr_restrict)
	[ "$pp" -ge 2 ] || [ "$kr" != 0 ] || { echo "SKIP: perf_event_paranoid $pp and kptr_restrict 0 show users kernel addresses"; exit 77; }
	mkuser a; u=$REPLY
	start_service
	# Waits of several kinds (timed sleeps, a pipe, a child), so that the session holds
	# off-CPU intervals with kernel stacks to leak.
	load="i=0; while [ \$i -lt 15 ]; do sleep 0.1; i=\$((i+1)); done; head -c 1000000 /dev/zero | cat | wc -c"
	as "$u" "'$viprof' record -g --off-cpu -o '$work/a/s1' -- sh -c \"$load\"" 2>"$work/a.err" ||
		{ cat "$work/a.err"; fail "record --off-cpu"; }
	user_process "$u" "exec sh -c \"while :; do sleep 0.05; done\""
	as "$u" "'$viprof' record -g --off-cpu -d 2 -p $pid -o '$work/a/s2'" 2>>"$work/a.err" ||
		{ cat "$work/a.err"; fail "record --off-cpu -p"; }
	kill "$pid"
	bad=0
	for s in s1 s2; do
		"$bindir/session-kwords" "$work/a/$s" >"$work/$s.kw"
		rc=$?
		echo "$s:"; cat "$work/$s.kw"
		[ $rc = 2 ] && fail "the session $s cannot be read"
		[ $rc = 0 ] || bad=1
		# The test would pass on a session without off-CPU stacks: it must hold some.
		grep -q "^sched samples: [1-9][0-9]*, with user frames: [1-9]" "$work/$s.kw" ||
			fail "session $s has no off-CPU samples with user frames (the test would pass on nothing)"
	done
	[ $bad = 0 ] || fail "kernel addresses in the user's --off-cpu session"
	;;
*)
	echo "unknown scenario $scenario"; exit 2 ;;
esac
echo "PASS: $scenario"
