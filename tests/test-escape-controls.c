/* common/util.h's vp_escape_controls, the audit line's escaper (issue 31): C0 controls,
 * DEL and backslash as before; C1 controls, raw (a lone 0x9b is CSI to some terminals)
 * or UTF-8 encoded (U+0080-U+009F); the Unicode bidi overrides, isolates and marks that
 * redraw a line's order (U+202A-202E, U+2066-2069, U+200E/F, U+061C) and the line and
 * paragraph separators; and any byte that is not part of well-formed UTF-8: all as
 * \xNN, each byte. Other UTF-8 text stays as it is; the output is cut at a whole escape. */
#include <string.h>

#include "common/util.h"
#include "test.h"

static void check(const char *in, const char *want)
{
	char out[256];
	vp_escape_controls(in, out, sizeof(out));
	ASSERT_STREQ(out, want);
}

int main(void)
{
	check("plain text", "plain text");
	check("a\nb\r\033[2K\x7f\\", "a\\x0ab\\x0d\\x1b[2K\\x7f\\\\");
	/* C1, raw and encoded. */
	check("x\x9b" "31m", "x\\x9b31m");
	check("x\xc2\x9b" "31m", "x\\xc2\\x9b31m");
	check("\xc2\x80\xc2\x9f", "\\xc2\\x80\\xc2\\x9f");
	/* Bidi overrides and isolates (RLO hides what follows behind what precedes). */
	check("uid=0 \xe2\x80\xae" "kcatta", "uid=0 \\xe2\\x80\\xaekcatta");
	check("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad",
	      "\\xe2\\x80\\xaa\\xe2\\x80\\xab\\xe2\\x80\\xac\\xe2\\x80\\xad");
	check("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9",
	      "\\xe2\\x81\\xa6\\xe2\\x81\\xa7\\xe2\\x81\\xa8\\xe2\\x81\\xa9");
	check("\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c", "\\xe2\\x80\\x8e\\xe2\\x80\\x8f\\xd8\\x9c");
	check("a\xe2\x80\xa8" "b\xe2\x80\xa9", "a\\xe2\\x80\\xa8b\\xe2\\x80\\xa9");
	/* Well-formed text that is none of them stays. */
	check("caf\xc3\xa9 \xe2\x80\x94 \xe2\x82\xac \xf0\x9f\x99\x82 \xe2\x80\xaf", "caf\xc3\xa9 \xe2\x80\x94 \xe2\x82\xac \xf0\x9f\x99\x82 \xe2\x80\xaf");
	/* Not UTF-8: stray continuation, overlong, surrogate, past U+10FFFF, cut short. */
	check("\x80", "\\x80");
	check("\xc0\xaf", "\\xc0\\xaf");
	check("\xed\xa0\x80", "\\xed\\xa0\\x80");
	check("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");
	check("ab\xe2\x80", "ab\\xe2\\x80");
	check("\xe2\x80" "a", "\\xe2\\x80a");
	/* Cut at a whole escape, never inside one. */
	char small[8];
	vp_escape_controls("ab\x9b" "cd", small, sizeof(small));
	ASSERT_STREQ(small, "ab\\x9bc");
	vp_escape_controls("abcde\x9b", small, sizeof(small));
	ASSERT_STREQ(small, "abcde");
	printf("PASS\n");
	return 0;
}
