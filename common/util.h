/* Small helpers shared by every viprof component, the JVMTI agent included (vp_common
 * is linked into its .so; these stay hidden there, as everything not marked is). */
#ifndef VIPROF_COMMON_UTIL_H
#define VIPROF_COMMON_UTIL_H

#include <stdarg.h>
#include <stddef.h>

/* Formats an error message into err[len]; does nothing if err is NULL or len is 0, so
 * callers can pass an optional error buffer straight through. */
void vp_set_err(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void vp_vset_err(char *err, size_t len, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

#endif
