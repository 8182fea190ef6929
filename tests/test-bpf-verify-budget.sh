#!/bin/bash
# Every `viprof record -g` pays the verifier's walk over on_sample at start-up (issue 37:
# 80,616 instructions processed, 0.2-0.3 s of CPU, about half of a short recording's
# start-up). The walk is a global BPF function (profile.bpf.c sample_walk), its rare steps
# too (walker.bpf.h WALK_RARE), and the mapping search no longer makes the verifier track
# its bounds exactly (mapping_index), so the verifier walks the walk once: 20,349
# on Linux 6.18. This test keeps it there: on_sample with -g (the table
# walk) must verify in at most 40,000 instructions (half the old count), as the kernel's
# own statistics line says (VIPROF_DEBUG_TIMING=1). A count, not a time: it does not
# depend on the machine's load. Other kernels count somewhat differently; a change that
# inlines the walk again (or makes a branch multiply the states) doubles it.
#   usage: test-bpf-verify-budget.sh VIPROF        exit 77: cannot run here
set -u
viprof=$1
budget=40000
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (the BPF sampler of record -g)"; exit 77; }
work=$(mktemp -d /tmp/vp-verify-budget.XXXXXX)
trap 'rm -rf "$work"' EXIT
VIPROF_DEBUG_TIMING=1 "$viprof" record -q -g -F 999 --backend bpf -o "$work/s" -- /bin/true >"$work/r.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
	if grep -qiE 'refused|not permitted|no BTF|not supported' "$work/r.log"; then
		cat "$work/r.log"; echo "SKIP: the kernel does not load the BPF sampler here"; exit 77
	fi
	cat "$work/r.log"; echo "FAIL: viprof record -g exited $rc"; exit 1
fi
n=$(sed -n 's/.*bpf: on_sample: processed \([0-9]*\) insns.*/\1/p' "$work/r.log" | head -1)
[ -n "$n" ] || { cat "$work/r.log"; echo "SKIP: the kernel printed no verifier statistics for on_sample"; exit 77; }
echo "on_sample with -g: $n instructions verified (budget $budget)"
[ "$n" -le "$budget" ] || { echo "FAIL: on_sample verified $n instructions, more than $budget: is the walk inlined again?"; exit 1; }
echo PASS
