#include <stdio.h>
#include <string.h>

#include "common/json.h"

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when it is not one. Overlong
 * forms, surrogates and code points past U+10FFFF count as invalid. The string's NUL
 * ends a truncated sequence because it is not a continuation byte. */
static int utf8_len(const unsigned char *s)
{
	unsigned c = s[0];
	if (c < 0x80)
		return 1;
	int n;
	unsigned cp;
	if ((c & 0xe0) == 0xc0) {
		n = 2;
		cp = c & 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		n = 3;
		cp = c & 0x0f;
	} else if ((c & 0xf8) == 0xf0) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	static const unsigned min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
	if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void vp_json_quote(const char *s, unsigned flags, vp_json_sink sink, void *ctx)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	char buf[512];
	size_t n = 0;
	buf[n++] = '"';
	while (*p) {
		/* Flush early so that one escape (at most 6 bytes) always fits. */
		if (n > sizeof(buf) - 8) {
			sink(ctx, buf, n);
			n = 0;
		}
		unsigned c = *p;
		if (c == '"' || c == '\\') {
			buf[n++] = '\\';
			buf[n++] = (char)c;
			p++;
		} else if (c < 0x20 || c == 0x7f) {
			static const char esc[] = { ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't' };
			if (c < sizeof(esc) && esc[c]) {
				buf[n++] = '\\';
				buf[n++] = esc[c];
			} else {
				n += (size_t)snprintf(buf + n, 7, "\\u%04x", c);
			}
			p++;
		} else if ((flags & VP_JSON_HTML_SAFE) && (c == '<' || c == '>' || c == '&')) {
			n += (size_t)snprintf(buf + n, 7, "\\u%04x", c);
			p++;
		} else if (c < 0x80) {
			buf[n++] = (char)c;
			p++;
		} else {
			int l = utf8_len(p);
			if (l == 0) {
				memcpy(buf + n, "\\ufffd", 6);
				n += 6;
				p++;
			} else {
				memcpy(buf + n, p, (size_t)l);
				n += (size_t)l;
				p += l;
			}
		}
	}
	buf[n++] = '"';
	sink(ctx, buf, n);
}

static void file_sink(void *ctx, const char *p, size_t n)
{
	fwrite(p, 1, n, ctx);
}

void vp_json_fputs(FILE *f, const char *s, unsigned flags)
{
	vp_json_quote(s, flags, file_sink, f);
}
