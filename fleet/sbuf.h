/* A growing, NUL-terminated text buffer with a sticky error: the rows the encoder sends
 * and the SQL the reader asks, in fleet/ only. */
#ifndef VIPROF_FLEET_SBUF_H
#define VIPROF_FLEET_SBUF_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

struct vp_sbuf {
	char *p;
	size_t n, cap;
	int err;            /* 0, or -ENOMEM once a growth failed (later calls do nothing) */
};

static inline void vp_sbuf__put(struct vp_sbuf *b, const char *s, size_t n)
{
	if (b->err || vp_grow((void **)&b->p, &b->cap, b->n + n + 1, 1)) {
		b->err = -ENOMEM;
		return;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

/* Formatted, whatever its length (formatted twice when it does not fit 256 bytes). */
static inline void vp_sbuf__printf(struct vp_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void vp_sbuf__printf(struct vp_sbuf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(tmp)) {
		vp_sbuf__put(b, tmp, (size_t)n);
		return;
	}
	if (b->err || vp_grow((void **)&b->p, &b->cap, b->n + (size_t)n + 1, 1)) {
		b->err = -ENOMEM;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->n += (size_t)n;
}

#endif
