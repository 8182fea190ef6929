/* Small helpers shared by every viprof component, the JVMTI agent included (vp_common
 * is linked into its .so; these stay hidden there, as everything not marked is). */
#ifndef VIPROF_COMMON_UTIL_H
#define VIPROF_COMMON_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

/* Formats an error message into err[len]; does nothing if err is NULL or len is 0, so
 * callers can pass an optional error buffer straight through. */
void vp_set_err(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void vp_vset_err(char *err, size_t len, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
/* The one message for a pid that names no running process (record -p, attach, stat, the
 * service): the same mistake gets the same words and the same fix. Returns -ESRCH. */
int vp_err_no_process(char *err, size_t len, long pid);

/* Writes all n bytes, retrying after EINTR and short writes. On a non-blocking fd
 * whose reader has not taken the rest VP_WRITE_STALL_MS after the first time it
 * was full, -ETIMEDOUT (-EPIPE when the reader is gone). 0 or -errno. */
#define VP_WRITE_STALL_MS 2000
int vp_write_all(int fd, const void *p, size_t n);

/* Reads exactly n bytes, retrying after EINTR and short reads; returns n, a short
 * count at EOF, or -errno. */
ssize_t vp_read_full(int fd, void *p, size_t n);

/* A whole decimal number in [min, max] (0 <= min <= max), without a sign, or -1: for
 * command-line values, whose callers then say what they expected. */
long long vp_parse_num(const char *s, long long min, long long max);

/* The decimal number at the start of the file at path (a sysctl such as
 * /proc/sys/kernel/perf_event_paranoid), or dflt when it cannot be read. */
int vp_read_int_file(const char *path, int dflt);

/* The vDSO this process has mapped (the running kernel's, for 64-bit processes): its
 * ELF image up to the end of its section headers, or NULL when there is none or it is
 * not a 64-bit ELF of at most 1 MiB. */
const void *vp_vdso_image(size_t *len);

/* Grows the array *v of *cap elements of elem bytes so that it holds at least need
 * (doubling, at least 16). 0, or -ENOMEM with the array untouched. */
int vp_grow(void **v, size_t *cap, size_t need, size_t elem);
/* b[0..n) as 2n lower-case hex digits and a NUL, into out. */
void vp_hex(const uint8_t *b, size_t n, char *out);

/* A bump allocator for many small objects freed together (a profile's interned stacks):
 * no per-object header or free, blocks of at least 1 MiB. Zero-initialise with {0}. */
struct vp_arena {
	struct vp_arena_block *head;
	size_t left;
	char *cur;
};
/* n bytes, 16-byte aligned and zeroed, valid until vp_arena__free; NULL on ENOMEM. */
void *vp_arena__alloc(struct vp_arena *a, size_t n);
void vp_arena__free(struct vp_arena *a);   /* and ready for reuse */
/* Why perf_event_open on process pid may be refused with EACCES/EPERM whatever
 * perf_event_paranoid says: the kernel asks for ptrace read access to it, which another
 * user's process (or one that is not dumpable) denies without CAP_SYS_PTRACE. Writes a
 * one-line cause and fix into buf and returns 1 when that is the case, else 0 (buf
 * untouched: then paranoia or capabilities are the cause). */
int vp_perm__explain(pid_t pid, char *buf, size_t len);

/* qsort that accepts an empty array with a NULL base (qsort itself must not be given a
 * NULL pointer, even for n = 0: the sanitizer build rejects it). */
static inline void vp_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

/* Start-up and shutdown phases, for finding where a short recording's time goes: with
 * VIPROF_DEBUG_TIMING set in the environment, each call prints one line to stderr with
 * the wall time since the first call (made at the start of main), the step since the
 * previous call, and the process's CPU time so far. Without the variable it costs one
 * cached branch. Safe to call from any thread (lines may interleave). */
void vp_timing(const char *what);

/* s into out (NUL-terminated, cut at a whole character to fit len) with control
 * characters (below 0x20, and 0x7f) as \xNN and backslashes doubled: for log lines
 * that carry bytes someone else chose. Bytes of 0x80 and up pass only as well-formed
 * UTF-8 that cannot redraw the line: C1 controls (raw or encoded), bidi overrides,
 * isolates and marks, line separators, and whatever is not UTF-8 become \xNN, each byte. */
void vp_escape_controls(const char *s, char *out, size_t len);

/* A duration in seconds from "2", "2.5", "2s", "500ms", "90m", "24h" or "7d" (as
 * record -d, report --time and serve take them); -1 when it is not one. */
double vp_parse_duration(const char *s);

#endif
