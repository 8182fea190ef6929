/* Small shared helpers: see util.h. */
#include "common/util.h"

#include <elf.h>
#include <errno.h>
#include <math.h>
#include <ctype.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

const void *vp_vdso_image(size_t *len)
{
	const unsigned char *img = (const void *)getauxval(AT_SYSINFO_EHDR);
	if (!img || memcmp(img, ELFMAG, SELFMAG) || img[EI_CLASS] != ELFCLASS64)
		return NULL;
	const Elf64_Ehdr *eh = (const void *)img;
	size_t n = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	if (n > (1u << 20))
		return NULL;
	*len = n;
	return img;
}

void vp_vset_err(char *err, size_t len, const char *fmt, va_list ap)
{
	if (!err || !len)
		return;
	vsnprintf(err, len, fmt, ap);
}

void vp_set_err(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vp_vset_err(err, len, fmt, ap);
	va_end(ap);
}

int vp_err_no_process(char *err, size_t len, long pid)
{
	vp_set_err(err, len, "no process %ld is running (it exited, or the pid is wrong); find the pid with 'jps -l' "
		   "(JVMs) or 'ps -e'", pid);
	return -ESRCH;
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int vp_write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	int64_t deadline = -1;
	while (n) {
		ssize_t k = write(fd, b, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			/* A non-blocking pipe to a reader that fell behind (the service's
			 * stream to a client): wait for room, but not for ever, and the
			 * whole write, not each wait: a reader that takes a page now and
			 * then would otherwise hold the writer as long as it likes. */
			if (errno == EAGAIN) {
				int64_t now = mono_ms();
				if (deadline < 0)
					deadline = now + VP_WRITE_STALL_MS;
				if (now >= deadline)
					return -ETIMEDOUT;
				struct pollfd pf = { .fd = fd, .events = POLLOUT };
				int r = poll(&pf, 1, (int)(deadline - now));
				if (r > 0 && !(pf.revents & (POLLERR | POLLHUP)))
					continue;
				if (r < 0 && errno == EINTR)
					continue;
				return r == 0 ? -ETIMEDOUT : -EPIPE;
			}
			return -errno;
		}
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

ssize_t vp_read_full(int fd, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = read(fd, (uint8_t *)p + got, n - got);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (ssize_t)got;
}

long long vp_parse_num(const char *s, long long min, long long max)
{
	if (!s || !*s || *s == '+' || *s == '-')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v > (unsigned long long)max || (long long)v < min)
		return -1;
	return (long long)v;
}

int vp_read_int_file(const char *path, int dflt)
{
	FILE *f = fopen(path, "re");
	int v = dflt;
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = dflt;
		fclose(f);
	}
	return v;
}

void vp_hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = '\0';
}

