/* common/json: the one JSON string escaper. Each case is a string some writer met (a
 * thread name with a control byte, a Latin-1 file name, a JIT name with '<' inside an
 * HTML page) and the exact bytes it must become. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "test.h"

struct buf {
	char s[4096];
	size_t n;
};

static void sink(void *ctx, const char *p, size_t n)
{
	struct buf *b = ctx;
	if (b->n + n >= sizeof(b->s))
		FAIL("output longer than %zu bytes", sizeof(b->s));
	memcpy(b->s + b->n, p, n);
	b->n += n;
	b->s[b->n] = 0;
}

static const char *quote(const char *s, unsigned flags)
{
	static struct buf b;
	b.n = 0;
	b.s[0] = 0;
	vp_json_quote(s, flags, sink, &b);
	return b.s;
}

int main(void)
{
	ASSERT_STREQ(quote("plain", 0), "\"plain\"");
	ASSERT_STREQ(quote(NULL, 0), "\"\"");
	ASSERT_STREQ(quote("a\"b\\c", 0), "\"a\\\"b\\\\c\"");
	ASSERT_STREQ(quote("t\tn\nr\rb\bf\f", 0), "\"t\\tn\\nr\\rb\\bf\\f\"");
	ASSERT_STREQ(quote("\x01\x1f\x7f", 0), "\"\\u0001\\u001f\\u007f\"");
	/* Valid UTF-8 passes through; each invalid byte becomes one U+FFFD. */
	ASSERT_STREQ(quote("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 0), "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
	ASSERT_STREQ(quote("Latin-1 caf\xe9!", 0), "\"Latin-1 caf\\ufffd!\"");
	ASSERT_STREQ(quote("\xc0\xaf", 0), "\"\\ufffd\\ufffd\"");            /* overlong '/' */
	ASSERT_STREQ(quote("\xed\xa0\x80", 0), "\"\\ufffd\\ufffd\\ufffd\""); /* surrogate */
	ASSERT_STREQ(quote("\xf4\x90\x80\x80", 0), "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* > U+10FFFF */
	ASSERT_STREQ(quote("end\xe2\x82", 0), "\"end\\ufffd\\ufffd\"");      /* truncated */
	/* HTML-safe output cannot close the <script> element it sits in. */
	ASSERT_STREQ(quote("</script>&", VP_JSON_HTML_SAFE), "\"\\u003c/script\\u003e\\u0026\"");
	ASSERT_STREQ(quote("</script>&", 0), "\"</script>&\"");
	/* Longer than the escaper's buffer, with escapes across the flush points. */
	char big[2000];
	for (size_t i = 0; i < sizeof(big) - 1; i++)
		big[i] = (i % 7 == 0) ? '\n' : 'x';
	big[sizeof(big) - 1] = 0;
	const char *q = quote(big, 0);
	size_t nl = 0;
	for (size_t i = 0; i < sizeof(big) - 1; i++)
		nl += big[i] == '\n';
	ASSERT_EQ(strlen(q), sizeof(big) - 1 + nl + 2);
	for (const char *p = q + 1; *p != '"'; p++) {
		if (*p == '\\') {
			ASSERT_EQ(p[1], 'n');
			p++;
		} else {
			ASSERT_EQ(*p, 'x');
		}
	}
	/* The stdio form writes the same bytes. */
	char *mem = NULL;
	size_t memn = 0;
	FILE *f = open_memstream(&mem, &memn);
	ASSERT_NOT_NULL(f);
	vp_json_fputs(f, "x\xff<", VP_JSON_HTML_SAFE);
	ASSERT_OK(fclose(f));
	ASSERT_STREQ(mem, "\"x\\ufffd\\u003c\"");
	free(mem);
	return 0;
}
