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
#   subuid      one user's 17 subordinate uids (newuidmap, /etc/subuid), each holding 8
#               connections to the socket and 8 to --http (issue 31): they count against
#               the user who owns their user namespace, and HTTP refuses them at accept,
#               so root's scraper and another user are still served
#   execonly    an execute-only program (0711, root's) the user's command runs: neither its
#               mappings (load addresses, build-id), its name nor its samples are in the
#               user's session, as the kernel lets the user read none of them
#   contdir     --continuous DIR under a directory a user can write (theirs, or their
#               group's): refused at start without making DIR; under a sticky one, fine;
#               and the index page reads DIR through the service's descriptor only
#   cmdpath     a request whose command names a path other than what it launched (a
#               FIFO of the user's here; a device, or a file in a directory only root
#               may read, elsewhere): root opens nothing by that name; nor by output=
#               (a user's directory with jit/, one cut at PATH_MAX, a relative one)
# The JVM attach as a way in (issue 31; these need a JDK: VP_JAVA and VP_JAVA_CLASSES
# in the environment, tests/serve-jvm.cmake):
#   attach-stop  the JVM's user SIGSTOPs every attach helper the service forks for their
#               JVM: the continuous recording still rotates, and SIGTERM stops the
#               service within 5 s while a helper is stopped
#   attach-plant another user puts a listening socket of theirs at the victim JVM's
#               /tmp/.java_pid<N> (a sticky /tmp): it receives no byte, and once it is
#               gone the JVM gets the agent (it was not remembered as refusing)
#   attach-tmp   a user binds a host directory (root's, then their own) over the /tmp of
#               their JVM in a user+mount namespace of theirs: the service's attach
#               creates nothing of root's in it (the agent's copy, its directory and
#               socket are made by a process that became the user), and the JVM still
#               gets the agent through a directory of theirs
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