int vp_grow(void **v, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 16;
	while (n < need) {
		if (n > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		n *= 2;
	}
	void *p = realloc(*v, n * elem);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = n;
	return 0;
}

void vp_timing(const char *what)
{
	/* -1 until the first call decides; then 0 (off) or 1 (on). */
	static int on = -1;
	static uint64_t first, prev;
	struct timespec ts;
	struct rusage ru;

	if (on == 0)
		return;
	if (on < 0) {
		const char *v = getenv("VIPROF_DEBUG_TIMING");
		on = v && *v && *v != '0';
		if (!on)
			return;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	uint64_t f = 0, p;
	__atomic_compare_exchange_n(&first, &f, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	f = f ? f : now;
	p = __atomic_exchange_n(&prev, now, __ATOMIC_RELAXED);
	p = p ? p : now;
	getrusage(RUSAGE_SELF, &ru);
	double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
		     (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
	fprintf(stderr, "viprof timing: %9.3f ms (+%8.3f)  cpu %8.3f ms  %s\n", (double)(now - f) / 1e6,
		(double)(now - p) / 1e6, cpu, what);
}

struct vp_arena_block {
	struct vp_arena_block *next;
	max_align_t pad[];          /* the objects, aligned like malloc's */
};

void *vp_arena__alloc(struct vp_arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (n > a->left) {
		size_t size = n > (1u << 20) ? n : (1u << 20);
		struct vp_arena_block *b = malloc(sizeof(*b) + size);
		if (!b)
			return NULL;
		b->next = a->head;
		a->head = b;
		a->cur = (char *)b->pad;
		a->left = size;
	}
	void *p = a->cur;
	a->cur += n;
	a->left -= n;
	memset(p, 0, n);
	return p;
}

void vp_arena__free(struct vp_arena *a)
{
	for (struct vp_arena_block *b = a->head, *n; b; b = n) {
		n = b->next;
		free(b);
	}
	a->head = NULL;
	a->cur = NULL;
	a->left = 0;
}

/* One "Name:\t..." line of /proc/PID/status, or NULL. */
static char *status_line(pid_t pid, const char *name, char *line, size_t len)
{
	char path[64];
	size_t n = strlen(name);
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	if (!(f = fopen(path, "re")))
		return NULL;
	while (fgets(line, (int)len, f)) {
		if (!strncmp(line, name, n) && line[n] == ':') {
			fclose(f);
			return line + n + 1;
		}
	}
	fclose(f);
	return NULL;
}

int vp_perm__explain(pid_t pid, char *buf, size_t len)
{
	char line[256], *v;
	unsigned long long cap = 0;
	unsigned int ruid, euid, suid, fsuid;
	uid_t me = geteuid();

	if ((v = status_line(0, "CapEff", line, sizeof(line))))
		cap = strtoull(v, NULL, 16);
	if (cap & (1ull << 19))     /* CAP_SYS_PTRACE: ptrace access to anyone */
		return 0;
	if (!(v = status_line(pid, "Uid", line, sizeof(line))) ||
	    sscanf(v, "%u %u %u %u", &ruid, &euid, &suid, &fsuid) != 4)
		return 0;
	/* ptrace's rule (PTRACE_MODE_REALCREDS): our uid must be the target's real,
	 * effective and saved uid alike. */
	if (ruid == me && euid == me && suid == me)
		return 0;
	vp_set_err(buf, len, "process %d belongs to uid %u and you are uid %u: the kernel lets you profile only "
		   "processes you could ptrace, whatever perf_event_paranoid says; run viprof as uid %u, or as root "
		   "(or with CAP_SYS_PTRACE)", (int)pid, euid != me ? euid : ruid != me ? ruid : suid, (unsigned)me,
		   euid != me ? euid : ruid != me ? ruid : suid);
	return 1;
}

/* The length (2-4) of the well-formed UTF-8 sequence at s and its code point, or 0
 * (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short). */
static size_t utf8_seq(const unsigned char *s, uint32_t *cp)
{
	size_t n;
	uint32_t c, min;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, c = s[0] & 0x1f, min = 0x80;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, c = s[0] & 0x0f, min = 0x800;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, c = s[0] & 0x07, min = 0x10000;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;   /* also the NUL that ends the string early */
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

/* Characters that change how a terminal or a viewer shows the rest of the line: C1
 * controls (U+0080-U+009F; CSI is U+009B), the bidi marks, embeddings, overrides and
 * isolates (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069) and the line and
 * paragraph separators (U+2028, U+2029). */
static bool redraws(uint32_t c)
{
	return (c >= 0x80 && c <= 0x9f) || c == 0x61c || c == 0x200e || c == 0x200f || (c >= 0x2028 && c <= 0x202e) ||
	       (c >= 0x2066 && c <= 0x2069);
}

void vp_escape_controls(const char *s, char *out, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;
	if (!len)
		return;
	while (*p) {
		char esc[16];
		size_t n = 0, take = 1;
		uint32_t cp = 0;
		if (*p >= 0x80) {
			/* Well-formed UTF-8 passes whole, but for the characters that redraw the
			 * line; those, and every byte of what is not UTF-8, become \xNN each. */
			size_t k = utf8_seq(p, &cp);
			take = k ? k : 1;
			if (k && !redraws(cp)) {
				memcpy(esc, p, k);
				n = k;
			} else {
				for (size_t i = 0; i < take; i++) {
					esc[n++] = '\\';
					esc[n++] = 'x';
					esc[n++] = hex[p[i] >> 4];
					esc[n++] = hex[p[i] & 15];
				}
			}
		} else if (*p < 0x20 || *p == 0x7f) {
			esc[n++] = '\\';
			esc[n++] = 'x';
			esc[n++] = hex[*p >> 4];
			esc[n++] = hex[*p & 15];
		} else if (*p == '\\') {
			esc[n++] = '\\';
			esc[n++] = '\\';
		} else {
			esc[n++] = (char)*p;
		}
		if (o + n >= len)
			break;
		memcpy(out + o, esc, n);
		o += n;
		p += take;
	}
	out[o] = '\0';
}

double vp_parse_duration(const char *s)
{
	static const struct { const char *unit; double mult; } units[] = {
		{ "", 1 }, { "s", 1 }, { "ms", 1e-3 }, { "us", 1e-6 }, { "m", 60 }, { "min", 60 }, { "h", 3600 }, { "d", 86400 },
	};
	char *end;
	if (!s || !*s || *s == '-' || *s == '+' || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].unit))
			return v * units[i].mult;
	return -1;
}
