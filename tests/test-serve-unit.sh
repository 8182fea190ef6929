#!/bin/bash
# packaging/viprof.service (issue 31): hardened, and the service works under it. One
# scenario per ctest entry (tests/serve.cmake). Exit 77: cannot run here.
#   usage: test-serve-unit.sh SCENARIO VIPROF ZCALLER SOURCE_DIR BUILD_DIR
#   security  systemd-analyze security --offline=yes rates the unit at most 4.0, and
#             its Documentation= names a file that 'cmake --install' installs
#   caps      the service started as root confined to the unit's CapabilityBoundingSet
#             (setpriv --bounding-set): it names no capability missing, a user's
#             'record -g' of zcaller (no frame pointers) through the socket has whole
#             stacks, root's --http scrape is answered with kernel frames named, and
#             --continuous intervals end readable
#   missing   the same without CAP_CHECKPOINT_RESTORE and CAP_SYSLOG: one line at start
#             names each, and nothing else; and what the lines say holds (the user's
#             stacks are cut, root's kernel frames unnamed)
set -u
scenario=$1 viprof=$2 zcaller=$3 src=$4 bld=$5
unit=$src/packaging/viprof.service

# The unit's CapabilityBoundingSet= as setpriv's list: "+bpf,+perfmon,...".
unit_caps() {
	sed -n 's/^CapabilityBoundingSet=//p' "$unit" | tr ' ' '\n' | grep . | tr 'A-Z' 'a-z' |
		sed 's/^cap_/+/' | paste -sd,
}

case $scenario in
security)
	command -v systemd-analyze >/dev/null || { echo "SKIP: no systemd-analyze (Debian's systemd)"; exit 77; }
	out=$(systemd-analyze security --offline=yes "$unit" 2>&1)
	level=$(echo "$out" | sed -n 's/.*Overall exposure level for viprof.service: \([0-9.]*\).*/\1/p')
	[ -n "$level" ] || { echo "$out" | tail -5; echo "SKIP: this systemd-analyze has no offline security rating"; exit 77; }
	echo "exposure $level"
	awk -v l="$level" 'BEGIN { exit !(l <= 4.0) }' ||
		{ echo "$out" | grep '✗'; echo "FAIL: exposure $level is over 4.0"; exit 1; }
	# Documentation= must name what an install puts there.
	doc=$(sed -n 's|^Documentation=file://||p' "$unit")
	[ -n "$doc" ] || { echo "FAIL: Documentation= names no file"; exit 1; }
	dest=$(mktemp -d /tmp/vp-unit-install.XXXXXX)
	trap 'rm -rf "$dest"' EXIT
	DESTDIR=$dest cmake --install "$bld" --prefix /usr/local >/dev/null || { echo "FAIL: cmake --install"; exit 1; }
	[ -s "$dest$doc" ] || { find "$dest" -type f; echo "FAIL: Documentation=file://$doc is not installed"; exit 1; }
	grep -q "ExecStart=$(sed -n 's|^ExecStart=\([^ ]*\).*|\1|p' "$unit")" "$unit" &&
		[ -x "$dest$(sed -n 's|^ExecStart=\([^ ]*\).*|\1|p' "$unit")" ] || { echo "FAIL: ExecStart= names no installed program"; exit 1; }
	echo "Documentation=file://$doc installed"
	echo "PASS: security"
	exit 0
	;;
esac

. "$(dirname "$0")/serve-lib.sh"
serve_lib_init serve-unit "$viprof" "$zcaller"
command -v setpriv >/dev/null || { echo "SKIP: no setpriv (util-linux)"; exit 77; }
caps=$(unit_caps)
[ -n "$caps" ] || fail "no CapabilityBoundingSet= in $unit"
[ "$scenario" = missing ] && caps=$(echo "$caps" | tr ',' '\n' | grep -v '^+checkpoint_restore$\|^+syslog$' | paste -sd,)
echo "bounding set: $caps"
# As systemd starts it: root, the bounding set (root's permitted and effective sets follow
# it at exec), nothing inheritable or ambient.
setpriv --bounding-set=-all,$caps --inh-caps=-all --ambient-caps=-all \
	"$viprof" serve --socket "$sock" --http 127.0.0.1:0 --continuous "$work/cont" --interval 2 --no-jit \
	>"$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 50); do
	[ -S "$sock" ] && grep -q "recordings for users on" "$work/serve.log" && break
	sleep 0.1
