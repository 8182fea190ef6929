/* The shared output with a sticky error flag. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/output.h"

int vp_out__open(struct vp_out *o, const char *path)
{
	memset(o, 0, sizeof(*o));
	o->width = 80;
	if (!path || !strcmp(path, "-")) {
		o->f = stdout;
	} else {
		o->f = fopen(path, "we");
		if (!o->f)
			return -errno;
		o->owned = true;
		o->path = strdup(path);
	}
	o->tty = isatty(fileno(o->f));
	/* A terminal's own width; else $COLUMNS; else 120, wide enough that Java method
	 * names in a file or a pipe are not cut to fit a terminal nobody is looking at. */
	const char *cols = getenv("COLUMNS");
	struct winsize ws;
	if (o->tty && ioctl(fileno(o->f), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
		o->width = ws.ws_col;
	else if (cols && atoi(cols) >= 40)
		o->width = atoi(cols);
	else if (!o->tty)
		o->width = 120;
	return 0;
}

void vp_out__write(struct vp_out *o, const void *buf, size_t len)
{
	if (o->err || !len)
		return;
	if (fwrite(buf, 1, len, o->f) != len)
		o->err = errno ? -errno : -EIO;
}

void vp_out__printf(struct vp_out *o, const char *fmt, ...)
{
	if (o->err)
		return;
	va_list ap;
	va_start(ap, fmt);
	if (vfprintf(o->f, fmt, ap) < 0)
		o->err = errno ? -errno : -EIO;
	va_end(ap);
}

void vp_out__puts(struct vp_out *o, const char *s)
{
	vp_out__write(o, s, strlen(s));
}

int vp_out__close(struct vp_out *o)
{
	if (!o->f)
		return o->err;
	if (fflush(o->f) != 0 && !o->err)
		o->err = -errno;
	if (o->owned && fclose(o->f) != 0 && !o->err)
		o->err = -errno;
	o->f = NULL;
	free(o->path);
	o->path = NULL;
	return o->err;
}
