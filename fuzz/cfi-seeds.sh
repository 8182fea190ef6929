#!/bin/bash
# Makes fuzz/corpus/fuzz-cfi/: small ELF files (under 6 KB) whose unwind information has
# the shapes the builder meets: .eh_frame at -O2 (pushes, a variable-size frame whose
# CFA moves to rbp, a tail call) and at -O0 with frame pointers, .debug_frame only, and a
# shared object with .eh_frame_hdr. No libc: _start exits by a system call.
#   bash fuzz/cfi-seeds.sh      (gcc and binutils; the committed seeds came from gcc 12)
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)/corpus/fuzz-cfi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/s.c" <<'EOF'
#include <alloca.h>
__attribute__((noinline)) long leaf(long x) { return x * 3 + 1; }
__attribute__((noinline)) long saver(long a, long b, long c) {
	long r = 0;
	for (long i = 0; i < a; i++) r += leaf(i ^ b) * c;
	return r;
}
__attribute__((noinline)) long vla(long n) {
	volatile char *p = alloca(n & 0xff);
	for (long i = 0; i < (n & 0xff); i++) p[i] = (char)i;
	return saver(n, p[0], 3);
}
__attribute__((noinline)) long tail(long n) { return vla(n + 1); }
void _start(void) {
	long r = tail(7);
	__asm__ volatile("mov %0, %%rdi; mov $60, %%eax; syscall" :: "r"(r & 0x7f) : "rdi", "rax");
	__builtin_unreachable();
}
EOF
small="-fno-stack-protector -nostdlib -Wl,--build-id=none -Wl,-z,max-page-size=4096 -Wl,-z,noseparate-code"
mkdir -p "$out"
gcc -O2 -fomit-frame-pointer -static $small -o "$out/eh-o2" "$tmp/s.c" && strip "$out/eh-o2"
gcc -O0 -fno-omit-frame-pointer -static $small -o "$out/eh-o0" "$tmp/s.c" && strip "$out/eh-o0"
gcc -O2 -fomit-frame-pointer -fno-asynchronous-unwind-tables -g -static $small -o "$tmp/dbg" "$tmp/s.c"
objcopy --strip-all --keep-section=.debug_frame "$tmp/dbg" "$out/dbg-only"
gcc -O2 -fPIC -shared $small -o "$out/lib.so" "$tmp/s.c" && strip "$out/lib.so"
ls -l "$out"