done
grep -q "recordings for users on" "$work/serve.log" || fail "the service did not start under the unit's capabilities"
grep "^CapEff\|^CapBnd" /proc/$serve_pid/status
grep "warning: no CAP_" "$work/serve.log"

# A user's 'record -g' of zcaller through the socket: whether its stacks are whole.
# zcaller has no frame pointers, nor has libz: only the unwind tables (built from the
# files /proc/PID/map_files opens) reach main from inside compress2.
user_stacks_whole() {
	as "$u" "'$viprof' record -g -F 999 -o '$work/a/s$1' -- '$zcaller' squeeze 2" 2>"$work/a.err" ||
		{ cat "$work/a.err"; fail "the user's recording through the socket"; }
	grep -q "audit uid=$(id -u "$u") .*record target=launch.* -> ok" "$work/serve.log" || fail "the recording did not go through the service"
	"$viprof" report "$work/a/s$1" --format folded >"$work/a.folded" 2>/dev/null || fail "report of the user's session"
	awk '/libz|deflate|compress/ { n += $NF; if ($0 ~ /main/) r += $NF } END {
		printf "samples in libz: %d, reaching main: %d\n", n, r; if (n < 200) exit 2; exit !(r * 100 >= n * 90) }' \
		"$work/a.folded"
}
# Root's scrape over --http: answered, and whether kernel frames are named (from
# /proc/kallsyms, which shows root its addresses only with CAP_SYSLOG).
root_kernel_named() {
	local port
	port=$(sed -n 's/.*pprof over HTTP on .* (port \([0-9]*\)).*/\1/p' "$work/serve.log")
	python3 - "http://127.0.0.1:$port/debug/pprof/profile?seconds=2" <<'PY'
import gzip, sys, urllib.request
body = gzip.decompress(urllib.request.urlopen(sys.argv[1], timeout=60).read())
named = [s for s in (b"entry_SYSCALL_64", b"asm_sysvec_", b"do_syscall_64", b"__schedule") if s in body]
print("pprof of %d bytes, kernel names %s" % (len(body), [n.decode() for n in named]))
sys.exit(0 if named else 1)
PY
}

mkuser a; u=$REPLY
case $scenario in
caps)
	grep -q "warning: no CAP_" "$work/serve.log" && fail "the service lacks a capability under the unit's set"
	user_stacks_whole 1 || fail "the user's stacks are cut short"
	root_kernel_named || fail "root's scrape has no kernel names"
	# --continuous: intervals end and are written whole.
	for _ in $(seq 100); do [ -n "$(find "$work/cont" -name service.json)" ] && break; sleep 0.1; done
	[ -n "$(find "$work/cont" -name service.json)" ] || fail "no continuous interval ended"
	"$viprof" report "$(dirname "$(find "$work/cont" -name service.json | head -1)")" --top 3 >/dev/null ||
		fail "a continuous interval cannot be read"
	;;
missing)
	for c in CAP_CHECKPOINT_RESTORE CAP_SYSLOG; do
		[ "$(grep -c "warning: no $c:" "$work/serve.log")" = 1 ] || fail "the start does not name $c in one line"
	done
	[ "$(grep -c "warning: no CAP_" "$work/serve.log")" = 2 ] || fail "other capabilities named missing"
	# What the lines say is so: the two capabilities are the difference.
	user_stacks_whole 1; [ $? = 1 ] || fail "stacks are whole without CAP_CHECKPOINT_RESTORE (the line says otherwise)"
	root_kernel_named && fail "kernel frames are named without CAP_SYSLOG (the line says otherwise)"
	;;
*)
	echo "unknown scenario $scenario"; exit 2 ;;
esac
kill -TERM "$serve_pid"; wait "$serve_pid"; serve_pid=
echo "PASS: $scenario"
