/* The one JSON string escaper: every writer that emits JSON (session metadata, the JSON,
 * HTML and pprof reports, probe --json) quotes strings through it, so that they all
 * agree on what a valid string is. */
#ifndef VIPROF_COMMON_JSON_H
#define VIPROF_COMMON_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Also escape '<', '>' and '&' as \u003c etc., so that the string can sit inside an
 * HTML <script> element without closing it. */
#define VP_JSON_HTML_SAFE 1u

/* Receives the quoted string in pieces of at most a few hundred bytes. */
typedef void (*vp_json_sink)(void *ctx, const char *p, size_t n);

/* Writes s (NULL counts as "") as a quoted JSON string (RFC 8259): quotes, backslashes,
 * control characters and DEL escaped; invalid UTF-8 (stray continuation bytes, overlong
 * forms, surrogates, code points past U+10FFFF, truncated sequences) replaced by
 * U+FFFD one byte at a time, so that the output is always valid UTF-8. */
void vp_json_quote(const char *s, unsigned flags, vp_json_sink sink, void *ctx);

/* vp_json_quote to a stdio stream; errors stay in ferror(f). */
void vp_json_fputs(FILE *f, const char *s, unsigned flags);

#endif
