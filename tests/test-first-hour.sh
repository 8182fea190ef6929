#!/bin/bash
# What misled a newcomer in their first hour (issue 26), one scenario per ctest entry
# (tests/cli.cmake). Exit 77: cannot run here.
#   usage: test-first-hour.sh SCENARIO VIPROF SPLIT3
#   nocmd     'record -- nonexistent-cmd': 127, one line, no session left behind
#   rate      -F over the kernel's limit refused in one line; over 10 kHz warned
#   notsession 'report' of a directory that is no session says so
#   plain     a recording without -g has no stack breakdown; 'report -F 999' says why not
#   progress  'report' of a recording in progress says it is in progress, not killed
#   diskfull  a recording whose disk fills says how many samples the session holds
#   unpriv    a user with no service: one note naming 'viprof serve', no libbpf lines,
#             and a launched JVM gets -XX:+PreserveFramePointer (the perf walk needs it)
set -u
scenario=$1 viprof=$2 split3=$3
work=$(mktemp -d /tmp/vp-first-hour.XXXXXX)
chmod 755 "$work"
user=
cleanup() {
	mountpoint -q "$work/small" 2>/dev/null && umount "$work/small"
	[ -n "$user" ] && { pkill -KILL -u "$user" 2>/dev/null; userdel "$user" 2>/dev/null; }
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work" || exit 1

case $scenario in
nocmd)
	"$viprof" record -- nonexistent-cmd-vp 2>err
	rc=$?
	cat err
	[ "$rc" = 127 ] || fail "exit $rc, not 127"
	[ "$(wc -l <err)" = 1 ] || fail "not one line"
	grep -q "cannot run 'nonexistent-cmd-vp'" err || fail "the line does not say what"
	[ ! -e viprof.session ] || fail "a session was left behind"
	;;
rate)
	max=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
	if [ "$max" -lt 100000 ]; then
		"$viprof" record -F $((max + 1)) -- true 2>err && fail "-F over the kernel's limit was taken"
		cat err
		grep -q "perf_event_max_sample_rate" err || fail "the refusal does not name the limit"
		[ ! -e viprof.session ] || fail "a session was left behind"
	else
		echo "the kernel's limit is $max: -F above it is refused by the option parser"
	fi
	"$viprof" record -F 20000 -o s -- true 2>err || { cat err; fail "-F 20000"; }
	grep -q "warning: -F 20000" err || { cat err; fail "no warning at 20 kHz"; }
	"$viprof" record -o s2 -- true 2>err || fail "record"
	grep -q "warning: -F" err && fail "a warning at the default rate"
	;;
plain)
	# Without -g: no stack breakdown in the header; report -F 999 explains itself.
	"$viprof" record -q -o s -- "$split3" 1 2>/dev/null || fail "record"
	"$viprof" report s >out 2>&1 || fail "report"
	grep -q "user stacks" out && { cat out; fail "a stack breakdown without -g"; }
	"$viprof" report s -F 999 2>err && fail "report -F 999 was taken"
	grep -q "sampling rate is record's -F" err || { cat err; fail "report -F 999 does not explain"; }
	;;
notsession)
	mkdir empty
	"$viprof" report empty 2>err && fail "an empty directory was reported"
	cat err
	grep -q "is not a viprof session" err || fail "it does not say what is wrong"
	;;
progress)
	"$viprof" record -q -o s -- "$split3" 6 2>/dev/null &
	rec=$!
	for _ in $(seq 100); do [ -s s/stream.vps ] && [ "$(stat -c %s s/stream.vps)" -gt 4096 ] && break; sleep 0.1; done
	"$viprof" report s --top 3 >out 2>&1
	grep -q "still in progress" out || { cat out; kill $rec; fail "a running recording is not said to be in progress"; }
	grep -q "killed" out && fail "a running recording is said killed"
	wait $rec
	"$viprof" report s --top 3 >out 2>&1 || fail "report after the end"
	grep -q "in progress\|killed" out && fail "an ended recording still warns"
	;;
diskfull)
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to mount a small tmpfs"; exit 77; }
	mkdir small && mount -t tmpfs -o size=12k tmpfs small || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
	"$viprof" record -g -o small/s -- "$split3" 2 2>err
	cat err
	grep -q "No space left" err || fail "the full disk is not named"
	grep -q "the recording failed: the session holds [0-9]* of the [0-9]* samples" err ||
		fail "the summary does not say what the session holds"
	;;
unpriv)
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to make a user"; exit 77; }
	command -v useradd >/dev/null || { echo "SKIP: no useradd"; exit 77; }
	user=vpfh$$
	useradd -M -d "$work" -s /bin/sh "$user" 2>/dev/null || { echo "SKIP: useradd failed"; exit 77; }
	su "$user" -s /bin/sh -c "test -x '$viprof'" || { echo "SKIP: $viprof is not reachable by other users"; exit 77; }
	chown "$user:" "$work"
	# The command prints the JVM options it was given.
	su "$user" -s /bin/sh -c "cd '$work' && VIPROF_SOCKET=$work/none '$viprof' record -g -o s -- \
		sh -c 'echo \"JTO=\$JAVA_TOOL_OPTIONS\"'" >out 2>err || { cat out err; fail "record as a user"; }
	cat err out
	grep -q "^libbpf" err && fail "raw libbpf lines"
	grep -q "viprof serve" err || fail "no word of the service"
	grep -q "JTO=.*-XX:+PreserveFramePointer" out || fail "the launched JVM would not keep frame pointers"
	;;
*)
	echo "unknown scenario $scenario"; exit 2 ;;
esac
echo "PASS: $scenario"
