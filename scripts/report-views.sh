# The report views that a change which must not change what is shown is checked on, one
# a line: report arguments after the session's directory. Each reads a different part of
# the loader or a different writer. Sourced by scripts/report-same.sh (two builds compared)
# and scripts/golden-update.sh / tests/test-report-golden.sh (one build against stored
# outputs), so both checks cover the same views.
# shellcheck disable=SC2034
VIEWS=(
	"-F text"
	"-F text -n 200 -s total"
	"-F text --layers"
	"-F folded"
	"-F json"
	"-F html"
	"-F jfr"
	"-F pprof"
	"-F text --wall"
	"-F folded --wall"
	"-F json --wall"
	"-F text -e off-cpu"
	"-F folded -e off-cpu"
	"-F text -e steal"
	"-F folded -e steal"
	"-F text -e alloc"
	"-F folded -e lock"
	"-F folded --vthreads"
	"-F text --vthreads --wall"
	"-F folded --map-mode flat"
	"-F text --time 0.5,2"
	"-F folded --time 1,"
	"-F folded --comm java"
	"-F text --java-only --simple"
)

# The views of several sessions reported as one (viprof report A B ...).
MERGED_VIEWS=(
	"-F text"
	"-F folded"
	"-F pprof"
)

# first_pid VIPROF SESSION: the pid of the session's first stack in its JSON report, for
# the -p view (empty when it has none).
first_pid() {
	"$1" report "$2" -F json 2>/dev/null | grep -A1 '"stacks":\[' |
		sed -n 's/^{"frames":\[[0-9,]*\],"pid":\([0-9]*\).*/\1/p' | head -1 || true
}

# golden_normalise FILE: the one place where what a report embeds of the moment or the
# build that wrote it is replaced by a fixed word, so that stored outputs compare byte for
# byte. Empty while no view embeds either (checked by reporting the fixtures twice, a
# minute apart, from a build with another version); add a sed expression here, stated.
golden_normalise() {
	:
}

# golden_generate VIPROF SESSIONS_DIR OUT_DIR: every view of every session directory in
# SESSIONS_DIR (each alone, then all merged) into OUT_DIR/SESSION/NAME: the report file
# (pprof decompressed: what it holds, not the compressor's header) and NAME.log (exit code,
# standard output, standard error). Sessions are named relative to SESSIONS_DIR, from
# inside it, so the paths a report prints are the same on every machine.
golden_generate() {
	local v s args name n rc pid
	v=$(realpath "$1")
	mkdir -p "$3"
	local out
	out=$(realpath "$3")
	(
		cd "$2" || exit 1
		local sessions=()
		for s in */; do
			sessions+=("${s%/}")
		done
		one() {  # one DIR NAME ARGS...
			local d=$1 nm=$2 rc=0
			shift 2
			mkdir -p "$out/$d"
			"$v" report "$@" -o "$out/$d/$nm" >"$out/$d/$nm.stdout" 2>"$out/$d/$nm.stderr" || rc=$?
			[ -e "$out/$d/$nm" ] || : >"$out/$d/$nm"
			if [ -s "$out/$d/$nm" ] && gzip -t "$out/$d/$nm" 2>/dev/null; then
				gzip -dc "$out/$d/$nm" >"$out/$d/$nm.raw" && mv "$out/$d/$nm.raw" "$out/$d/$nm"
			fi
			{
				echo "rc $rc"
				echo "--- stdout"
				cat "$out/$d/$nm.stdout"
				echo "--- stderr"
				cat "$out/$d/$nm.stderr"
			} >"$out/$d/$nm.log"
			rm -f "$out/$d/$nm.stdout" "$out/$d/$nm.stderr"
			golden_normalise "$out/$d/$nm"
			golden_normalise "$out/$d/$nm.log"
		}
		# One job per session (each writes only its own directory): the two vCPUs of a
		# test machine both work.
		for s in "${sessions[@]}"; do
			(
				n=0
				for args in "${VIEWS[@]}"; do
					n=$((n + 1))
					name=$(printf 'v%02d%s' "$n" "$(echo " $args" | tr -c 'A-Za-z0-9.\n-' '_')")
					# shellcheck disable=SC2086
					one "$s" "$name" "$s" $args
				done
				pid=$(first_pid "$v" "$s")
				[ -z "$pid" ] || one "$s" "v25_-F_folded_-p_FIRSTPID" "$s" -F folded -p "$pid"
			) &
		done
		n=0
		for args in "${MERGED_VIEWS[@]}"; do
			n=$((n + 1))
			name=$(printf 'm%02d%s' "$n" "$(echo " $args" | tr -c 'A-Za-z0-9.\n-' '_')")
			# shellcheck disable=SC2086
			one merged "$name" "${sessions[@]}" $args
		done
		wait
	)
}
