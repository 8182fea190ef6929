/* `viprof probe`: the built binary's --json output is one valid JSON object (checked by
 * a small validator here, and by python3 when present) naming the hypervisor that
 * CPUID reports; the text output ends with the recommendation; the session metadata
 * callback agrees with both. */
#include <errno.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "hv-glue/probe.h"
#include "common/util.h"
#include "test.h"
#include "test-run.h"

#ifndef VIPROF_BIN
#error "VIPROF_BIN must name the built viprof binary"
#endif

/* ---- a strict little JSON validator (RFC 8259) that also picks values by path ---- */

struct jp {
	const char *s;
	char path[256];      /* dotted key path of the current value, e.g. "hypervisor.name" */
	const char *want[8]; /* paths whose string/literal values to capture */
	char got[8][2048];
	int nwant;
};

static void ws(struct jp *j)
{
	while (*j->s == ' ' || *j->s == '\t' || *j->s == '\n' || *j->s == '\r')
		j->s++;
}

static bool jstring(struct jp *j, char *out, size_t outlen)
{
	size_t n = 0;
	if (*j->s != '"')
		return false;
	j->s++;
	for (;;) {
		unsigned char c = (unsigned char)*j->s++;
		if (c == '"')
			break;
		if (c < 0x20)
			return false;  /* raw control characters (incl. NUL) are invalid */
		if (c == '\\') {
			c = (unsigned char)*j->s++;
			if (c == 'u') {
				for (int i = 0; i < 4; i++)
					if (!strchr("0123456789abcdefABCDEF", *j->s++) || !j->s[-1])
						return false;
				c = '?';
			} else if (strchr("\"\\/bfnrt", c) && c) {
				c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
			} else {
				return false;
			}
		}
		if (out && n + 1 < outlen)
			out[n++] = (char)c;
	}
	if (out && outlen)
		out[n] = '\0';
	return true;
}

static bool jvalue(struct jp *j);

static void capture(struct jp *j, const char *start)
{
	for (int i = 0; i < j->nwant; i++)
		if (!strcmp(j->path, j->want[i]))
			snprintf(j->got[i], sizeof(j->got[i]), "%.*s", (int)(j->s - start), start);
}

static bool jobject(struct jp *j)
{
	j->s++;
	ws(j);
	if (*j->s == '}') {
		j->s++;
		return true;
	}
	size_t plen = strlen(j->path);
	for (;;) {
		char key[128];
		ws(j);
		if (!jstring(j, key, sizeof(key)))
			return false;
		ws(j);
		if (*j->s++ != ':')
			return false;
		snprintf(j->path + plen, sizeof(j->path) - plen, "%s%s", plen ? "." : "", key);
		if (!jvalue(j))
			return false;
		j->path[plen] = '\0';
		ws(j);
		if (*j->s == ',') {
			j->s++;
			continue;
		}
		if (*j->s++ != '}')
			return false;
		return true;
	}
}

static bool jarray(struct jp *j)
{
	j->s++;
	ws(j);
	if (*j->s == ']') {
		j->s++;
		return true;
	}
	size_t plen = strlen(j->path);
	for (int i = 0;; i++) {
		snprintf(j->path + plen, sizeof(j->path) - plen, "[%d]", i);
		if (!jvalue(j))
			return false;
		j->path[plen] = '\0';
		ws(j);
		if (*j->s == ',') {
			j->s++;
			continue;
		}
		return *j->s++ == ']';
	}
}

static bool jvalue(struct jp *j)
{
	ws(j);
	const char *start = j->s;
	bool ok;
	if (*j->s == '{')
		return jobject(j);
	if (*j->s == '[')
		return jarray(j);
	if (*j->s == '"') {
		char buf[2048];
		ok = jstring(j, buf, sizeof(buf));
		if (ok)
			for (int i = 0; i < j->nwant; i++)
				if (!strcmp(j->path, j->want[i]))
					snprintf(j->got[i], sizeof(j->got[i]), "%s", buf);
		return ok;
	}
	if (!strncmp(j->s, "true", 4) || !strncmp(j->s, "null", 4))
		j->s += 4;
	else if (!strncmp(j->s, "false", 5))
		j->s += 5;
	else {
		if (*j->s == '-')
			j->s++;
		if (*j->s == '0')
			j->s++;
		else if (*j->s >= '1' && *j->s <= '9')
			while (*j->s >= '0' && *j->s <= '9')
				j->s++;
		else
			return false;
		if (*j->s == '.') {
			j->s++;
			if (*j->s < '0' || *j->s > '9')
				return false;
			while (*j->s >= '0' && *j->s <= '9')
				j->s++;
		}
		if (*j->s == 'e' || *j->s == 'E') {
			j->s++;
			if (*j->s == '+' || *j->s == '-')
				j->s++;
			if (*j->s < '0' || *j->s > '9')
				return false;
			while (*j->s >= '0' && *j->s <= '9')
				j->s++;
		}
	}
	capture(j, start);
	return true;
}

