#!/usr/bin/env bash
# The walker's tables at their edge: clang, whose libLLVM and libclang-cpp give one
# process about 2.5 million unwind rules (a page index of some 35,000 entries), compiling
# a generated file under record -g. The page index has 256k entries and the rule and page
# arrays are mapped as the tables grow (sampler-kernel/bpf_backend.c, recorder/unwinder.c),
# not whole at start: every file's tables must still fit and be walked.
#   launch: record -g -F 4999 -- clang ...: at least 2,000,000 rules loaded, no file's
#           tables left out ("did not fit"), no sample lost, and 95% or more of the user
#           stacks walked to their root (99.8% with the arrays mapped whole at start).
#   all:    record -a -g -F 999 -d 2 while clang runs over and over (with the rest of the
#           VM, 3.5 million rules here): no file's tables left out, clang's libraries in
#           the profile, and 60% or more of the user stacks walked to their root (83%:
#           -a loads each new clang's tables at its first sample).
# Usage: test-walk-bigproc.sh launch|all VIPROF   (root; exits 77 to skip).
set -u
mode=$1 vp=$2
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for the BPF sampler"; exit 77; }
command -v clang >/dev/null || { echo "SKIP: no clang here (the process with 2.5 million rules)"; exit 77; }
tmp=$(mktemp -d /tmp/vp-test-walk-bigproc-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# About a second of clang's CPU, in LLVM's optimizer (its code is in libLLVM).
for i in $(seq 0 199); do
	echo "int f$i(int *a, int n) { int s = 0; for (int j = 0; j < n; j++) s += a[j] * $i + (s >> 3); return s; }"
done >"$tmp/big.c"
cc=(clang -O2 -c "$tmp/big.c" -o "$tmp/big.o")
if [ "$mode" = launch ]; then
	"$vp" record -g -F 4999 --backend bpf -o "$tmp/s" -- "${cc[@]}" >"$tmp/out" 2>"$tmp/err"
	rc=$?
else
	# Whole VM for 2 s, clang compiling over and over from before it starts to after it
	# ends. No agent goes into other users' JVMs (the machine is shared).
	( while [ ! -e "$tmp/stop" ]; do "${cc[@]}" || exit 1; done ) &
	loop=$!
	"$vp" record -a -g -F 999 -d 2 --jvm-attach none --backend bpf -o "$tmp/s" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	touch "$tmp/stop"
	wait $loop || { echo "FAIL: clang itself failed"; exit 1; }
fi
cat "$tmp/err"
[ $rc = 0 ] || { echo "FAIL: viprof record exited $rc"; exit 1; }
fail=0
walker=$(grep 'stack walker: unwind tables of' "$tmp/err")
rules=$(sed -E 's/.*files \(([0-9]+) rules.*/\1/' <<<"$walker")
if [ "$mode" = launch ] && [ "${rules:-0}" -lt 2000000 ]; then
	echo "SKIP: clang here loaded only ${rules:-no} rules (not linked with a shared libLLVM): no process at the edge"
	exit 77
fi
if grep -q 'did not fit the walker' "$tmp/err"; then
	echo "FAIL: some files' unwind tables did not fit the walker's maps"; fail=1
fi
"$vp" report "$tmp/s" >"$tmp/report" 2>&1 || { echo "FAIL: viprof report failed"; cat "$tmp/report"; exit 1; }
ends=$(grep '^# user stacks:' "$tmp/report")
lost=$(sed -nE 's/^# lost: ([0-9]+).*/\1/p' "$tmp/report" | head -1)
root=$(sed -nE 's/.*whole \(reached the root\) ([0-9]+)\.[0-9]%.*/\1/p' <<<"$ends")
echo "$mode: ${rules:-?} rules; $ends; lost ${lost:-?}"
# -a loads a process's tables at its first sample: each short clang's first samples walk
# by frame pointer ("tables not loaded yet"), 17% of them here.
want=95
[ "$mode" = all ] && want=60
if [ "${root:-0}" -lt $want ]; then
	echo "FAIL: only ${root:-0}% of the user stacks reached their root (want $want% or more)"; fail=1
fi
if [ "$mode" = launch ] && [ "${lost:-1}" != 0 ]; then
	echo "FAIL: ${lost:-an unknown number of} samples lost at -F 4999"; fail=1
fi
if [ "$mode" = all ] && ! "$vp" report --comm clang "$tmp/s" 2>/dev/null | grep -qE 'libLLVM|libclang'; then
	echo "FAIL: the whole-VM profile holds nothing of clang's libraries"; fail=1
fi
[ $fail = 0 ] && echo "PASS: $mode"
exit $fail
