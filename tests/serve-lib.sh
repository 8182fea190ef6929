# What the service's shell tests share (sourced by test-serve-socket.sh and
# test-serve-attack.sh): a scratch directory, real users made by useradd and removed at
# exit, the service on a socket of its own, and running commands as a user.
#   serve_lib_init PREFIX BINARY...   skips (77) unless root with useradd, and unless every
#                                     BINARY is reachable by other users
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
command -v useradd >/dev/null && command -v userdel >/dev/null || { echo "SKIP: no useradd"; exit 77; }

users=()
mounts=()
serve_pid=
work=
sock=
serve_lib_init() {
	local prefix=$1; shift
	work=$(mktemp -d "/tmp/vp-$prefix.XXXXXX")
	chmod 755 "$work"
	sock=$work/run/viprof.sock
	trap cleanup EXIT
	local b
	for b in "$@"; do
		su nobody -s /bin/sh -c "test -x '$b'" 2>/dev/null ||
			{ echo "SKIP: $b is not reachable by other users"; exit 77; }
	done
}
on_cleanup=   # a scenario's own cleanup, run first
cleanup() {
	[ -n "$on_cleanup" ] && $on_cleanup
	[ -n "$serve_pid" ] && kill -KILL "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
	for u in "${users[@]}"; do pkill -KILL -u "$u" 2>/dev/null; userdel "$u" 2>/dev/null; done
	for m in "${mounts[@]}"; do umount -l "$m"; done
	[ -n "$work" ] && rm -rf "$work"
	[ -n "${classes_copy:-}" ] && rm -rf "$classes_copy"
}
fail() { echo "FAIL: $*"; echo "--- service log:"; cat "$work/serve.log"; exit 1; }

mkuser() {   # mkuser TAG: a fresh user (in $REPLY) with a directory $work/TAG; not in a
	     # subshell, so that cleanup knows it
	local u=vpt$$_$1
	u=${u:0:31}
	useradd -M -d "$work/$1" -s /bin/sh "$u" 2>/dev/null || { echo "SKIP: useradd $u failed"; exit 77; }
	users+=("$u")
	mkdir -p "$work/$1" && chown "$u:" "$work/$1"
	REPLY=$u
}
start_service() {   # start_service [ARGS..]: viprof serve --socket on $sock, its log in $work
	"$viprof" serve --socket "$sock" "$@" >"$work/serve.log" 2>&1 &
	serve_pid=$!
	# Ready once it says so: the socket file exists from bind(), before its chmod 0666
	# and listen() (a snapshot of root's entries taken in between saw mode 755).
	for _ in $(seq 50); do
		[ -S "$sock" ] && grep -q "recordings for users on" "$work/serve.log" && return 0
		sleep 0.1
	done
	fail "the service did not listen on $sock"
}
as() {   # as USER CMD...: runs CMD as USER with the socket in the environment
	local u=$1; shift
	su "$u" -s /bin/bash -c "cd '$work' && export VIPROF_SOCKET='$sock' && $*"
}
