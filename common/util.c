/* Small shared helpers: see util.h. */
#include "common/util.h"

#include <stdio.h>

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
