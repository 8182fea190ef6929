/* Where a report goes: a file or stdout, with a sticky error. */
#ifndef VIPROF_COMMON_OUTPUT_H
#define VIPROF_COMMON_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Output with a sticky error: once a write fails, every later call is a no-op and
 * close() returns the first error. */
struct vp_out {
	FILE *f;
	int err;            /* 0 or the first -errno */
	bool owned;         /* close f on close */
	bool tty;           /* writing to a terminal */
	int width;          /* terminal columns (80 when not a terminal) */
	char *path;
};
int vp_out__open(struct vp_out *o, const char *path);   /* NULL or "-" = stdout */
void vp_out__write(struct vp_out *o, const void *buf, size_t len);
void vp_out__printf(struct vp_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vp_out__puts(struct vp_out *o, const char *s);
int vp_out__close(struct vp_out *o);   /* returns 0 or the first error */

#endif