# A JVM of user a (USER) running LateAttach (hot methods) for 120 s, its pid into $pid
# once it printed "ready". With jvm_tmp set, root starts it in a mount namespace of its
# own where that directory is bound over /tmp; with jvm_userns_tmp, the user does so in
# a user+mount namespace of theirs. Skips (77) without a JDK the user can run.
user_jvm() {   # user_jvm USER TAG [JVM OPTIONS]
	[ -x "${VP_JAVA:-}" ] && [ -d "${VP_JAVA_CLASSES:-}" ] || { echo "SKIP: no JDK (VP_JAVA, VP_JAVA_CLASSES)"; exit 77; }
	su nobody -s /bin/sh -c "test -r '$VP_JAVA_CLASSES/LateAttach.class'" 2>/dev/null ||
		{ echo "SKIP: $VP_JAVA_CLASSES is not readable by other users"; exit 77; }
	local script=$work/a/$2.sh bind=${jvm_tmp:-${jvm_userns_tmp:-}} as_user= classes=$VP_JAVA_CLASSES
	[ -n "${jvm_tmp:-}" ] && as_user="setpriv --reuid=$1 --regid=$1 --init-groups"
	# A build tree under /tmp (a CI clone) disappears behind the bind: the JVM's class
	# is copied to /var/tmp for it, removed at the end.
	if [ -n "$bind" ] && [[ $classes == /tmp/* ]]; then
		[ -n "${classes_copy:-}" ] || { classes_copy=$(mktemp -d /var/tmp/vp-classes.XXXXXX) &&
			chmod 755 "$classes_copy" && cp "$VP_JAVA_CLASSES"/LateAttach*.class "$classes_copy"/; }
		classes=$classes_copy
	fi
	# Its pid and output files are opened before the bind hides $work (under /tmp).
	{
		echo '#!/bin/sh'
		echo "echo \$\$ >'$work/a/pid'"
		echo "exec >'$work/a/$2.out' 2>&1"
		[ -n "$bind" ] && echo "mount --bind '$bind' /tmp || exit 1"
		echo "exec $as_user '$VP_JAVA' -Xmx64m ${3:-} -cp '$classes' LateAttach 120"
	} >"$script"
	chmod 755 "$script"
	rm -f "$work/a/pid"
	if [ -n "${jvm_tmp:-}" ]; then
		unshare -m "$script" &
	elif [ -n "${jvm_userns_tmp:-}" ]; then
		as "$1" "unshare -Urm '$script'" &
	else
		as "$1" "'$script'" &
	fi
	wait_pid_file
	for _ in $(seq 100); do grep -q ready "$work/a/$2.out" 2>/dev/null && return 0; sleep 0.1; done
	cat "$work/a/$2.out"; fail "the JVM $2 did not start"
}
# The intervals the continuous recording ended so far (its log's lines).
intervals() { grep -c "continuous: .* s at .* Hz" "$work/serve.log"; }

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
	# CR, ESC, BEL; C1 CSI raw and UTF-8 encoded; a right-to-left override and an isolate.
	printf 'RECORD\ntarget=pids\npids=1\noutput=x\r\033[2Kviprof serve: audit uid=0 pid=1 record target=all -> ok\x9b2K\xc2\x9b2K\xe2\x80\xaeko <- lla\xe2\x81\xa6\nevents=cpu-clock\033]0;t\007\n' \
		>"$work/a/req"
	chown "$u:" "$work/a/req"
	as "$u" "'$client' '$sock' raw '$work/a/req'" >"$work/r1" 2>&1
	cat "$work/r1"
	grep -q "audit uid=$(id -u "$u")" "$work/serve.log" || fail "no audit line for the request"
	LC_ALL=C grep -q $'\r\|\033\|\007\|\x9b\|\xc2\x9b\|\xe2\x80\xae\|\xe2\x81\xa6' "$work/serve.log" &&
		fail "raw control bytes from a client reached the log"
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
subuid)
	command -v newuidmap >/dev/null && command -v newgidmap >/dev/null ||
		{ echo "SKIP: no newuidmap/newgidmap (Debian's uidmap)"; exit 77; }
	mkuser a; u=$REPLY
	mkuser b; v=$REPLY
	grep -q "^$u:" /etc/subuid && grep -q "^$u:" /etc/subgid ||
		{ echo "SKIP: useradd gave $u no subordinate ids (/etc/subuid, SUB_UID_COUNT in /etc/login.defs)"; exit 77; }
	as "$u" "unshare --map-auto --map-root-user true" 2>/dev/null ||
		{ echo "SKIP: unshare --map-auto (newuidmap) cannot map $u's subordinate ids here"; exit 77; }
	base=$(grep "^$u:" /etc/subuid | cut -d: -f2)
	# Inner uid i is outer base + i - 1; they are nobody's in /etc/passwd, so the
	# cleanup's pkill -u of the user misses them: killed here.
	kill_subuids() { for i in $(seq 0 16); do pkill -KILL -U $((base + i)) 2>/dev/null; done; }
	on_cleanup=kill_subuids
	start_service --http 127.0.0.1:0
	port=$(sed -n 's/.*pprof over HTTP on .* (port \([0-9]*\)).*/\1/p' "$work/serve.log")
	[ -n "$port" ] || fail "no HTTP port in the log"
	mkdir -m 1777 "$work/h"
	# 17 subordinate uids of one user, each holding 8 connections to the socket and 8 to
	# HTTP for 40 s, opening again each one the service closes: before issue 31 each
	# counted as a user of its own (17 x 8 > 64 HTTP slots, 17 x 4 > 64 socket ones).
	as "$u" "unshare --map-auto --map-root-user sh -c 'for i in \$(seq 17); do setpriv --reuid=\$i --regid=\$i \
		--clear-groups \"$client\" \"$sock\" hold 8 40 $port >$work/h/\$i 2>&1 & done; wait'" &
	for _ in $(seq 150); do [ "$(cat "$work"/h/* 2>/dev/null | grep -c '^up')" = 17 ] && break; sleep 0.1; done
	[ "$(cat "$work"/h/* 2>/dev/null | grep -c '^up')" = 17 ] || { cat "$work"/h/*; fail "the 17 subordinate uids' clients did not start"; }
	[ "$(ps -o uid= -C serve-client | sort -u | wc -l)" -ge 17 ] || fail "the clients do not run as 17 uids"
	as "$v" "'$viprof' record -q -d 1 -o '$work/b/s' -- sleep 2" 2>"$work/b.err" ||
		{ cat "$work/b.err"; fail "another user was not served while one user's subordinate uids held the socket"; }
	[ -s "$work/b/s/stream.vps" ] || fail "b's session is empty"
	for i in 1 2 3 4; do
		code=$(python3 -c 'import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=30); r.read(); print(r.status)
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode(errors="replace").strip())' "http://127.0.0.1:$port/debug/pprof/profile?seconds=1")
		echo "root's scrape $i: $code"
		[ "${code%% *}" = 200 ] || fail "root's scraper was not served while one user's subordinate uids held connections: $code"
	done
	# Counted against their owner: the refusals name the user whose namespace they are in.
	grep -q "audit uid=$base owner=$(id -u "$u") .*refused: " "$work/serve.log" ||
		{ grep "audit uid=$base " "$work/serve.log" | head -5; fail "no refusal of a subordinate uid names its owner $u"; }
	grep "audit uid=$base " "$work/serve.log" | head -2
	kill_subuids
	;;
execonly)
	# An execute-only program (mode 0711, root's): its user cannot read the file, so the
	# kernel makes the process non-dumpable at exec and lets the user read neither the
	# file nor the process (its memory, its load addresses): root must not read them for
	# the user, and the user's session holds nothing of it (issue 31).
	mkuser a; u=$REPLY
	sh=$(readlink -f "$(command -v dash || command -v sh)")
	cp "$sh" "$work/xo" && chmod 0711 "$work/xo"
	as "$u" "cat '$work/xo' >/dev/null" 2>/dev/null && fail "the user can read the execute-only copy"
	start_service
	cat >"$work/a/run.sh" <<EOF
i=0; while [ \$i -lt 200000 ]; do i=\$((i+1)); done
'$work/xo' -c 'echo \$\$ >"$work/a/xopid"; i=0; while [ \$i -lt 300000 ]; do i=\$((i+1)); done'
EOF
	chown "$u:" "$work/a/run.sh"
	as "$u" "'$viprof' record -g -F 999 -o '$work/a/s' -- '$sh' '$work/a/run.sh'" 2>"$work/a.err" ||
		{ cat "$work/a.err"; fail "record"; }
	xopid=$(cat "$work/a/xopid")
	"$bindir/session-sideband" "$work/a/s" >"$work/sideband" || fail "the session cannot be read"
	grep "$work/xo\| xo$" "$work/sideband" && fail "the execute-only program's mappings or name are in the user's session"
	n=$(awk -v p="$xopid" '$1 == "samples" && $2 == p { print $3 }' "$work/sideband")
	echo "samples of the execute-only process $xopid: ${n:-0}"
	# Its child was the user's own shell from fork to exec: a few samples at most (3 in
	# a CI run beside other tests), where its 300,000 turns after the exec take hundreds.
	[ "${n:-0}" -le 10 ] || fail "${n} samples of the execute-only process are in the user's session"
	# The user's own shell, which ran as long, is there: the test would pass on nothing otherwise.
	grep -q "mmap .*$(basename "$sh")$" "$work/sideband" || { cat "$work/sideband"; fail "the user's own shell is missing"; }
	[ "$(awk '$1 == "samples" { s += $3 } END { print s + 0 }' "$work/sideband")" -ge 50 ] ||
		{ cat "$work/sideband"; fail "too few samples of the user's own shell"; }
	;;
contdir)
	# --continuous DIR below a directory another user can write (issue 31): they could
	# rename DIR away and put theirs in its place; refused at start, in one line naming
	# that directory, without making DIR. A sticky, world-writable parent (like /tmp)
	# is fine when DIR in it is root's. And the index page reads DIR through the
	# descriptor the service opened, never its path again.
	mkuser a; u=$REPLY
	mkdir -m 755 "$work/ud" && chown "$u:" "$work/ud"
	mkdir -m 775 "$work/gw" && chgrp "$(id -gn "$u")" "$work/gw"
	for bad in "$work/ud/c" "$work/gw/c" "$work/ud/deeper/c"; do
		if timeout 10 "$viprof" serve --continuous "$bad" --no-jit >"$work/r1" 2>&1; then
			fail "--continuous $bad was taken"
		fi
		cat "$work/r1"
		grep -q "viprof serve: --continuous $bad: .*${bad%/c}\|viprof serve: --continuous $bad: .*$work/ud" "$work/r1" ||
			fail "the refusal of $bad does not name the directory users can write"
		[ -e "$bad" ] && fail "root made $bad in a directory a user can write"
	done
	mkdir -m 1777 "$work/tmp"
	port=
	start_service --continuous "$work/tmp/c" --interval 2 --no-jit --http 127.0.0.1:0
	port=$(sed -n 's/.*pprof over HTTP on .* (port \([0-9]*\)).*/\1/p' "$work/serve.log")
	for _ in $(seq 100); do [ -n "$(find "$work/tmp/c" -name service.json)" ] && break; sleep 0.1; done
	real=$(basename "$(dirname "$(find "$work/tmp/c" -name service.json | head -1)")")
	[ -n "$real" ] || fail "no interval ended"
	# DIR's path now names another directory (root does it here: only root can).
	mv "$work/tmp/c" "$work/tmp/c.moved" && mkdir -m 700 "$work/tmp/c" "$work/tmp/c/20000101T000000Z"
	page=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())' \
		"http://127.0.0.1:$port/")
	echo "$page" | grep -q "20000101T000000Z" && fail "the index page read DIR by its path again"
	echo "$page" | grep -q "$real" || { echo "$page"; fail "the index page does not list interval $real"; }
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
attach-stop)
	mkuser a; u=$REPLY
	start_service --continuous "$work/c" --interval 2 --cpu-budget 0 --jvm-attach "user:$u"
	# The user stops every process of theirs whose parent is the service: the attach
	# helpers (they run as the user, so that the JVM accepts them).
	# A helper counts once the kernel says it is stopped (one that had already exited
	# is a zombie, which takes the signal without stopping).
	as "$u" "while :; do for p in \$(pgrep -u $(id -u "$u") -P $serve_pid); do kill -STOP \$p &&
		[ \"\$(ps -o stat= -p \$p)\" = T ] && { grep -qx \$p '$work/a/stopped' 2>/dev/null ||
		echo \$p >>'$work/a/stopped'; }; done; sleep 0.01; done" &
	# JVMs whose attach listener never starts (the flag in an @argfile, which the
	# service cannot see, and no perf data, where the helper would read it): each
	# helper waits 5 s for it, long enough to be caught.
	echo "-XX:+DisableAttachMechanism -XX:-UsePerfData" >"$work/a/noattach" && chown "$u:" "$work/a/noattach"
	user_jvm "$u" jvm1 "@$work/a/noattach"
	for _ in $(seq 300); do [ -s "$work/a/stopped" ] && break; sleep 0.1; done
	[ -s "$work/a/stopped" ] || { ps -o pid,ppid,uid,stat,wchan:20,args --ppid "$serve_pid";
		fail "no attach helper was seen to stop within 30 s (the test would pass on nothing)"; }
	ps -o pid,ppid,uid,stat,wchan:20,args -p "$(head -1 "$work/a/stopped")"
	n=$(intervals)
	echo "helper $(cat "$work/a/stopped") stopped after $n intervals"
	# The helper's deadline passes, it is killed, and the recording goes on.
	for _ in $(seq 400); do [ "$(intervals)" -ge $((n + 3)) ] && break; sleep 0.1; done
	[ "$(intervals)" -ge $((n + 3)) ] || fail "the continuous recording stopped rotating behind a stopped attach helper"
	grep "attach helper" "$work/serve.log" | head -3
	# A second JVM, whose helper is stopped too; SIGTERM while the service waits for it.
	user_jvm "$u" jvm2 "@$work/a/noattach"
	for _ in $(seq 300); do [ "$(wc -l <"$work/a/stopped")" -ge 2 ] && break; sleep 0.1; done
	[ "$(wc -l <"$work/a/stopped")" -ge 2 ] || fail "the second JVM's attach helper was not seen to stop"
	term_within_5s "(an attach helper is stopped)"
	;;
attach-plant)
	mkuser a; u=$REPLY
	mkuser b; v=$REPLY
	# The victim's JVM sees a sticky /tmp of the test's own (its mount namespace).
	mkdir -m 1777 "$work/tmp"
	jvm_tmp=$work/tmp user_jvm "$u" jvm1
	# The other user listens at the name HotSpot would give the JVM's attach socket,
	# and writes down whatever comes.
	cat >"$work/b/plant.py" <<-'EOF'
	import os, socket, sys
	path, log = sys.argv[1], sys.argv[2]
	s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
	s.bind(path)
	os.chmod(path, 0o777)
	s.listen(8)
	open(log + ".ready", "w").close()
	while True:
	    c, _ = s.accept()
	    c.settimeout(2)
	    try:
	        d = c.recv(65536)
	    except OSError:
	        d = b""
	    with open(log, "ab") as f:
	        f.write(b"ACCEPTED " + d + b"\n")
	    try:
	        c.sendall(b"0\n0\n")
	    except OSError:
	        pass
	    c.close()
	EOF
	as "$v" "python3 '$work/b/plant.py' '$work/tmp/.java_pid$pid' '$work/b/got' & echo \$! >'$work/b/pid'; wait" &
	for _ in $(seq 50); do [ -e "$work/b/got.ready" ] && break; sleep 0.1; done
	[ -S "$work/tmp/.java_pid$pid" ] || fail "the other user's socket is not in place"
	start_service --continuous "$work/c" --interval 2 --cpu-budget 0 --jvm-attach "user:$u"
	for _ in $(seq 300); do [ "$(intervals)" -ge 3 ] && break; sleep 0.1; done
	[ "$(intervals)" -ge 3 ] || fail "the continuous recording did not end 3 intervals"
	# Only this service's commands count (they name its directory): on a shared
	# machine another test's service, one with --jvm-attach all, may meet this JVM too.
	if grep -aq "$work/c" "$work/b/got" 2>/dev/null; then
		cat -v "$work/b/got"; fail "the socket another user put in the JVM's /tmp received root's load command"
	fi
	[ -s "$work/b/got" ] && { echo "(from other services on this machine:)"; cat -v "$work/b/got"; }
	grep "java_pid$pid" "$work/serve.log" | head -2
	grep -q "java_pid$pid.* owned by uid $(id -u "$v")" "$work/serve.log" || fail "the refusal does not name the socket's owner"
	# Gone: the JVM gets the agent at a later interval (its own listener now starts).
	kill "$(cat "$work/b/pid")"
	rm -f "$work/tmp/.java_pid$pid"
	for _ in $(seq 300); do [ -n "$(find "$work/c" -path "*/jit/$pid/codemap.vpm" -size +0)" ] && break; sleep 0.1; done
	[ -n "$(find "$work/c" -path "*/jit/$pid/codemap.vpm" -size +0)" ] ||
		fail "JVM $pid did not get the agent once the planted socket was gone"
	;;
attach-tmp)
	mkuser a; u=$REPLY
	as "$u" "unshare -Urm true" 2>/dev/null || { echo "SKIP: unprivileged user namespaces are off here"; exit 77; }
	mkdir -m 755 "$work/hostdir" && mkdir -m 1777 "$work/hostdir/sticky"
	as "$u" "mkdir -m 700 '$work/a/own'"
	start_service --continuous "$work/c" --interval 2 --cpu-budget 0 --jvm-attach "user:$u"
	# A host directory (sticky, like /tmp or /dev/shm) bound over the JVM's /tmp; the
	# user stops the service's attach helpers, which holds whatever the attach made
	# there in place for as long as the helper is stopped.
	as "$u" "while :; do for p in \$(pgrep -u $(id -u "$u") -P $serve_pid); do kill -STOP \$p &&
		[ \"\$(ps -o stat= -p \$p)\" = T ] && { grep -qx \$p '$work/a/stopped' 2>/dev/null ||
		echo \$p >>'$work/a/stopped'; }; done; sleep 0.01; done & echo \$! >'$work/a/stopper'; wait" &
	# Its attach listener never starts (the flag in an @argfile, in its /tmp, and no
	# perf data, where the helper would read it): each helper lives 5 s, long enough to
	# be caught.
	echo "-XX:+DisableAttachMechanism -XX:-UsePerfData" >"$work/hostdir/sticky/noattach" &&
		chown "$u:" "$work/hostdir/sticky/noattach"
	jvm_userns_tmp=$work/hostdir/sticky user_jvm "$u" jvm1 @/tmp/noattach
	for _ in $(seq 300); do [ -s "$work/a/stopped" ] && break; sleep 0.1; done
	[ -s "$work/a/stopped" ] || fail "no attach helper was seen to stop within 30 s (the test would pass on nothing)"
	sleep 1
	ls -la "$work/hostdir/sticky"
	rooted=$(find "$work/hostdir/sticky" -mindepth 1 -user root)
	[ -z "$rooted" ] || { find "$work/hostdir/sticky" -mindepth 1 -user root -ls; fail "root made entries in a JVM's bound-over /tmp"; }
	kill "$(cat "$work/a/stopper")"
	# A directory of the user's as the JVM's /tmp: the JVM gets the agent, and nothing
	# of root's appears there meanwhile.
	as "$u" "while :; do find '$work/a/own' -mindepth 1 -user root >>'$work/a/rooted'; sleep 0.01; done & echo \$! >'$work/a/poller'; wait" &
	jvm_userns_tmp=$work/a/own user_jvm "$u" jvm2
	for _ in $(seq 300); do [ -n "$(find "$work/c" -path "*/jit/$pid/codemap.vpm" -size +0)" ] && break; sleep 0.1; done
	[ -n "$(find "$work/c" -path "*/jit/$pid/codemap.vpm" -size +0)" ] ||
		fail "JVM $pid (its /tmp a directory of its user's) did not get the agent"
	kill "$(cat "$work/a/poller")"
	[ -s "$work/a/rooted" ] && { sort -u "$work/a/rooted"; fail "root made entries in a JVM's /tmp"; }
	[ -z "$(find "$work/a/own" -mindepth 1 -user root)" ] || fail "root left entries in a JVM's /tmp"
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