/* One JSON object and nothing after it but whitespace. */
static bool json_valid(struct jp *j, const char *text)
{
	j->s = text;
	j->path[0] = '\0';
	ws(j);
	if (*j->s != '{' || !jvalue(j))
		return false;
	ws(j);
	return *j->s == '\0';
}

static void test_validator(void)
{
	static const char *const ok[] = { "{}", "{\"a\": [1, -2.5e3, true, null, \"x\\n\\u00e9\"]}", " {\"a\":{\"b\":0}} \n" };
	static const char *const no[] = { "", "[]", "{", "{\"a\":}", "{\"a\":1,}", "{\"a\":01}", "{\"a\":\"\x01\"}",
					  "{\"a\":\"\\x\"}", "{\"a\":tru}", "{} {}", "{'a':1}", "{\"a\":1 \"b\":2}" };
	struct jp j = { .nwant = 0 };
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!json_valid(&j, ok[i]))
			FAIL("validator rejects valid %s", ok[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (json_valid(&j, no[i]))
			FAIL("validator accepts invalid %s", no[i]);
	struct jp k = { .want = { "a.b", "c[1]" }, .nwant = 2 };
	ASSERT_TRUE(json_valid(&k, "{\"a\":{\"b\":\"KVM\"},\"c\":[1,false]}"));
	ASSERT_STREQ(k.got[0], "KVM");
	ASSERT_STREQ(k.got[1], "false");
}

/* ---- running the binary ---- */

/* The hypervisor this test expects, from its own CPUID reading. NULL = no opinion. */
static const char *expected_hypervisor(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return NULL;
	if (!((c >> 31) & 1))
		return access("/sys/hypervisor/type", F_OK) == 0 ? NULL : "none";
	for (unsigned base = 0x40000000; base <= 0x40000100; base += 0x100) {
		char s[13];
		__cpuid(base, a, b, c, d);
		memcpy(s, &b, 4);
		memcpy(s + 4, &c, 4);
		memcpy(s + 8, &d, 4);
		s[12] = '\0';
		if (!strcmp(s, "KVMKVMKVM"))
			return "KVM";
	}
#endif
	return NULL;
}

struct meta {
	char hypervisor[64], kernel[256], default_event[64];
	int n;
};

static void meta_cb(void *ctx, const char *key, const char *value)
{
	struct meta *m = ctx;
	ASSERT_NOT_NULL(key);
	ASSERT_NOT_NULL(value);
	ASSERT_NULL(strchr(value, '\n'));
	m->n++;
	if (!strcmp(key, "hypervisor"))
		snprintf(m->hypervisor, sizeof(m->hypervisor), "%s", value);
	else if (!strcmp(key, "kernel"))
		snprintf(m->kernel, sizeof(m->kernel), "%s", value);
	else if (!strcmp(key, "default_event"))
		snprintf(m->default_event, sizeof(m->default_event), "%s", value);
}

/* s with every run of digits (and the points within it) replaced by one '#'. */
static const char *figures_masked(const char *s, char *out, size_t len)
{
	size_t n = 0;
	while (*s && n + 1 < len) {
		if (*s >= '0' && *s <= '9') {
			while ((*s >= '0' && *s <= '9') || (*s == '.' && s[1] >= '0' && s[1] <= '9'))
				s++;
			out[n++] = '#';
		} else {
			out[n++] = *s++;
		}
	}
	out[n] = '\0';
	return out;
}

int main(void)
{
	test_validator();
	if (access(VIPROF_BIN, X_OK))
		FAIL("%s is not built (%s)", VIPROF_BIN, strerror(errno));

	int st;
	char *json = run_sh_read(VIPROF_BIN " probe --json", &st);
	ASSERT_EQ(st, 0);
	struct jp j = { .want = { "hypervisor.name", "pmu.hw_sampling", "recommendation", "default_event",
				  "kernel.release", "events[4].name", "events[4].sample" },
			.nwant = 7 };
	if (!json_valid(&j, json))
		FAIL("probe --json is not one valid JSON object; stopped at: %.60s", j.s);
	if (access("/usr/bin/python3", X_OK) == 0) {
		int pst;
		free(run_sh_read(VIPROF_BIN " probe --json | /usr/bin/python3 -m json.tool >/dev/null", &pst));
		ASSERT_EQ(pst, 0);
	}
	const char *hv = j.got[0];
	fprintf(stderr, "probe: hypervisor %s, hw_sampling %s, default %s\n", hv, j.got[1], j.got[3]);
	const char *want = expected_hypervisor();
	if (want)
		ASSERT_STREQ(hv, want);
	ASSERT_TRUE(!strcmp(j.got[1], "true") || !strcmp(j.got[1], "false"));
	struct utsname u;
	ASSERT_OK(uname(&u));
	ASSERT_STREQ(j.got[4], u.release);
	/* The fifth event tested is cpu-clock, which samples wherever perf works at all. */
	ASSERT_STREQ(j.got[5], "cpu-clock");
	if (geteuid() == 0)
		ASSERT_STREQ(j.got[6], "true");
	ASSERT_GT(strlen(j.got[2]), 40);
	if (!strcmp(j.got[1], "false") && geteuid() == 0) {
		ASSERT_STREQ(j.got[3], "cpu-clock");
		ASSERT_CONTAINS(j.got[2], "cpu-clock");
		if (strcmp(hv, "none"))
			ASSERT_CONTAINS(j.got[2], hv);
	}

	/* Text: aligned sections, ending with the same recommendation. */
	char *text = run_sh_read(VIPROF_BIN " probe", &st);
	ASSERT_EQ(st, 0);
	ASSERT_CONTAINS(text, "Hypervisor\n");
	ASSERT_CONTAINS(text, "\nEvents ");
	ASSERT_CONTAINS(text, "  cpu-clock ");
	char *rec = strstr(text, "\nRecommendation:\n  ");
	ASSERT_NOT_NULL(rec);
	rec += strlen("\nRecommendation:\n  ");
	/* The same sentence; its figures (steal since boot) may move between the two runs. */
	char *nl = strchr(rec, '\n');
	ASSERT_NOT_NULL(nl);
	ASSERT_STREQ(nl, "\n");
	*nl = '\0';
	char a[4096], b[4096];
	ASSERT_STREQ(figures_masked(rec, a, sizeof(a)), figures_masked(j.got[2], b, sizeof(b)));

	/* Usage errors exit 2, --help 0. */
	free(run_sh_read(VIPROF_BIN " probe --bogus 2>/dev/null", &st));
	ASSERT_EQ(st, 2);
	free(run_sh_read(VIPROF_BIN " probe extra 2>/dev/null", &st));
	ASSERT_EQ(st, 2);
	char *help = run_sh_read(VIPROF_BIN " probe --help", &st);
	ASSERT_EQ(st, 0);
	ASSERT_CONTAINS(help, "--json");

	/* The in-process API agrees with the binary. */
	struct vp_probe *p = vp_probe__run();
	ASSERT_NOT_NULL(p);
	struct meta m = { .n = 0 };
	vp_probe__foreach_meta(p, meta_cb, &m);
	ASSERT_GT(m.n, 10);
	ASSERT_STREQ(m.hypervisor, hv);
	ASSERT_STREQ(m.kernel, u.release);
	ASSERT_STREQ(m.default_event, j.got[3]);
	ASSERT_STREQ(figures_masked(vp_probe__recommendation(p), a, sizeof(a)), figures_masked(j.got[2], b, sizeof(b)));
	vp_probe__free(p);
	vp_probe__free(NULL);
	free(json);
	free(text);
	free(help);
	return 0;
}
