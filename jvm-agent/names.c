#include "jvm-agent/names.h"

#include <string.h>

struct sbuf {
	char *p;
	size_t len, cap;
};

static void put(struct sbuf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n && b->len + 1 < b->cap; i++)
		b->p[b->len++] = s[i];
	b->p[b->len] = '\0';
}

static void puts_(struct sbuf *b, const char *s) { put(b, s, strlen(s)); }

static const char *primitive(char c)
{
	switch (c) {
	case 'B': return "byte";
	case 'C': return "char";
	case 'D': return "double";
	case 'F': return "float";
	case 'I': return "int";
	case 'J': return "long";
	case 'S': return "short";
	case 'Z': return "boolean";
	case 'V': return "void";
	default: return NULL;
	}
}

/* Appends the type at *s, advancing past it; simple=true drops the package. Returns 0, or
 * -1 if the signature is malformed (then *s is left where parsing stopped). */
static int put_type(struct sbuf *b, const char **s, int simple)
{
	int dims = 0;
	while (**s == '[') {
		dims++;
		(*s)++;
	}
	const char *prim = primitive(**s);
	if (prim) {
		puts_(b, prim);
		(*s)++;
	} else if (**s == 'L') {
		const char *start = *s + 1, *end = strchr(start, ';');
		if (!end)
			return -1;
		if (simple) {
			for (const char *q = start; q < end; q++)
				if (*q == '/')
					start = q + 1;
		}
		for (const char *q = start; q < end; q++)
			put(b, *q == '/' ? "." : q, 1);
		*s = end + 1;
	} else {
		return -1;
	}
	while (dims--)
		puts_(b, "[]");
	return 0;
}

void vp_java_readable_class(const char *class_sig, char *out, size_t outlen)
{
	struct sbuf b = { out, 0, outlen };
	if (!outlen)
		return;
	out[0] = '\0';
	const char *s = class_sig ? class_sig : "";
	if (*s == 'L' || *s == '[') {
		if (put_type(&b, &s, 0))
			puts_(&b, class_sig);
	} else {
		puts_(&b, s);
	}
}

void vp_java_readable_method(const char *name, const char *sig, char *out, size_t outlen)
{
	struct sbuf b = { out, 0, outlen };
	if (!outlen)
		return;
	out[0] = '\0';
	puts_(&b, name ? name : "?");
	const char *s = sig ? sig : "";
	if (*s != '(')
		return;
	s++;
	puts_(&b, "(");
	for (int first = 1; *s && *s != ')'; first = 0) {
		if (!first)
			puts_(&b, ", ");
		if (put_type(&b, &s, 1))
			break;
	}
	puts_(&b, ")");
}

void vp_java_readable_name(const char *class_sig, const char *name, const char *sig,
			   char *out, size_t outlen)
{
	if (!outlen)
		return;
	vp_java_readable_class(class_sig, out, outlen);
	size_t n = strlen(out);
	if (n + 1 < outlen) {
		out[n++] = '.';
		out[n] = '\0';
		vp_java_readable_method(name, sig, out + n, outlen - n);
	}
}
